package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// pathOf is a path of n bytes ending in a socket's name.
func pathOf(prefix string, n int) string {
	const name = "/ide-127.0.0.1-4711.sock"
	return prefix + strings.Repeat("d", n-len(prefix)-len(name)) + name
}

// TestSocketPathPerOS: each OS's limit on a Unix socket's path (its
// sun_path less the NUL: 107 bytes on Linux and Windows, 103 on macOS),
// checked as that OS would: a path at the limit passes, one byte more is
// a *PathTooLongError naming the path, the limit and the fix, which for
// the default directory is XDG_RUNTIME_DIR.
func TestSocketPathPerOS(t *testing.T) {
	for _, tc := range []struct {
		goos string
		path string
		dflt bool
		max  int // 0: accepted
	}{
		{"linux", "/run/user/1000/sparkdap/ide-127.0.0.1-4711.sock", true, 0},
		{"linux", pathOf("/home/", 107), false, 0},
		{"linux", pathOf("/home/", 108), false, 107},
		{"linux", pathOf("/run/user/1000/", 108), true, 107},
		{"darwin", "/Users/someone/Library/Caches/sparkdap/run/ide-127.0.0.1-4711.sock", true, 0},
		{"darwin", pathOf("/Users/", 103), false, 0},
		{"darwin", pathOf("/Users/", 104), false, 103},
		// The shared temp directory's fallback: macOS's $TMPDIR is long.
		{"darwin", pathOf("/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/sparkdap-501/run/", 104), true, 103},
		{"freebsd", pathOf("/home/", 104), false, 103},
		{"windows", `C:\Users\someone\AppData\Local\sparkdap\run\ide-127.0.0.1-4711.sock`, true, 0},
		{"windows", pathOf(`C:\Users\`, 107), false, 0},
		{"windows", pathOf(`C:\Users\`, 108), true, 107},
		{"plan9", pathOf("/usr/", 200), false, 0},
	} {
		err := checkSocketPath(tc.path, tc.goos, tc.dflt)
		var te *PathTooLongError
		if tc.max == 0 {
			if err != nil {
				t.Errorf("%s, %d bytes: %v", tc.goos, len(tc.path), err)
			}
			continue
		}
		if !errors.As(err, &te) || te.Max != tc.max || te.Len != len(tc.path) || te.Path != tc.path ||
			!strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "give a shorter path") ||
			strings.Contains(err.Error(), "XDG_RUNTIME_DIR") != tc.dflt {
			t.Errorf("%s, %d bytes (default %v): %v, want a PathTooLongError over %d with its fix", tc.goos, len(tc.path), tc.dflt, err, tc.max)
		}
	}
}

// TestSocketPathTooLongHere: on this OS, a $XDG_RUNTIME_DIR deep enough
// that the default socket cannot fit is refused by serve's Listen and
// capture's Call with the fix, before any directory is made; a --control
// path too long, with its own fix.
func TestSocketPathTooLongHere(t *testing.T) {
	deep := filepath.Join(testenv.SocketDir(t), strings.Repeat("r", 90))
	if err := os.Mkdir(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", deep)
	path := PathFor("127.0.0.1:4711")
	_, lerr := Listen(path)
	_, cerr := Call(context.Background(), path, Request{Op: OpWorkers})
	for what, err := range map[string]error{"listen": lerr, "call": cerr} {
		var te *PathTooLongError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "set XDG_RUNTIME_DIR to a shorter directory") {
			t.Errorf("%s on %d bytes: %v, want a PathTooLongError naming XDG_RUNTIME_DIR", what, len(path), err)
		}
	}
	if ents, _ := os.ReadDir(deep); len(ents) != 0 {
		t.Errorf("made in $XDG_RUNTIME_DIR: %v", ents)
	}
	explicit := filepath.Join(deep, "c.sock")
	if _, err := Listen(explicit); err == nil || strings.Contains(err.Error(), "XDG_RUNTIME_DIR") || !strings.Contains(err.Error(), "give a shorter path") {
		t.Errorf("listen on a long --control path: %v", err)
	}
}
