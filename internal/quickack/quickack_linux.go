// Package quickack keeps a TCP connection from delaying its ACKs.
//
// pydevd writes each message as two sends (header, then body) without
// TCP_NODELAY. If the receiver delays its ACK, Nagle holds pydevd's second
// send for ~40 ms on Linux, so every message from pydevd costs 40 ms.
// Linux delays ACKs in its "pingpong" (interactive) mode, which a socket
// enters when it sends data soon after receiving some: after every request
// the proxy writes. Setting TCP_QUICKACK leaves that mode (and sends an ACK
// already due); only sending data enters it again. So the option is re-armed
// after every write, not before every read: one setsockopt per message
// written instead of one per read (a relayed request made two or three
// reads of pydevd's connection, each with its setsockopt).
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

// Wrap returns c re-arming TCP_QUICKACK after every write; other kinds of
// connection are returned as they are. Writes made to its file descriptor
// directly (wirequeue's) call AfterWrite.
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

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.TCPConn.Write(p)
	_ = c.raw.Control(c.AfterWrite)
	return n, err
}

// AfterWrite re-arms TCP_QUICKACK on fd, the connection's: called after
// each write (wirequeue.WriteHook).
func (c *conn) AfterWrite(fd uintptr) {
	_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
}

// PlainConn is the connection c wraps: writing its file descriptor and then
// calling AfterWrite is all c's Write does (wirequeue.PlainConn).
func (c *conn) PlainConn() net.Conn { return c.TCPConn }
