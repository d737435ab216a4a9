package main

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/workerwrap"
)

// realWheel makes the commands ship the real debugpy wheel, fetched once
// into a private cache with the machine's pip.
func realWheel(t *testing.T) {
	t.Helper()
	testenv.SkipIfShort(t, "runs pip")
	cache := t.TempDir()
	path, err := workerwrap.DebugpyWheel(context.Background(), "python3", cache)
	if err != nil {
		testenv.Missing(t, "pip cannot get the debugpy wheel here: %v", err)
	}
	old := wheelSource
	wheelSource = func(context.Context) (string, error) { return path, nil }
	t.Cleanup(func() { wheelSource = old })
}

// pyFilesOf returns the value after --py-files in a printed command line
// or conf listing.
func pyFilesOf(t *testing.T, out string) string {
	t.Helper()
	fields := strings.Fields(out)
	for i, f := range fields {
		if f == "--py-files" && i+1 < len(fields) {
			return strings.Trim(fields[i+1], `'"`)
		}
	}
	t.Fatalf("no --py-files in:\n%s", out)
	return ""
}

// shippedConfs returns the file names --py-files ships and the
// spark.executorEnv.SPARKDAP_SHIP_DEBUGGER setting, if any.
func shippedConfs(t *testing.T, out string) (names []string, env string) {
	for _, p := range strings.Split(pyFilesOf(t, out), ",") {
		names = append(names, filepath.Base(p))
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(strings.Trim(f, `'"`), "spark.executorEnv."+workerwrap.EnvShipDebugger+"="); ok {
			env = v
		}
	}
	return names, env
}

// TestConfAndSubmitShipTheSameDebugger: what `conf` prints and what
// `submit` runs spark-submit with ship the same files and settings, for
// every --ship-debugger.
func TestConfAndSubmitShipTheSameDebugger(t *testing.T) {
	realWheel(t)
	t.Setenv("SPARKDAP_TOKEN", "5ec4e7d1a90b2f6c83e0d5a7b1c94f20")
	fake := filepath.Join(t.TempDir(), "spark-submit")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"auto", "always", "never"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			if code := run([]string{"wrap", "-o", dir, "--ship-debugger", mode}, &stdout, &stderr); code != 0 {
				t.Fatalf("wrap: %s", stderr.String())
			}
			_, err := os.Stat(filepath.Join(dir, workerwrap.ShippedDebugpyWheel))
			if (err == nil) != (mode != "never") {
				t.Errorf("wrap --ship-debugger %s: wheel next to the wrapper: %v", mode, err)
			}
			stdout.Reset()
			if code := run([]string{"conf", "--wrapper", filepath.Join(dir, "remote_debug.py"), "--ship-debugger", mode}, &stdout, &stderr); code != 0 {
				t.Fatalf("conf: %s", stderr.String())
			}
			confNames, confEnv := shippedConfs(t, stdout.String())
			stdout.Reset()
			if code := run([]string{"submit", "-n", "--spark-submit", fake, "--ship-debugger", mode, "--", "--master", "yarn", "app.py"}, &stdout, &stderr); code != 0 {
				t.Fatalf("submit: %s", stderr.String())
			}
			subNames, subEnv := shippedConfs(t, stdout.String())
			want := []string{"remote_debug.py"}
			if mode != "never" {
				want = append(want, workerwrap.ShippedDebugpyWheel)
			}
			if strings.Join(confNames, ",") != strings.Join(want, ",") || strings.Join(subNames, ",") != strings.Join(want, ",") {
				t.Errorf("--py-files: conf %v, submit %v, want %v", confNames, subNames, want)
			}
			wantEnv := map[string]string{"always": "always", "never": "never"}[mode]
			if confEnv != wantEnv || subEnv != wantEnv {
				t.Errorf("%s: conf %q, submit %q, want %q", workerwrap.EnvShipDebugger, confEnv, subEnv, wantEnv)
			}
		})
	}
}

func TestShipDebuggerFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", "-", "--ship-debugger", "sometimes"}, &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "want auto, always or never") {
		t.Errorf("--ship-debugger sometimes: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"wrap", "-o", t.TempDir(), "--ide-kind", "pycharm", "--ship-debugger", "always"}, &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "--ship-debugger: always: with --ide-kind pycharm, name your PyCharm's build with --pycharm-build BUILD") {
		t.Errorf("pycharm, always: exit %d, %s", code, stderr.String())
	}
}

