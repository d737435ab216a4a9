// Package acceptretry keeps a server accepting through transient accept
// errors. Running out of file descriptors (EMFILE, ENFILE) or a connection
// aborted before it was accepted fails one Accept, not the listener: a
// server that returned on it would drop every session it holds. As net/http
// does, it waits and tries again, 5 ms doubling up to 1 s.
package acceptretry

import (
	"context"
	"errors"
	"net"
	"time"
)

// MaxWait is the longest pause between two failed accepts.
const MaxWait = time.Second

// Accept returns the next connection from l. It returns an error only when
// ctx ends, l is closed (net.ErrClosed) or done reports that err ends the
// listener (nil: only those). Other errors are passed to onRetry, with the
// pause before the next try, and retried.
func Accept(ctx context.Context, l net.Listener, done func(error) bool, onRetry func(err error, wait time.Duration)) (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || (done != nil && done(err)) {
			return nil, err
		}
		if wait == 0 {
			wait = 5 * time.Millisecond
		} else {
			wait = min(2*wait, MaxWait)
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}
