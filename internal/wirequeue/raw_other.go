//go:build !unix

package wirequeue

import (
	"errors"
	"net"
	"syscall"
)

// PlainConn is a net.Conn wrapper whose Write is its underlying
// connection's, then its AfterWrite; see raw_unix.go.
type PlainConn interface {
	PlainConn() net.Conn
}

// inlineWrites: off Unix every write goes through the flusher.
const inlineWrites = false

// rawOf is nil off Unix: every write goes through the flusher.
func rawOf(net.Conn) syscall.RawConn { return nil }

func writeNonblocking(syscall.RawConn, []byte, func(uintptr)) (int, error) {
	return 0, errors.New("no inline writes on this platform")
}