// TestShipDebuggerFailures: a wheel that cannot be had is a warning with
// auto (the executors may have debugpy) and an error with always.
func TestShipDebuggerFailures(t *testing.T) {
	old := wheelSource
	t.Cleanup(func() { wheelSource = old })
	cause := &workerwrap.WheelError{Wheel: workerwrap.ShippedDebugpyWheel, Problem: "python3 has no pip", Err: workerwrap.ErrNoPip}
	wheelSource = func(context.Context) (string, error) { return "", cause }
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", t.TempDir()}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "sparkdap: warning: shipping no debugger with the job (debugger to ship (") ||
		!strings.Contains(stderr.String(), "python3 has no pip") {
		t.Errorf("auto: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	w := &wrapFlags{shipDebugger: "always", ide: ideKindDAP, stderr: &stderr}
	_, err := w.shipped(context.Background(), t.TempDir())
	if !errors.Is(err, workerwrap.ErrNoPip) || !strings.HasPrefix(err.Error(), "--ship-debugger: ") {
		t.Errorf("always: %v", err)
	}
}

// fakePyCharmSource makes the commands ship a pydevd-pycharm zip of the
// build they are given, as PyCharmArchive would build it, without pip;
// err, when set, is what fetching it fails with. It returns the builds
// asked for.
func fakePyCharmSource(t *testing.T, err error) *[]string {
	t.Helper()
	var asked []string
	cache := t.TempDir()
	old := pycharmSource
	pycharmSource = func(_ context.Context, build string) (string, error) {
		asked = append(asked, build)
		if err != nil {
			return "", err
		}
		p := filepath.Join(cache, workerwrap.PyCharmArchiveName(build))
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, n := range []string{"pydevd.py", "pydevd_pycharm.py"} {
			if _, err := zw.Create(n); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return p, os.WriteFile(p, buf.Bytes(), 0o600)
	}
	t.Cleanup(func() { pycharmSource = old })
	return &asked
}

// TestShipPyCharm: with --ide-kind pycharm, wrap, conf and submit ship the
// pydevd-pycharm of --pycharm-build (none without it, never debugpy), and
// say what is wrong with the flags.
func TestShipPyCharm(t *testing.T) {
	t.Setenv("SPARKDAP_TOKEN", "5ec4e7d1a90b2f6c83e0d5a7b1c94f20")
	old := wheelSource
	wheelSource = func(context.Context) (string, error) {
		t.Error("a PyCharm job fetched debugpy")
		return "", nil
	}
	t.Cleanup(func() { wheelSource = old })
	fetchFailed := &workerwrap.WheelError{Wheel: "pydevd-pycharm 253.33813.30", Problem: "pip download failed (offline, or no such build?"}
	zip := workerwrap.PyCharmArchiveName("253.33813.30")
	for _, tc := range []struct {
		name  string
		flags []string
		fails error  // what fetching fails with
		ships string // the file next to the wrapper, "" none
		asked string // the build fetched, "" none
		code  int
		say   string // on stderr
		env   string // spark.executorEnv.SPARKDAP_SHIP_DEBUGGER
	}{
		{name: "build", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "253.33813.30"}, ships: zip, asked: "253.33813.30"},
		{name: "as Help → About shows it", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "PY-253.33813.30"}, ships: zip, asked: "253.33813.30"},
		{name: "always", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "253.33813.30", "--ship-debugger", "always"}, ships: zip, asked: "253.33813.30", env: "always"},
		{name: "never", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "253.33813.30", "--ship-debugger", "never"}, env: "never"},
		{name: "no build", flags: []string{"--ide-kind", "pycharm"}},
		{name: "no build, always", flags: []string{"--ide-kind", "pycharm", "--ship-debugger", "always"}, code: 1,
			say: "--ship-debugger: always: with --ide-kind pycharm, name your PyCharm's build with --pycharm-build BUILD"},
		{name: "not a build", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "latest"}, code: 1,
			say: `--pycharm-build: "latest" is not a PyCharm build`},
		{name: "not pycharm", flags: []string{"--pycharm-build", "253.33813.30"}, code: 1,
			say: "--pycharm-build: only with --ide-kind pycharm"},
		{name: "cannot be had", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "253.33813.30"}, fails: fetchFailed, asked: "253.33813.30",
			say: "sparkdap: warning: shipping no debugger with the job (debugger to ship (pydevd-pycharm 253.33813.30): pip download failed (offline, or no such build?); workers need pydevd-pycharm on the executors"},
		{name: "cannot be had, always", flags: []string{"--ide-kind", "pycharm", "--pycharm-build", "253.33813.30", "--ship-debugger", "always"}, fails: fetchFailed, asked: "253.33813.30", code: 1,
			say: "--ship-debugger: debugger to ship (pydevd-pycharm 253.33813.30): pip download failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := fakePyCharmSource(t, tc.fails)
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"wrap", "-o", dir}, tc.flags...), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.say) {
				t.Fatalf("wrap: exit %d, want %d; stderr %s, want %q", code, tc.code, stderr.String(), tc.say)
			}
			if strings.Join(*asked, ",") != tc.asked {
				t.Errorf("fetched %q, want %q", *asked, tc.asked)
			}
			if code != 0 {
				return
			}
			entries, _ := os.ReadDir(dir)
			var beside []string
			for _, e := range entries {
				if e.Name() != "remote_debug.py" {
					beside = append(beside, e.Name())
				}
			}
			if strings.Join(beside, ",") != tc.ships {
				t.Errorf("next to the wrapper: %q, want %q", beside, tc.ships)
			}
			stdout.Reset()
			if code := run(append([]string{"conf", "--wrapper", filepath.Join(dir, "remote_debug.py")}, tc.flags...), &stdout, &stderr); code != 0 {
				t.Fatalf("conf: %s", stderr.String())
			}
			names, env := shippedConfs(t, stdout.String())
			want := "remote_debug.py"
			if tc.ships != "" {
				want += "," + tc.ships
			}
			if strings.Join(names, ",") != want || env != tc.env {
				t.Errorf("conf ships %v with %s=%q, want %s and %q", names, workerwrap.EnvShipDebugger, env, want, tc.env)
			}
		})
	}
}
