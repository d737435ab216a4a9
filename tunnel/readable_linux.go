package tunnel

import "syscall"

// waitReadable blocks until fd has data or EOF, without reading it, and
// re-arms TCP_QUICKACK first. The quick ACK matters: pydevd sends each
// message as header then body without TCP_NODELAY, so a delayed ACK here
// would hold the body for ~40 ms (see the wire notes).
func waitReadable(rc syscall.RawConn) error {
	var b [1]byte
	return rc.Read(func(fd uintptr) bool {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch err {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // not ready: the poller waits and calls again
			}
			// Data, EOF or an error: the real Read reports which.
			return true
		}
	})
}
