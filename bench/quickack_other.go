//go:build !linux

package bench

import "net"

func quickAck(c net.Conn) net.Conn { return c }
