package testenv

import (
	"net"
	"os"
	"testing"
)

// SocketDir is a new temporary directory, removed after the test, whose
// path is short enough for a Unix socket in it: a socket's path has at
// most 107 bytes (103 on macOS), which t.TempDir's long names can pass.
func SocketDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// StaleSocket leaves at path the socket file of a server that ended
// without removing it: nothing listens there, and a connect is refused.
func StaleSocket(t testing.TB, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}
