package doctor

import (
	"archive/tar"
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type archiveEntry struct {
	name, link, data string
	dir              bool
}

func writeTar(t *testing.T, path string, entries []archiveEntry) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t *testing.T, path string, entries []archiveEntry) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, e := range entries {
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestUnpackArchiveStaysInside: doctor unpacks the job's --archives to run
// the executors' Python; an archive cannot make it write anywhere but its
// scratch directory, nor fill the disk.
func TestUnpackArchiveStaysInside(t *testing.T) {
	for _, tc := range []struct {
		name    string
		zip     bool
		entries []archiveEntry
		limit   int64
		wantErr string // "" for success
		want    map[string]string
	}{
		{name: "a packed venv", entries: []archiveEntry{
			{name: "bin/", dir: true}, {name: "bin/python", link: "/usr/bin/python3"},
			{name: "lib/python3.11/site-packages/debugpy/__init__.py", data: "x = 1\n"},
		}, want: map[string]string{"lib/python3.11/site-packages/debugpy/__init__.py": "x = 1\n"}},
		{name: "a write through the archive's own symlink", entries: []archiveEntry{
			{name: "escape", link: "OUTSIDE"}, {name: "escape/planted", data: "owned"},
		}, wantErr: "goes through the symlink escape"},
		{name: "a file over a symlink it made", entries: []archiveEntry{
			{name: "pyvenv.cfg", link: "OUTSIDE/planted"}, {name: "pyvenv.cfg", data: "owned"},
		}, want: map[string]string{"pyvenv.cfg": "owned"}},
		{name: "a file twice, as venv-pack writes pyvenv.cfg", entries: []archiveEntry{
			{name: "pyvenv.cfg", data: "home = /old\n"}, {name: "bin/", dir: true}, {name: "pyvenv.cfg", data: "home = /usr/bin\n"},
		}, want: map[string]string{"pyvenv.cfg": "home = /usr/bin\n"}},
		{name: "a zip with a file twice", zip: true, entries: []archiveEntry{
			{name: "pyvenv.cfg", data: "first"}, {name: "pyvenv.cfg", data: "second"},
		}, want: map[string]string{"pyvenv.cfg": "second"}},
		{name: "a symlink over a file, then a write through it", entries: []archiveEntry{
			{name: "lib", data: "x"}, {name: "lib", link: "OUTSIDE"}, {name: "lib/planted", data: "owned"},
		}, wantErr: "goes through the symlink lib"},
		{name: "a file over a directory", entries: []archiveEntry{
			{name: "bin/python", data: "x"}, {name: "bin", data: "owned"},
		}, wantErr: "replace the directory"},
		{name: "a path with ..", entries: []archiveEntry{{name: "../planted", data: "owned"}}, wantErr: "outside the archive"},
		{name: "a zip path with ..", zip: true, entries: []archiveEntry{{name: "a/../../planted", data: "owned"}}, wantErr: "outside the archive"},
		{name: "over the size cap", limit: 15, entries: []archiveEntry{
			{name: "a", data: "0123456789"}, {name: "b", data: "0123456789"},
		}, wantErr: "more than"},
		{name: "a zip over the size cap", zip: true, limit: 15, entries: []archiveEntry{
			{name: "a", data: "0123456789"}, {name: "b", data: "0123456789"},
		}, wantErr: "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range tc.entries {
				tc.entries[i].link = strings.ReplaceAll(tc.entries[i].link, "OUTSIDE", outside)
			}
			archive := filepath.Join(base, "env.tar")
			if tc.zip {
				archive = filepath.Join(base, "env.zip")
				writeZip(t, archive, tc.entries)
			} else {
				writeTar(t, archive, tc.entries)
			}
			if tc.limit > 0 {
				old := maxUnpackBytes
				maxUnpackBytes = tc.limit
				t.Cleanup(func() { maxUnpackBytes = old })
			}
			dir := filepath.Join(base, "scratch", "unpacked")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			err := unpackArchive(archive, dir)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unpack: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("unpack: %v; want an error with %q", err, tc.wantErr)
			}
			for _, planted := range []string{filepath.Join(outside, "planted"), filepath.Join(base, "scratch", "planted"), filepath.Join(base, "planted")} {
				if _, err := os.Lstat(planted); err == nil {
					t.Errorf("the archive wrote %s, outside the directory it was unpacked in", planted)
				}
			}
			for name, data := range tc.want {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(got) != data {
					t.Errorf("%s: %q, %v; want %q", name, got, err, data)
				}
			}
		})
	}
}
