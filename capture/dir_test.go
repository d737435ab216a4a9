package capture

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/safefile"
)

// TestRunPrivateDir: a capture is written only into a directory that is
// the user's alone. One another user made (or may write to), or a link,
// is refused and nothing is written there, so nobody else can swap the
// capture that replay runs.
func TestRunPrivateDir(t *testing.T) {
	start := map[string]any{"id": 3, "chunks": 1, "header": map[string]any{"payloadBytes": 6, "dataBytes": 2, "pickler": "cloudpickle",
		"function": map[string]any{"name": "f", "file": "/exec/job.py"}}}
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir string) // makes dir as an attacker would
		want  string
	}{
		{name: "writable by others", plant: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o777)
		}, want: "is writable by others"},
		{name: "another user's", plant: func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can make a directory another user's")
			}
			mkdir(t, dir, 0o700)
			if err := os.Lchown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, want: "is owned by uid 65534, not you"},
		{name: "a link", plant: func(t *testing.T, dir string) {
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}, want: "is a symbolic link"},
		{name: "missing", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "captures")
			if tc.plant != nil {
				tc.plant(t, dir)
			}
			w := &fakeWorker{start: start, chunks: []string{"{}code"}}
			res, err := Run(context.Background(), w, Request{Dir: dir, Executor: 3})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Lstat(dir); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(res.Path) != dir {
					t.Errorf("capture %s in %v (%v), want a new 0700 directory", res.Path, fi.Mode(), err)
				}
				return
			}
			if !errors.Is(err, ErrCapture) || !errors.Is(err, safefile.ErrUnsafeDir) || !strings.Contains(err.Error(), dir+" "+tc.want) {
				t.Fatalf("err %v, want ErrCapture naming %s %s", err, dir, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("written into the refused directory: %v", ents)
			}
		})
	}
}

func mkdir(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil { // past the umask
		t.Fatal(err)
	}
}
