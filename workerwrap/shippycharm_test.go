package workerwrap

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/safefile"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

type tarMember struct {
	name, body string
	typ        byte // tar.TypeReg if 0
	link       string
}

// sdistOf makes a gzip tar of members.
func sdistOf(t *testing.T, members []tarMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: m.name, Typeflag: typ, Mode: 0o644, Linkname: m.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(m.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(m.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// goodSdist is the shape of pydevd-pycharm's sdist: modules and packages
// at the top, Cython sources and prebuilt extensions beside them, build
// files.
func goodSdist(version string, extra ...tarMember) []tarMember {
	top := "pydevd_pycharm-" + version + "/"
	return append([]tarMember{
		{name: top, typ: tar.TypeDir},
		{name: top + "PKG-INFO", body: "Metadata-Version: 2.1\nName: pydevd-pycharm\nVersion: " + version + "\n\nVersion: 1\n"},
		{name: top + "setup.py", body: "setup()"},
		{name: top + "setup_cython.py", body: "build()"},
		{name: top + "MANIFEST.in", body: ""},
		{name: top + "pydevd_pycharm.egg-info/PKG-INFO", body: ""},
		{name: top + "pydevd.py", body: "# pydevd"},
		{name: top + "pydevd_pycharm.py", body: "# pydevd_pycharm"},
		{name: top + "_pydevd_bundle/", typ: tar.TypeDir},
		{name: top + "_pydevd_bundle/__init__.py", body: ""},
		{name: top + "_pydevd_bundle/pydevd_cython.pyx", body: "cdef"},
		{name: top + "_pydevd_bundle/pydevd_cython.c", body: "int x;"},
		{name: top + "_pydevd_bundle/pydevd_cython_darwin_311_64.cpython-311-darwin.so", body: "\x7fELF"},
		{name: top + "_pydevd_bundle/pydevd_cython_win32_311_64.cp311-win_amd64.pyd", body: "MZ"},
		{name: top + "pydev_ipython/qt.py", body: "# qt"},
		{name: top + "pydevd_attach_to_process/attach_linux_amd64.so", body: "\x7fELF"},
		{name: top + "pydevd_attach_to_process/linux_and_mac/attach.cpp", body: "int main;"},
	}, extra...)
}

// pipLeaving is a fake python3 whose pip download writes file into
// --dest and records its arguments in args.
func pipLeaving(t *testing.T, name string, data []byte) (python, args string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "sdist")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args = filepath.Join(dir, "args")
	return fakePython(t, `echo "$@" > '`+args+`'; for a; do [ "$prev" = --dest ] && dest=$a; prev=$a; done; cp '`+src+`' "$dest/`+name+`"`), args
}

func zipNames(t *testing.T, p string) []string {
	t.Helper()
	zr, err := zip.OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	return names
}

// TestPyCharmArchiveFromSdist: the zip that ships holds the sdist's
// Python and pydevd's prebuilt attach helpers, no Cython speedups, no
// sources of compiled parts, no build files, and is cached.
func TestPyCharmArchiveFromSdist(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, build, sdist, version string
	}{
		{"full build", "253.33813.30", "pydevd_pycharm-253.33813.30.tar.gz", "253.33813.30"},
		{"partial build", "253.33813", "pydevd_pycharm-253.33813.30.tar.gz", "253.33813.30"},
		{"old sdist name", "253.17525.96", "pydevd-pycharm-253.17525.96.tar.gz", "253.17525.96"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			py, args := pipLeaving(t, tc.sdist, sdistOf(t, goodSdist(tc.version)))
			p, err := PyCharmArchive(ctx, py, cache, tc.build)
			if err != nil {
				t.Fatal(err)
			}
			if p != filepath.Join(cache, PyCharmArchiveName(tc.version)) {
				t.Errorf("path %s", p)
			}
			got := strings.Join(zipNames(t, p), " ")
			if want := "_pydevd_bundle/__init__.py pydev_ipython/qt.py pydevd.py pydevd_attach_to_process/attach_linux_amd64.so pydevd_pycharm.py"; got != want {
				t.Errorf("the zip holds %s, want %s", got, want)
			}
			a, _ := os.ReadFile(args)
			if !strings.Contains(string(a), "--no-binary :all:") || !strings.Contains(string(a), "pydevd-pycharm=="+tc.build+".*") {
				t.Errorf("pip ran with %s", a)
			}
			if left, _ := os.ReadDir(cache); len(left) != 1 {
				t.Errorf("the cache holds %v, want only the zip", left)
			}
			// Cached: no pip needed again, for the build as given.
			if again, err := PyCharmArchive(ctx, "/nonexistent/python3", cache, tc.build); err != nil || again != p {
				t.Errorf("cached: %s, %v", again, err)
			}
			dir := t.TempDir()
			placed, err := PlacePyCharmArchive(p, dir)
			if err != nil || placed != filepath.Join(dir, PyCharmArchiveName(tc.version)) {
				t.Errorf("PlacePyCharmArchive: %s, %v", placed, err)
			}
		})
	}
}

