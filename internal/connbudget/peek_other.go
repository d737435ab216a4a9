//go:build !unix

package connbudget

import "net"

// canPeek: no look at the kernel buffer here.
const canPeek = false

// pendingBytes cannot look without reading here (noPeek).
func pendingBytes(c net.Conn) (some, line bool) { return noPeek(c) }

// lookableConn: nothing can be looked into here (notLookable).
func lookableConn(c net.Conn) bool { return notLookable(c) }
