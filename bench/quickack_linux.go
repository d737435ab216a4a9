//go:build linux

package bench

import (
	"net"
	"syscall"
)

// quickAck re-arms TCP_QUICKACK before every read, as the proxy does on
// pydevd's socket (dap/quickack_linux.go), so a direct client is measured
// with the same treatment of pydevd's header/body sends.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func quickAck(c net.Conn) net.Conn {
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
