package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// sharedTemp makes a directory standing for a shared /tmp (sticky, open
// to all) and makes it the only place left for the control socket: no
// $XDG_RUNTIME_DIR, no $XDG_CACHE_HOME, no $HOME.
func sharedTemp(t *testing.T) string {
	t.Helper()
	tmp := testenv.SocketDir(t)
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "HOME"} {
		t.Setenv(v, "")
	}
	t.Setenv("TMPDIR", tmp)
	return tmp
}

// plant makes dir as another user would: mode perm, owned by owner (0:
// the test's own user; another owner needs root).
func plant(t *testing.T, dir string, perm os.FileMode, owner int) {
	t.Helper()
	if owner != 0 && os.Geteuid() != 0 {
		t.Skip("only root can make a directory another user's")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	if owner != 0 {
		if err := os.Lchown(dir, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirFallsBackToOwnName: without a directory of the user's, the
// control socket goes under the shared temp directory in a name of the
// user's own, not the sparkdap/ another user may have made first.
func TestDirFallsBackToOwnName(t *testing.T) {
	tmp := sharedTemp(t)
	want := filepath.Join(tmp, fmt.Sprintf("sparkdap-%d", os.Geteuid()), "run")
	if Dir() != want {
		t.Fatalf("Dir() = %s, want %s", Dir(), want)
	}
	// Another user's sparkdap/run, open to all, with their socket in it.
	theirs := filepath.Join(tmp, "sparkdap", "run")
	plant(t, theirs, 0o777, 0)
	l, err := Listen(PathFor("127.0.0.1:4711"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("the socket went into the other user's directory: %v", ents)
	}
	for _, d := range []string{filepath.Dir(want), want} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", d, fi.Mode(), err)
		}
	}
}

// TestPlantedDirRefused: a control directory another user made first (or
// may write to, or linked elsewhere) is refused by serve's Listen and by
// capture's Call, naming it and the fix: serve puts no socket there and
// capture never talks to the socket in it.
func TestPlantedDirRefused(t *testing.T) {
	own := fmt.Sprintf("sparkdap-%d", os.Geteuid())
	for _, tc := range []struct {
		name    string
		planted string // under the shared temp directory
		perm    os.FileMode
		owner   int
		link    bool
		want    string
	}{
		{name: "per-user directory another user's", planted: own, perm: 0o777, owner: 65534, want: "is owned by uid 65534, not you"},
		{name: "per-user directory theirs, closed", planted: own, perm: 0o700, owner: 65534, want: "is owned by uid 65534, not you"},
		{name: "run another user's", planted: own + "/run", perm: 0o755, owner: 65534, want: "is owned by uid 65534, not you"},
		{name: "per-user directory open to all", planted: own, perm: 0o777, want: "is writable by others"},
		{name: "run open to the group", planted: own + "/run", perm: 0o770, want: "is writable by others"},
		{name: "per-user directory a link", planted: own, link: true, want: "is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := sharedTemp(t)
			dir := filepath.Join(tmp, tc.planted)
			// The other user's server, listening where capture would go.
			theirs := testenv.SocketDir(t)
			if tc.link {
				if err := os.Symlink(theirs, dir); err != nil {
					t.Fatal(err)
				}
			} else {
				plant(t, dir, tc.perm, tc.owner)
			}
			path := PathFor("127.0.0.1:4711")
			target := path
			if tc.link {
				target = filepath.Join(theirs, "run", filepath.Base(path))
				if err := os.Mkdir(filepath.Dir(target), 0o700); err != nil {
					t.Fatal(err)
				}
			} else if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
				t.Fatal(err)
			}
			sock, err := net.Listen("unix", target)
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			accepted := make(chan struct{}, 1)
			go func() {
				if c, err := sock.Accept(); err == nil {
					accepted <- struct{}{}
					c.Close()
				}
			}()

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = Call(ctx, path, Request{Op: OpWorkers})
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), dir+" "+tc.want) ||
					!strings.Contains(err.Error(), "remove it") || !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") {
					t.Errorf("%s: %v, want ErrUnsafeDir naming %s %s and the fix", what, err, dir, tc.want)
				}
			}
			check("capture's call", err)

			l, err := Listen(path)
			if err == nil {
				l.Close()
			}
			check("serve's listen", err)
			select {
			case <-accepted:
				t.Error("the other user's socket was connected to")
			case <-time.After(100 * time.Millisecond):
			}
			if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("the other user's socket was replaced: %v %v", fi, err)
			}
		})
	}
}

// TestExplicitDirChecked: a socket given by path (--control) must be in
// a directory of the user's alone too: /tmp itself is refused.
func TestExplicitDirChecked(t *testing.T) {
	tmp := testenv.SocketDir(t)
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tmp, "c.sock")
	if l, err := Listen(path); err == nil || !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), tmp+" is writable by others") {
		if l != nil {
			l.Close()
		}
		t.Errorf("listen in a shared directory: %v", err)
	}
	if _, err := Call(context.Background(), path, Request{Op: OpWorkers}); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("call in a shared directory: %v", err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("made in the shared directory: %v", ents)
	}
	// Missing directories on the way are made 0700 and are fine.
	deep := filepath.Join(testenv.SocketDir(t), "a", "b")
	l, err := Listen(filepath.Join(deep, "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, d := range []string{deep, filepath.Dir(deep)} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", d, fi.Mode(), err)
		}
	}
}
