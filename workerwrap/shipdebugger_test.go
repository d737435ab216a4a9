package workerwrap

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/safefile"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

func TestParseShipMode(t *testing.T) {
	for _, ok := range []string{ShipAuto, ShipAlways, ShipNever} {
		if got, err := ParseShipMode(ok); err != nil || got != ok {
			t.Errorf("ParseShipMode(%q) = %q, %v", ok, got, err)
		}
	}
	_, err := ParseShipMode("yes")
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != "ShipDebugger" {
		t.Errorf("ParseShipMode(yes): %v, want a SettingError for ShipDebugger", err)
	}
}

func TestJobSettingsShipTheWheelNextToTheWrapper(t *testing.T) {
	got := JobSettings("/w/remote_debug.py", "", Shipped{Wheel: "/w/" + ShippedDebugpyWheel, Always: true})
	want := []Setting{
		{ConfDaemonModule, ModuleName},
		{confPyFiles, "/w/remote_debug.py,/w/" + ShippedDebugpyWheel},
		{confExecutorEnv + "PYTHONPATH", "/w"},
		{confExecutorEnv + EnvShipDebugger, ShipAlways},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JobSettings =\n%v\nwant\n%v", got, want)
	}
	if got := JobSettings("/w/remote_debug.py", "", Shipped{}); got[1].Value != "/w/remote_debug.py" || len(got) != 3 {
		t.Errorf("JobSettings without a wheel = %v", got)
	}
	if got := JobSettings("/w/remote_debug.py", "", Shipped{Never: true}); got[len(got)-1] != (Setting{confExecutorEnv + EnvShipDebugger, ShipNever}) {
		t.Errorf("JobSettings, never = %v", got)
	}
}

func TestApplyShipsTheWheel(t *testing.T) {
	wheel := "/w/" + ShippedDebugpyWheel
	in := Injection{WrapperPath: "/w/remote_debug.py", Shipped: Shipped{Wheel: wheel}}
	got, err := in.Apply([]string{"--py-files", "deps.zip", "app.py"})
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != "deps.zip,/w/remote_debug.py,"+wheel {
		t.Errorf("--py-files %q", got[1])
	}
	got, err = in.Apply([]string{"--conf", "spark.submit.pyFiles=a.py", "app.py"})
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != "spark.submit.pyFiles=a.py,/w/remote_debug.py,"+wheel {
		t.Errorf("spark.submit.pyFiles: %q", got[1])
	}
	in.Shipped.Wheel = "/elsewhere/" + ShippedDebugpyWheel
	if _, err := in.Apply([]string{"app.py"}); err == nil || !strings.Contains(err.Error(), "next to the wrapper") {
		t.Errorf("a wheel away from the wrapper: %v", err)
	}
}

func TestDebuggerCacheDirIsPrivate(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache) // macOS's UserCacheDir
	dir, err := DebuggerCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v, want a 0700 directory", dir, fi.Mode(), err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := DebuggerCacheDir(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("an open cache directory stays %v", fi.Mode())
	}
	// A symlink planted where the cache goes is refused, never followed.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	_, err = DebuggerCacheDir()
	var we *WheelError
	if !errors.Is(err, safefile.ErrSymlink) || !errors.As(err, &we) {
		t.Errorf("symlinked cache: %v, want a WheelError wrapping ErrSymlink", err)
	}
}

// fakePython writes an executable that stands for python3 running pip.
func fakePython(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDebugpyWheelErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name, python string
		want         string
		is           error
	}{
		{"no python", filepath.Join(t.TempDir(), "nope"), "not found (install Python 3 with pip", nil},
		{"no pip", fakePython(t, `echo "/usr/bin/python3: No module named pip" >&2; exit 1`), "has no pip", ErrNoPip},
		{"offline", fakePython(t, `echo "ERROR: Could not find a version that satisfies the requirement debugpy==1.8.21" >&2; exit 1`),
			"pip download failed (offline?", nil},
		{"another file", fakePython(t, `for a; do d=$a; [ "$prev" = --dest ] && dest=$a; prev=$a; done; echo junk > "$dest/`+ShippedDebugpyWheel+`"`),
			"is not the wheel PyPI publishes", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := t.TempDir()
			_, err := DebugpyWheel(ctx, c.python, cache)
			var we *WheelError
			if !errors.As(err, &we) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a WheelError saying %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("err = %v, want it to wrap %v", err, c.is)
			}
			if c.name == "offline" && !strings.Contains(err.Error(), "Could not find a version") {
				t.Errorf("pip's own words are missing: %v", err)
			}
			if left, _ := os.ReadDir(cache); len(left) != 0 {
				t.Errorf("left in the cache: %v", left)
			}
		})
	}
	t.Run("tampered cache", func(t *testing.T) {
		cache := t.TempDir()
		if err := os.WriteFile(filepath.Join(cache, ShippedDebugpyWheel), []byte("evil"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := DebugpyWheel(ctx, "python3", cache)
		if err == nil || !strings.Contains(err.Error(), "cached copy unusable") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestDebugpyWheelFromPip downloads the real wheel with the machine's pip
// (from pip's cache when it has it), caches it, and places it.
func TestDebugpyWheelFromPip(t *testing.T) {
	testenv.SkipIfShort(t, "runs pip")
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "no python3: %v", err)
	}
	cache := t.TempDir()
	path, err := DebugpyWheel(context.Background(), "python3", cache)
	if err != nil {
		t.Skipf("pip cannot get the wheel here: %v", err)
	}
	if path != filepath.Join(cache, ShippedDebugpyWheel) {
		t.Errorf("path %s", path)
	}
	// The second call is the cache's, even without a working python.
	if again, err := DebugpyWheel(context.Background(), "/nonexistent/python3", cache); err != nil || again != path {
		t.Errorf("cached: %s, %v", again, err)
	}
	dir := t.TempDir()
	placed, err := PlaceWheel(path, dir)
	if err != nil || placed != filepath.Join(dir, ShippedDebugpyWheel) {
		t.Fatalf("PlaceWheel: %s, %v", placed, err)
	}
	// A symlink where the copy goes is refused, never written through.
	other := t.TempDir()
	victim := filepath.Join(other, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(link, ShippedDebugpyWheel)); err != nil {
		t.Fatal(err)
	}
	if _, err := PlaceWheel(path, link); !errors.Is(err, safefile.ErrSymlink) {
		t.Errorf("PlaceWheel over a symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("written through the symlink")
	}
}
