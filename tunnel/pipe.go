package tunnel

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/hashicorp/yamux"
)

// copyBufSize is what one direction of one connection borrows while it has
// bytes to move. Idle directions hold no buffer at all (see pipe), so the
// size only matters for throughput, and DAP messages are mostly small.
const copyBufSize = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// pipe joins an executor's TCP connection and its yamux stream until both
// directions end, then closes both. Thousands of debuggees can sit idle at
// once, so instead of io.Copy's buffer per direction for the connection's
// whole life, each direction first waits for data without a buffer and only
// then borrows one from the pool.
func pipe(tcp net.Conn, st *yamux.Stream) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		copyToStream(st, tcp)
		// Half-close: the debuggee stopped sending; answers may still come.
		_ = st.Close()
	}()
	go func() {
		defer wg.Done()
		copyFromStream(tcp, st)
		if cw, ok := tcp.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = tcp.Close()
		}
	}()
	wg.Wait()
	_ = tcp.Close()
	_ = st.Close()
}

// copyToStream moves executor bytes into the tunnel.
func copyToStream(dst *yamux.Stream, src net.Conn) {
	var rc syscall.RawConn
	if sc, ok := src.(syscall.Conn); ok {
		rc, _ = sc.SyscallConn()
	}
	for {
		if rc != nil {
			if err := waitReadable(rc); err != nil {
				return
			}
		}
		bp := bufPool.Get().(*[]byte)
		n, err := src.Read(*bp)
		var werr error
		if n > 0 {
			_, werr = dst.Write((*bp)[:n])
		}
		bufPool.Put(bp)
		if err != nil || werr != nil {
			if werr != nil {
				// The tunnel side is gone: make the debuggee see it now.
				_ = src.Close()
			}
			return
		}
	}
}

// copyFromStream moves tunnel bytes to the executor. A yamux Read with an
// empty buffer blocks until data arrives without consuming it.
func copyFromStream(dst net.Conn, src *yamux.Stream) {
	for {
		if _, err := src.Read(nil); err != nil {
			if !errors.Is(err, io.EOF) {
				// Reset or tunnel lost, not a clean end: drop the debuggee's
				// connection so pydevd sees it at once and runs on.
				_ = dst.Close()
			}
			return
		}
		bp := bufPool.Get().(*[]byte)
		n, err := src.Read(*bp)
		var werr error
		if n > 0 {
			_, werr = dst.Write((*bp)[:n])
		}
		bufPool.Put(bp)
		// Drop yamux's receive buffer once drained: an idle stream then
		// costs no buffer memory.
		src.Shrink()
		if err != nil || werr != nil {
			return
		}
	}
}
