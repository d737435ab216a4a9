package control

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestListen: the control socket is the user's only (0600 in a 0700
// directory, made so if looser), a socket a dead server left is replaced,
// and neither a live server's socket, nor a file that is not a socket, nor
// a linked directory is touched.
func TestListen(t *testing.T) {
	base := testenv.SocketDir(t)
	dir := filepath.Join(base, "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode(), err, want)
		}
	}
	if _, err := Listen(path); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "another sparkdap serve answers there") {
		t.Errorf("second listen on a live socket: %v", err)
	}
	// A server that died leaves its socket (no unlink on close here).
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the dead server's socket is gone already: %v", err)
	}
	l2, err := Listen(path)
	if err != nil {
		t.Fatalf("listen over a dead server's socket: %v", err)
	}
	l2.Close()

	plain := filepath.Join(dir, "plain.sock")
	if err := os.WriteFile(plain, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(plain); !errors.Is(err, ErrNotSocket) || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(plain); string(b) != "mine" {
		t.Errorf("the regular file was changed: %q", b)
	}
	elsewhere := testenv.SocketDir(t)
	if err := os.Symlink(elsewhere, filepath.Join(base, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(base, "linked", "c.sock")); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "a link is not followed") {
		t.Errorf("listen in a linked directory: %v", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("a socket was made through the link: %v", ents)
	}
}

// TestPathFor: serve and capture derive the same socket from the same
// --ide, and different ones from different ports.
func TestPathFor(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got := PathFor("127.0.0.1:4711"); got != "/run/user/1000/sparkdap/ide-127.0.0.1-4711.sock" {
		t.Errorf("PathFor = %s", got)
	}
	if PathFor("127.0.0.1:4711") == PathFor("127.0.0.1:4712") {
		t.Error("two IDE ports share a control socket")
	}
	if got := PathFor("[::1]:4711"); got != "/run/user/1000/sparkdap/ide-__1-4711.sock" {
		t.Errorf("PathFor(IPv6) = %s", got)
	}
}
