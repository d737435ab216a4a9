//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCaptureAndControlDirsPlantedInTmp: the real binary, left nothing of
// the user's (no HOME, XDG_CACHE_HOME, XDG_RUNTIME_DIR) but a shared
// TMPDIR where another user (uid 65534) made the directories first: serve
// refuses to start, naming the directory and the fix, and writes nothing
// there; capture refuses to talk to the socket the other user put there.
func TestCaptureAndControlDirsPlantedInTmp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can make a directory another user's")
	}
	bin := sparkdapBinary(t)
	for _, tc := range []struct{ name, planted string }{
		{"sparkdap-uid", "%s"}, {"sparkdap-uid/captures", "%s/captures"}, {"sparkdap-uid/run", "%s/run"},
	} {
		planted := tc.planted
		t.Run(tc.name, func(t *testing.T) {
			tmp, err := os.MkdirTemp("", "sdpd")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(tmp) })
			if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			own := filepath.Join(tmp, fmt.Sprintf("sparkdap-%d", os.Geteuid()))
			dir := filepath.Join(tmp, fmt.Sprintf(planted, filepath.Base(own)))
			if dir != own {
				if err := os.Mkdir(own, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			// The old shared name, planted too: never used.
			old := filepath.Join(tmp, "sparkdap", "captures")
			if err := os.MkdirAll(old, 0o777); err != nil {
				t.Fatal(err)
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			serve := exec.CommandContext(ctx, bin, "serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0", "--live", "off")
			serve.Env = env
			out, err := serve.CombinedOutput()
			want := dir + " is owned by uid 65534, not you (uid 0): remove it or set XDG_"
			if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
				t.Fatalf("serve: %v: %s; want it refused with %q", err, out, want)
			}

			if strings.HasSuffix(planted, "/captures") {
				return // the socket's directory is the user's own here
			}
			// capture, with the other user's server where its socket is.
			if err := os.MkdirAll(filepath.Join(own, "run"), 0o777); err != nil {
				t.Fatal(err)
			}
			sock, err := net.Listen("unix", filepath.Join(own, "run", "ide-127.0.0.1-4711.sock"))
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
			capture := exec.CommandContext(ctx, bin, "capture")
			capture.Env = env
			out, err = capture.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "sparkdap capture: control socket ") || !strings.Contains(string(out), " is ") {
				t.Errorf("capture: %v: %s; want it refused", err, out)
			}
			select {
			case <-accepted:
				t.Error("capture talked to the other user's socket")
			case <-time.After(200 * time.Millisecond):
			}
			for _, d := range []string{dir, old} {
				ents, _ := os.ReadDir(d)
				for _, e := range ents {
					if d != dir || !strings.HasSuffix(e.Name(), ".sock") && e.Name() != "run" {
						t.Errorf("written into %s: %s", d, e.Name())
					}
				}
			}
		})
	}
}
