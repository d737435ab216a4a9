package testenv

import (
	"net"
	"testing"
)

// TCPPair is one loopback TCP connection, both ends: ours dialed, theirs
// accepted. Both close when the test ends. Tests that need real socket
// behaviour (partial writes, delayed ACKs) use it instead of net.Pipe.
func TCPPair(t testing.TB) (ours, theirs net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ours, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	theirs, err = ln.Accept()
	if err != nil {
		ours.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return ours, theirs
}
