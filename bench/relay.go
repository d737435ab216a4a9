package bench

import (
	"encoding/json"
	"io"
	"net"
	"os"
)

// A byte relay: the floor under any proxy that sits in its own process and
// looks at what passes. Section 1's (a1) path puts it between the client
// and pydevd, so the cost of a second hop alone (two more loopback
// connections, each read, written and woken once per message) is measured
// beside what sparkdap adds on top of it (parsing, allowlisting, id and
// path translation).

// runRelay serves as the relay child: every connection to its listener is
// joined to a new connection to target, and bytes are copied both ways
// through user space, as a proxy that reads its messages must. It runs
// until its stdin closes.
func runRelay(target string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := json.NewEncoder(os.Stdout).Encode(readyLine{Executors: ln.Addr().String()}); err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayConn(c, target)
		}
	}()
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// relayConn copies between c and a new connection to target until either
// side ends.
func relayConn(c net.Conn, target string) {
	d, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	copyBytes := func(dst, src net.Conn) {
		// Through a buffer, not splice(2) (which io.Copy would pick for
		// two TCP connections): a proxy has to see the bytes.
		_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 32<<10))
		dst.Close()
		src.Close()
	}
	go copyBytes(d, c)
	copyBytes(c, d)
}
