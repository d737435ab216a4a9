// Package quickack keeps a TCP connection from delaying its ACKs.
//
// pydevd writes each message as two sends (header, then body) without
// TCP_NODELAY. If the receiver delays its ACK, Nagle holds pydevd's second
// send for ~40 ms on Linux, so every message from pydevd costs 40 ms. Linux
// clears TCP_QUICKACK after use, hence it is re-armed before every read.
// The proxy wraps pydevd's connections with it; the benchmarks wrap their
// direct client the same way, so both are measured alike.
package quickack

import (
	"net"
	"syscall"
)

type conn struct {
	*net.TCPConn
	raw syscall.RawConn
}

// Wrap returns c re-arming TCP_QUICKACK before every read; other kinds of
// connection are returned as they are.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &conn{TCPConn: tc, raw: raw}
}

func (c *conn) Read(p []byte) (int, error) {
	_ = c.raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
	return c.TCPConn.Read(p)
}
