//go:build linux

package integration

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestFaultWrapperNeverLogsToken runs the generated remote_debug.py's
// connect path in a real Python process with a distinctive token, against
// a proxy that accepts it, one that refuses it and none at all, quiet and
// with SPARKDAP_VERBOSE=1, and looks for the token in everything the
// worker and the proxy write.
func TestFaultWrapperNeverLogsToken(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	py := python(t)
	ctx := testContext(t, 3*time.Minute)
	const secret = "tok-" + "d3adb33f-never-print-me"
	accepting := startFaultProxy(t, ctx, "--token", secret)
	refusing := startFaultProxy(t, ctx) // expects testToken
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()

	dir := t.TempDir()
	// The token is not baked in: it comes from the environment, as on a
	// cluster (spark.executorEnv.SPARKDAP_TOKEN).
	if out, err := exec.CommandContext(ctx, sparkdapBinary(t), "wrap", "-o", dir).CombinedOutput(); err != nil {
		t.Fatalf("sparkdap wrap: %v\n%s", err, out)
	}
	// The wrapper's own entry point for one task, minus Spark: load the
	// configuration and connect as a selected task would.
	const script = `
import sys
sys.path.insert(0, sys.argv[1])
import remote_debug as r
cfg = r._config()
r._connect(cfg, {"stageId": 1, "partitionId": 0, "attemptNumber": 0, "taskAttemptId": 7})
print("DEBUGGER", r._st().debugger, flush=True)
`
	for _, tt := range []struct {
		name, proxy, want string
	}{
		{"accepted", accepting.Executors, "DEBUGGER connected"},
		// SPARKDAP/2: a proxy with another token cannot prove it knows
		// this one, so the worker gives up before it says anything.
		{"refused", refusing.Executors, "did not prove it knows the access token"},
		{"no proxy", nobody, "unreachable"},
	} {
		for _, verbose := range []string{"", "1"} {
			t.Run(tt.name+"/verbose="+verbose, func(t *testing.T) {
				cmd := exec.CommandContext(ctx, py, "-c", script, dir)
				cmd.Env = append(os.Environ(), "SPARKDAP_TOKEN="+secret, "SPARKDAP_PROXY="+tt.proxy,
					"SPARKDAP_VERBOSE="+verbose, "SPARKDAP_CONNECT_TIMEOUT=3", "SPARKDAP_HANDSHAKE_TIMEOUT=10")
				cmd.WaitDelay = 5 * time.Second
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("worker: %v\n%s", err, out)
				}
				if !strings.Contains(string(out), tt.want) {
					t.Fatalf("worker output lacks %q:\n%s", tt.want, out)
				}
				if strings.Contains(string(out), secret) {
					t.Fatalf("the worker wrote the token:\n%s", out)
				}
			})
		}
	}
	for name, p := range map[string]*faultProxy{"accepting": accepting, "refusing": refusing} {
		if strings.Contains(p.Log(), secret) {
			t.Errorf("the %s proxy's log shows the token", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "remote_debug.py")); err != nil || strings.Contains(string(b), secret) {
		t.Errorf("remote_debug.py holds the token without --embed-token (read err %v)", err)
	}
}
