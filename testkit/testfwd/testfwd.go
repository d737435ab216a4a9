// Package testfwd is a TCP port forwarder for tests: it stands for an
// `ssh -L`, a container's port mapping or any relay between an IDE and
// the proxy, so that the IDE reaches the proxy at another address than
// the one the proxy listens on.
package testfwd

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Start relays every connection made to a loopback port of its own to
// target until the test ends, and returns that port's address.
func Start(t testing.TB, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Logf("testfwd: accept: %v", err)
				}
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				t.Logf("testfwd: dial %s: %v", target, err)
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				// Either side ending ends the relayed connection, as a
				// forwarder whose peer hung up does.
				dst.Close()
				src.Close()
			}
			wg.Add(2)
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return ln.Addr().String()
}
