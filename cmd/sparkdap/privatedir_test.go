package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// sharedTempOnly leaves sparkdap no directory of the user's: no $HOME, no
// $XDG_CACHE_HOME, no $XDG_RUNTIME_DIR, only $TMPDIR, a directory open to
// all (sticky) as /tmp is. It returns $TMPDIR and the name of the user's
// own directory in it.
func sharedTempOnly(t *testing.T) (tmp, own string) {
	t.Helper()
	tmp = testenv.SocketDir(t)
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "HOME", tokenEnv, ideTokenEnv} {
		t.Setenv(v, "")
	}
	t.Setenv("TMPDIR", tmp)
	return tmp, fmt.Sprintf("sparkdap-%d", os.Geteuid())
}

// plantDir makes dir as another user would: mode perm, owned by owner
// (0: the test's own user; another owner needs root).
func plantDir(t *testing.T, dir string, perm os.FileMode, owner int) {
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

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

var serveArgs = []string{"serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0", "--live", "off",
	"--token", "9f86d081884c7d659a2feaa0c55ad015"}

// TestCaptureDirNotShared: with nothing of the user's but a shared $TMPDIR,
// captures go to sparkdap-<uid>/captures there, never into the
// sparkdap/captures another user made first (where they could swap the
// capture replay runs); and a sparkdap-<uid> or captures directory that
// is not the user's alone stops serve, naming it and the fix, with
// nothing written there.
func TestCaptureDirNotShared(t *testing.T) {
	t.Run("another user's sparkdap/captures is not used", func(t *testing.T) {
		tmp, own := sharedTempOnly(t)
		theirs := filepath.Join(tmp, "sparkdap", "captures")
		plantDir(t, filepath.Dir(theirs), 0o777, 65534)
		plantDir(t, theirs, 0o777, 65534)
		dir := defaultCaptureDir()
		if want := filepath.Join(tmp, own, "captures"); dir != want {
			t.Fatalf("default capture directory %s, want %s", dir, want)
		}
		if err := captureDirReady(dir); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Dir(dir), dir} {
			if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v %v, want a new 0700 directory", d, fi.Mode(), err)
			}
		}
		if e := entries(t, theirs); len(e) != 0 {
			t.Errorf("written into the other user's directory: %v", e)
		}
	})
	for _, tc := range []struct {
		name, planted string // under $TMPDIR; own is the user's own name
		perm          os.FileMode
		owner         int
		want          string
	}{
		{name: "per-user directory another user's", planted: "own", perm: 0o777, owner: 65534, want: "is owned by uid 65534, not you (uid 0)"},
		{name: "captures another user's", planted: "own/captures", perm: 0o777, owner: 65534, want: "is owned by uid 65534, not you (uid 0)"},
		{name: "captures open to all", planted: "own/captures", perm: 0o777, want: "is writable by others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, own := sharedTempOnly(t)
			dir := filepath.Join(tmp, strings.Replace(tc.planted, "own", own, 1))
			plantDir(t, dir, tc.perm, tc.owner)
			var out, errb bytes.Buffer
			code := run(serveArgs, &out, &errb)
			msg := errb.String()
			if code != 1 || !strings.Contains(msg, "capture directory: "+dir+" "+tc.want) || !strings.Contains(msg, ": remove it or set XDG_CACHE_HOME") {
				t.Fatalf("exit %d: %s; want a refusal naming %s and the fix", code, msg, dir)
			}
			if strings.Contains(msg, "IDE port") {
				t.Errorf("serve started: %s", msg)
			}
			if e := entries(t, dir); len(e) != 0 {
				t.Errorf("written into the refused directory: %v", e)
			}
		})
	}
	t.Run("--capture-dir open to all", func(t *testing.T) {
		sharedTempOnly(t)
		dir := filepath.Join(t.TempDir(), "caps")
		plantDir(t, dir, 0o777, 0)
		var out, errb bytes.Buffer
		code := run(append(append([]string{}, serveArgs...), "--capture-dir", dir), &out, &errb)
		if msg := errb.String(); code != 1 || !strings.Contains(msg, "--capture-dir: "+dir+" is writable by others") ||
			!strings.Contains(msg, "give another --capture-dir") {
			t.Fatalf("exit %d: %s", code, msg)
		}
	})
}

// TestControlDirNotShared: a control directory another user made first
// under a shared $TMPDIR (or one open to others) is refused by serve,
// which stops, and by capture, which never talks to the socket in it.
func TestControlDirNotShared(t *testing.T) {
	for _, tc := range []struct {
		name, planted string
		perm          os.FileMode
		owner         int
		want          string
	}{
		{name: "run another user's", planted: "own/run", perm: 0o777, owner: 65534, want: "is owned by uid 65534, not you (uid 0)"},
		{name: "run open to all", planted: "own/run", perm: 0o777, want: "is writable by others"},
		{name: "per-user directory another user's", planted: "own", perm: 0o777, owner: 65534, want: "is owned by uid 65534, not you (uid 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, own := sharedTempOnly(t)
			dir := filepath.Join(tmp, strings.Replace(tc.planted, "own", own, 1))
			plantDir(t, dir, tc.perm, tc.owner)
			run := filepath.Join(tmp, own, "run")
			if err := os.MkdirAll(run, 0o777); err != nil {
				t.Fatal(err)
			}
			// Their server, where capture's socket would be.
			sock, err := net.Listen("unix", filepath.Join(run, "ide-127.0.0.1-4711.sock"))
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
			var out, errb bytes.Buffer
			code := runCmd([]string{"capture"}, &out, &errb)
			if msg := errb.String(); code != 1 || !strings.Contains(msg, dir+" "+tc.want) || !strings.Contains(msg, ": remove it or set XDG_RUNTIME_DIR") {
				t.Errorf("capture: exit %d: %s; want a refusal naming %s and the fix", code, msg, dir)
			}
			select {
			case <-accepted:
				t.Error("capture talked to the other user's socket")
			case <-time.After(100 * time.Millisecond):
			}

			if strings.Contains(tc.name, "per-user") {
				return // serve stops at the capture directory, tested above
			}
			out.Reset()
			errb.Reset()
			code = runCmd(serveArgs, &out, &errb)
			if msg := errb.String(); code != 1 || !strings.Contains(msg, "control socket: ") ||
				!strings.Contains(msg, dir+" "+tc.want) || !strings.Contains(msg, ": remove it or set XDG_RUNTIME_DIR") {
				t.Errorf("serve: exit %d: %s; want a refusal naming %s and the fix", code, msg, dir)
			}
			if e := entries(t, run); len(e) != 1 {
				t.Errorf("serve wrote into the refused directory: %v", e)
			}
		})
	}
}

// runCmd is run, for a test that has a variable named run.
var runCmd = run