func TestPyCharmArchiveRefuses(t *testing.T) {
	ctx := context.Background()
	const v = "253.33813.30"
	top := "pydevd_pycharm-" + v + "/"
	name := "pydevd_pycharm-" + v + ".tar.gz"
	good := func(extra ...tarMember) []byte { return sdistOf(t, goodSdist(v, extra...)) }
	cases := []struct {
		name, build, file string
		data              []byte
		want              string
		is                error
	}{
		{"a symlink", v, name, good(tarMember{name: top + "evil.py", typ: tar.TypeSymlink, link: "/etc/passwd"}), "not a regular file", nil},
		{"a hard link", v, name, good(tarMember{name: top + "evil.py", typ: tar.TypeLink, link: top + "pydevd.py"}), "not a regular file", nil},
		{"a member outside", v, name, good(tarMember{name: top + "../evil.py", body: "x"}), "lies outside", nil},
		{"an absolute member", v, name, good(tarMember{name: "/tmp/evil.py", body: "x"}), "lies outside", nil},
		{"another project", v, name, sdistOf(t, append(goodSdist(v)[:1], tarMember{name: top + "PKG-INFO", body: "Name: evil\nVersion: " + v + "\n"})), "want pydevd-pycharm", nil},
		{"no pydevd", v, name, sdistOf(t, goodSdist(v)[:3]), "no pydevd.py", nil},
		{"not gzip", v, name, []byte("<html>captive portal</html>"), "not gzip", nil},
		{"another build", "253.33813", "pydevd_pycharm-253.40000.1.tar.gz", sdistOf(t, goodSdist("253.40000.1")), "not a release of build 253.33813", nil},
		{"not an sdist", v, "pydevd_pycharm-" + v + "-py3-none-any.whl", good(), "not a pydevd-pycharm sdist", nil},
		{"no pip", v, "", nil, "has no pip", ErrNoPip},
		{"offline", v, "", nil, "pip download failed (offline, or no such build?", nil},
		{"not a build", "latest", "", nil, "not a PyCharm build", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := t.TempDir()
			var py string
			switch c.name {
			case "no pip":
				py = fakePython(t, `echo "/usr/bin/python3: No module named pip" >&2; exit 1`)
			case "offline":
				py = fakePython(t, `echo "ERROR: No matching distribution found for pydevd-pycharm==253.33813.30.*" >&2; exit 1`)
			case "not a build":
				py = "/nonexistent/python3"
			default:
				py, _ = pipLeaving(t, c.file, c.data)
			}
			_, err := PyCharmArchive(ctx, py, cache, c.build)
			var we *WheelError
			if !errors.As(err, &we) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a WheelError saying %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("err = %v, want it to wrap %v", err, c.is)
			}
			if c.name == "offline" && !strings.Contains(err.Error(), "No matching distribution") {
				t.Errorf("pip's own words are missing: %v", err)
			}
			if left, _ := os.ReadDir(cache); len(left) != 0 {
				t.Errorf("left in the cache: %v", left)
			}
		})
	}
}

// TestPyCharmArchiveTamperedCache: a cached zip that holds what sparkdap
// never puts there is not shipped, nor copied next to the wrapper.
func TestPyCharmArchiveTamperedCache(t *testing.T) {
	cache := t.TempDir()
	p := filepath.Join(cache, PyCharmArchiveName("253.33813.30"))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range []string{"pydevd.py", "pydevd_pycharm.py", "_pydevd_bundle/pydevd_cython.cpython-311-x86_64-linux-gnu.so"} {
		if _, err := zw.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PyCharmArchive(context.Background(), "/nonexistent/python3", cache, "253.33813"); err == nil || !strings.Contains(err.Error(), "cached copy unusable") {
		t.Errorf("err = %v", err)
	}
	if _, err := PlacePyCharmArchive(p, t.TempDir()); err == nil {
		t.Errorf("PlacePyCharmArchive placed a tampered zip")
	}
}

// TestPyCharmArchiveFromPip downloads a real pydevd-pycharm sdist (one of
// requirements-debuggers.txt's builds) with the machine's pip and checks
// the zip against what `pip install` of that build puts in site-packages:
// every module and package it installs, no speedups.
func TestPyCharmArchiveFromPip(t *testing.T) {
	testenv.SkipIfShort(t, "runs pip")
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "no python3: %v", err)
	}
	const build = "253.33813.30"
	cache := t.TempDir()
	p, err := PyCharmArchive(context.Background(), "python3", cache, build)
	if err != nil && strings.Contains(err.Error(), "pip download failed") {
		t.Skipf("pip cannot get the sdist here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}
	for _, n := range zipNames(t, p) {
		switch filepath.Ext(n) {
		case ".c", ".cpp", ".h", ".pyx", ".pxd", ".pyd", ".exe":
			t.Errorf("the zip ships %s", n)
		case ".so", ".dll", ".dylib":
			if !strings.HasPrefix(n, "pydevd_attach_to_process/") || strings.Contains(n, "cython") {
				t.Errorf("the zip ships %s", n)
			}
		}
		first, _, _ := strings.Cut(n, "/")
		top[first] = true
	}
	installed := filepath.Join("..", ".cache", "debuggers", "pydevd-pycharm-"+build)
	entries, err := os.ReadDir(installed)
	if err != nil {
		t.Skipf("no installed copy to compare with (scripts/setup-debuggers): %v", err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".dist-info") || n == "__pycache__" || n == "bin" || n == "setup_cython.py" {
			continue // setup-debuggers's mark, pip's records, bytecode, the console script, the build helper
		}
		if !top[n] {
			t.Errorf("pip install puts %s into site-packages; the zip lacks it", n)
		}
	}
	if _, err := safefile.ReadFile(p); err != nil {
		t.Fatal(err)
	}
}
