//go:build unix

package connbudget

import (
	"bytes"
	"net"
	"syscall"
)

// canPeek: pendingBytes looks at the kernel buffer here.
const canPeek = true

// lookableConn reports whether pendingBytes can see what waits unread on
// conn: a socket can be, a connection carried in user space (an SSH
// tunnel's stream, whose bytes wait in the multiplexer's buffer) cannot.
func lookableConn(conn net.Conn) bool {
	_, ok := conn.(syscall.Conn)
	return ok
}

// pendingBytes looks at what the peer sent on conn that nobody has read
// yet: whether there is any, and whether it holds a line end (the end of
// a hello line or of a DAP header: a whole first unit of either
// protocol). A connection whose reader has not been scheduled is not
// silent for it. It never blocks and never takes the bytes (MSG_PEEK,
// MSG_DONTWAIT), and uses Control, not the read side of the descriptor,
// which the connection's own blocked Read holds.
func pendingBytes(conn net.Conn) (some, line bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int
	var buf [peekBytes]byte
	_ = rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	if n <= 0 {
		return false, false
	}
	return true, bytes.IndexByte(buf[:n], '\n') >= 0
}
