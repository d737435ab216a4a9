package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/workerwrap"
)

// useShippedWheel makes doctor get the debugger the job ships from get,
// for the test.
func useShippedWheel(t *testing.T, get func(context.Context) (string, error)) {
	t.Helper()
	old := shippedWheel
	shippedWheel = get
	t.Cleanup(func() { shippedWheel = old })
}

// realShippedWheel is the real debugpy wheel jobs ship, fetched into a
// private cache with the machine's pip (from pip's cache when it has it).
func realShippedWheel(t *testing.T) string {
	t.Helper()
	path, err := workerwrap.DebugpyWheel(context.Background(), "python3", t.TempDir())
	if err != nil {
		testenv.Missing(t, "pip cannot get the debugpy wheel here: %v", err)
	}
	return path
}

// TestDoctorThroughGatewayShipsDebugger: the gateway's Python has no
// debugpy and the job ships one (--ship-debugger auto or always), as in
// the YARN recipe's packed environment. The test worker on the gateway
// then runs with the wheel the job ships, uploaded beside the wrapper and
// unpacked as the executors' daemon does: it reaches the proxy and is
// listed, and leaves nothing behind on the gateway. A gateway Python
// with debugpy runs the worker with its own, without the wheel; a wheel
// that cannot be had is a WARN that says what was not checked; a job
// that ships none still fails on a Python without debugpy.
func TestDoctorThroughGatewayShipsDebugger(t *testing.T) {
	testenv.SkipIfShort(t, "starts sshd and debugpy workers")
	py := debugpyPython(t)
	wheel := realShippedWheel(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	// The gateway's temporary files: where the test worker unpacks.
	gatewayTmp := t.TempDir()
	t.Setenv("TMPDIR", gatewayTmp)
	dir := t.TempDir()
	key, pub := writeClientKey(t, dir)
	srv := startSSHServer(t, pub, true)
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(knownhosts.Line([]string{knownhosts.Normalize(srv.addr)}, srv.hostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ide, exe := startHub(t, "gw-tok")
	// The gateway's Python without debugpy: site-packages off.
	shim := filepath.Join(dir, "python-without-debugpy")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec "+shellquote.Quote(py)+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := func(remotePython string, ships bool) Config {
		return Config{IDE: ide, Executors: exe, Python: py, Token: "gw-tok", ShipsDebugger: ships,
			Gateway: &Gateway{Dest: "me@" + srv.addr, IdentityFiles: []string{key}, KnownHosts: known,
				RemoteListen: exe, RemotePython: remotePython}}
	}
	const name = "test connection through the gateway"

	useShippedWheel(t, func(context.Context) (string, error) { return wheel, nil })
	code, out := runDoctor(t, config(shim, true))
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, name, vOK, "a worker on the gateway with the debugpy the job ships ("+shim+" has none; "+
		workerwrap.ShippedDebugpyWheel+" uploaded beside the wrapper", "reached "+exe+" and was listed on the IDE port")
	if left, _ := filepath.Glob(filepath.Join(gatewayTmp, "sparkdap-*")); len(left) > 0 {
		t.Errorf("the test worker left %v on the gateway", left)
	}

	// A gateway Python with its own debugpy: no upload.
	useShippedWheel(t, func(context.Context) (string, error) {
		t.Error("doctor fetched the shipped debugger for a gateway Python that has debugpy")
		return wheel, nil
	})
	code, out = runDoctor(t, config(py, true))
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, name, vOK, "a debugpy worker on the gateway reached "+exe)

	// The job ships none: a gateway Python without debugpy fails.
	code, out = runDoctor(t, config(shim, false))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, name, vFail, "no debugpy in", "pip install debugpy")

	// A wheel the gateway's Python cannot use: the wrapper's reason.
	bad := filepath.Join(t.TempDir(), workerwrap.ShippedDebugpyWheel)
	if err := os.WriteFile(bad, []byte("not a zip"), 0o600); err != nil {
		t.Fatal(err)
	}
	useShippedWheel(t, func(context.Context) (string, error) { return bad, nil })
	code, out = runDoctor(t, config(shim, true))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, name, vFail, "this Python has no debugpy, and no shipped debugger fits: "+workerwrap.ShippedDebugpyWheel+" unreadable")

	// The shipped debugger cannot be had here: said, not failed.
	useShippedWheel(t, func(context.Context) (string, error) { return "", errors.New("pip download failed (offline?)") })
	code, out = runDoctor(t, config(shim, true))
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, name, vWarn, "not run: "+shim+" on the gateway has no debugpy, and the debugger the job ships",
		"cannot be had here: pip download failed (offline?)", "fix: sparkdap submit, conf and wrap ship it from the same place")
}
