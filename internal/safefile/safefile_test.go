package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// victim is a file outside the directory being written, standing for
// ~/.bashrc; it must never change.
func victim(t *testing.T) (path string, check func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "bashrc")
	const content = "export PATH=$HOME/bin:$PATH\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil || string(b) != content {
			t.Errorf("the victim file outside the directory changed: %q, %v", b, err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		if runtime.GOOS == "windows" {
			t.Skip("symlinks need privileges here:", err)
		}
		t.Fatal(err)
	}
	// Wine's os.Symlink reports success and makes nothing: Wine has no
	// symbolic links (real Windows has, for an administrator or with
	// Developer Mode).
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		if runtime.GOOS == "windows" {
			t.Skipf("os.Symlink made no link here (Lstat: %v, %v): no symbolic links on this system (Wine has none)", fi, err)
		}
		t.Fatalf("os.Symlink made no link: %v, %v", fi, err)
	}
}

// leftovers are the directory's entries other than want.
func leftovers(t *testing.T, dir string, want ...string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
outer:
	for _, e := range ents {
		for _, w := range want {
			if e.Name() == w {
				continue outer
			}
		}
		extra = append(extra, e.Name())
	}
	return extra
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) (after func())
		perm    fs.FileMode
		wantErr error // nil: written
	}{
		{name: "new file", perm: 0o600},
		{name: "replaces a file, mode as asked not as before", perm: 0o640, prepare: func(t *testing.T, path string) func() {
			if err := os.WriteFile(path, []byte("old old old old"), 0o666); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
		{name: "symlink to a victim is refused", perm: 0o644, wantErr: ErrSymlink, prepare: func(t *testing.T, path string) func() {
			v, check := victim(t)
			symlink(t, v, path)
			return check
		}},
		{name: "dangling symlink is refused, nothing created at its target", perm: 0o644, wantErr: ErrSymlink,
			prepare: func(t *testing.T, path string) func() {
				target := filepath.Join(t.TempDir(), "created-by-attacker")
				symlink(t, target, path)
				return func() {
					if _, err := os.Lstat(target); err == nil {
						t.Error("a file was created at the link's target")
					}
				}
			}},
		{name: "directory is refused", perm: 0o644, wantErr: ErrNotRegular, prepare: func(t *testing.T, path string) func() {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.json")
			var after func()
			if tt.prepare != nil {
				after = tt.prepare(t, path)
			}
			err := WriteFile(path, []byte("new"), tt.perm)
			if after != nil {
				after()
			}
			if extra := leftovers(t, dir, "out.json"); len(extra) > 0 {
				t.Errorf("left behind: %q", extra)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err %v, want %v naming %s", err, tt.wantErr, path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != "new" {
				t.Fatalf("read back %q, %v", b, err)
			}
			fi, _ := os.Lstat(path)
			if runtime.GOOS != "windows" && fi.Mode() != tt.perm {
				t.Errorf("mode %v, want %v", fi.Mode(), tt.perm)
			}
		})
	}
}

// A temp name someone predicted and planted (path+".tmp", the old
// --ready-file scheme) is neither written into nor moved into place.
func TestWriteFileIgnoresPlantedTempNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ready.json")
	v, check := victim(t)
	symlink(t, v, path+".tmp")
	if err := os.WriteFile(filepath.Join(dir, ".ready.json.tmp"), []byte("planted"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	check()
	if b, _ := os.ReadFile(filepath.Join(dir, ".ready.json.tmp")); string(b) != "planted" {
		t.Errorf("planted file changed: %q", b)
	}
	if b, _ := os.ReadFile(path); string(b) != "secret" {
		t.Errorf("destination %q", b)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(plain); err != nil || string(b) != "data" {
		t.Errorf("plain file: %q, %v", b, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	link := filepath.Join(dir, "link")
	v, _ := victim(t)
	symlink(t, v, link)
	if b, err := ReadFile(link); !errors.Is(err, ErrSymlink) || b != nil {
		t.Errorf("symlink: %q, %v; want ErrSymlink and no data", b, err)
	}
}
