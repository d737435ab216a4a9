//go:build !unix

package connbudget

import "net"

// pendingBytes cannot look without reading here (noPeek).
func pendingBytes(c net.Conn) (some, line bool) { return noPeek(c) }
