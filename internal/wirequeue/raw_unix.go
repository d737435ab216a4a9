//go:build unix

package wirequeue

import (
	"net"
	"syscall"
)

// inlineWrites: a sender may write a socket's descriptor itself
// (writeNonblocking).
const inlineWrites = true

// PlainConn is a net.Conn wrapper whose Write is its underlying
// connection's, followed by its AfterWrite if it is a WriteHook, and nothing
// more (quickack's), so the queue may write that connection's file
// descriptor itself.
type PlainConn interface {
	PlainConn() net.Conn
}

// rawOf is c's file descriptor for writes on a sender's goroutine, when
// writing it is all c's Write does: plain TCP and Unix connections and
// PlainConn wrappers of them. Anything else (an SSH channel, a pipe) gets
// nil, and its writes all go through the flusher.
func rawOf(c net.Conn) syscall.RawConn {
	var sc syscall.Conn
	switch t := c.(type) {
	case *net.TCPConn:
		sc = t
	case *net.UnixConn:
		sc = t
	case PlainConn:
		return rawOf(t.PlainConn())
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// writeNonblocking writes what of b the socket takes now, without waiting
// for room: n < len(b) with a nil error means the socket buffer is full.
// after, if set, runs with the descriptor once something was written.
func writeNonblocking(raw syscall.RawConn, b []byte, after func(fd uintptr)) (n int, err error) {
	var werr error
	err = raw.Write(func(fd uintptr) bool {
		defer func() {
			if n > 0 && after != nil {
				after(fd)
			}
		}()
		for n < len(b) {
			m, e := syscall.Write(int(fd), b[n:])
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true
			case e != nil:
				werr = e
				return true
			case m <= 0:
				return true // took nothing: the flusher goes on
			}
			n += m
		}
		return true // never wait: the flusher does that
	})
	if err == nil {
		err = werr
	}
	return n, err
}
