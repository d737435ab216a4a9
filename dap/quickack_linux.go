package dap

import (
	"net"
	"syscall"
)

// quickAckConn re-arms TCP_QUICKACK before every read. pydevd writes each
// message as two sends without TCP_NODELAY; with delayed ACKs on our side,
// Nagle holds pydevd's second send for ~40 ms. Linux clears QUICKACK after
// use, hence every read.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func withQuickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &quickAckConn{TCPConn: tc, raw: raw}
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	_ = c.raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
	return c.TCPConn.Read(p)
}
