//go:build linux

package integration

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestDoctorThroughRealTunnel runs `sparkdap doctor --ssh` against a real
// `sparkdap serve --ssh` whose agent runs under a real sshd: the doctor's
// test worker runs on the gateway, connects to the agent's port, and the
// proxy must list it on its IDE port. Then the same with the wrong token,
// which must fail with the token's fix.
func TestDoctorThroughRealTunnel(t *testing.T) {
	testenv.SkipIfShort(t, "starts sshd")
	ctx := testContext(t, 3*time.Minute)
	py := python(t)
	g := startGateway(t, ctx, "127.0.0.1")
	remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
	p := tunnelProxy(t, ctx, g, remote)

	doctor := func(token string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, sparkdapBinary(t), "doctor", "--ide", p.IDE, "--executors", p.Executors,
			"--python", py, "--token", token, "--ssh", g.Target(), "--ssh-identity", g.ClientKey,
			"--ssh-known-hosts", g.KnownHosts, "--remote-listen", remote, "--remote-python", py, "--timeout", "60s")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("doctor (exit %d):\n%s", code, out)
		return code, string(out)
	}
	code, out := doctor(p.Token)
	for _, want := range []string{
		"OK    SSH gateway " + g.Target() + ": connected, host key verified",
		"OK    test connection (hello → debugpy.connect → proxy → IDE port): a debugpy worker was admitted and listed on the IDE port by the running sparkdap serve",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
	if code != 0 {
		t.Fatalf("doctor failed against a healthy tunnel")
	}
	want := "OK    test connection through the gateway (worker on the gateway → tunnel → proxy → IDE port): a debugpy worker on the gateway reached " + remote
	if !strings.Contains(out, want) {
		t.Errorf("doctor output lacks %q", want)
	}
	// The proxy saw the worker come through the tunnel.
	if !strings.Contains(p.Log(), "sparkdap doctor test connection") {
		t.Errorf("the proxy never logged the doctor's test worker")
	}

	code, out = doctor("wrong-token")
	if code != 1 || !strings.Contains(out, "FAIL  test connection through the gateway (worker on the gateway → tunnel → proxy → IDE port): to "+remote+" on the gateway: whatever listens on "+remote+" did not prove it knows the token") {
		t.Errorf("wrong token: exit %d, want a failed gateway test connection saying so", code)
	}
}

// TestDoctorVenvPackArchive runs `sparkdap doctor --archives` on an
// environment packed by venv-pack, as the YARN recipe packs it (venv-pack
// 0.2.0 writes pyvenv.cfg twice, as YARN's tar unpacks it: the later one
// wins): doctor must unpack it, find the interpreter the job's
// spark.pyspark.python names inside it, run it, and pass. The recipe's
// environment has no debugpy, so that check is a WARN saying that the job
// ships its own.
func TestDoctorVenvPackArchive(t *testing.T) {
	testenv.SkipIfShort(t, "builds a packed environment")
	ctx := testContext(t, 12*time.Minute)
	py := python(t)
	archive := packedEnv(t, py)
	p := startProxy(t, ctx)
	cmd := exec.CommandContext(ctx, sparkdapBinary(t), "doctor", "--ide", p.IDE, "--executors", p.Executors,
		"--token", p.Token, "--timeout", "60s",
		"--archives", archive+"#pyenv", "--conf", "spark.pyspark.python=./pyenv/bin/python")
	out, err := cmd.CombinedOutput()
	t.Logf("doctor:\n%s", out)
	if err != nil {
		t.Errorf("doctor --archives on a venv-pack archive failed: %v", err)
	}
	want := "WARN  executors' Python ./pyenv/bin/python (spark.pyspark.python, inside --archives " + archive + ")"
	says := "cannot import debugpy; the job ships its own debugger, which the workers use instead"
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		found = found || strings.HasPrefix(line, want) && strings.Contains(line, says)
	}
	if !found {
		t.Errorf("doctor output lacks a line %q… %q", want, says)
	}
}
