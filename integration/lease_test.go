//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// The lease on stops: a real local-mode Spark job under `sparkdap submit`
// is stopped at a breakpoint in a --py-files module when the proxy goes
// silent without closing anything (serve SIGSTOPped; the path between
// executor and proxy dropping every packet). Nothing tells pydevd; only
// the lease lets the worker go, and the job finishes with the plain run's
// result.

// testLease is the jobs' --lease: short, so the tests are, and the
// smallest the wrapper takes.
const testLease = 10 * time.Second

// leaseLine is what the worker logs once when its lease lapses.
var leaseLine = fmt.Sprintf("no word from the proxy for %gs while stopped at a breakpoint (--lease)", testLease.Seconds())

// loansDir copies examples/loans into a new directory and returns it and
// the breakpoint's file and line (loanlib.py, in every partition's rows).
func loansDir(t testing.TB) (dir, lib string, line int) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"loans.py", "loanlib.py"} {
		copyFile(t, filepath.Join("..", "examples", "loans", f), filepath.Join(dir, f))
	}
	lib = filepath.Join(dir, "loanlib.py")
	return dir, lib, testenv.MarkedLine(t, lib, "loanlib-payment")
}

// leaseJob is `sparkdap submit --partitions 0 --lease testLease` of the
// loans job, run through prefix (e.g. `ip netns exec NS`) when given.
type leaseJob struct {
	out  *syncbuf.Buffer
	done chan error
	res  string
	pid  int
}

func startLeaseJob(t testing.TB, ctx context.Context, dir, proxyAddr string, prefix []string, sparkConf ...string) *leaseJob {
	t.Helper()
	j := &leaseJob{out: &syncbuf.Buffer{}, done: make(chan error, 1), res: filepath.Join(dir, "result.json")}
	args := append([]string{}, prefix...)
	args = append(args, sparkdapBinary(t), "submit", "--proxy", proxyAddr, "--partitions", "0",
		"--lease", testLease.String(), "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN")
	for _, c := range sparkConf {
		args = append(args, "--conf", c)
	}
	args = append(args, "--py-files", "loanlib.py", "loans.py", "--output", j.res)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SPARKDAP_TOKEN="+testToken)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Stdout, cmd.Stderr = j.out, j.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j.pid = cmd.Process.Pid
	go func() { j.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-j.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("sparkdap submit output (last 8 KiB):\n%s", tail(j.out.String(), 8<<10))
		}
	})
	return j
}

// finishes checks that the job ends, within the lease and some slack of
// the proxy going silent at since, with the plain run's result, the
// worker having said once why it ran on.
func (j *leaseJob) finishes(t testing.TB, ctx context.Context, since time.Time) {
	t.Helper()
	// Slack for the rest of the job (seconds alone) on a busy machine.
	bound := testLease + 150*time.Second
	select {
	case err := <-j.done:
		if err != nil {
			t.Fatalf("the job failed after the proxy went silent: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("the job was still running %v after the proxy went silent (lease %v)", bound, testLease)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	took := time.Since(since)
	t.Logf("the job finished %v after the proxy went silent", took.Round(time.Millisecond))
	// The last ping came at most 2 s before the silence: the stop held
	// for the lease, and only the lease ended it.
	if took < testLease-3*time.Second {
		t.Errorf("the job finished %v after the proxy went silent, before its lease of %v could lapse", took, testLease)
	}
	got, want := readJSON(t, j.res), readJSON(t, filepath.Join("..", "workerwrap", "testdata", "loans.want.json"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("job result:\n%v\nwant (plain run):\n%v", got, want)
	}
	t.Logf("the job said:\n%s", grepLines(j.out.String(), "sparkdap:"))
	if n := strings.Count(j.out.String(), leaseLine); n != 1 {
		t.Errorf("the worker said %q %d times, want once", leaseLine, n)
	}
}

// stopsInLoanlib sets the breakpoint and waits until the job's partition 0
// is stopped there.
func stopsInLoanlib(t testing.TB, ctx context.Context, p *faultProxy, lib string, line int, job *leaseJob) {
	t.Helper()
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, false)
	if bps, err := c.SetBreakpoints(ctx, lib, line); err != nil || len(bps) != 1 {
		t.Fatalf("setBreakpoints %s:%d = %+v, %v", lib, line, bps, err)
	}
	stopped := make(chan error, 1)
	go func() { _, err := c.StoppedEvent(ctx); stopped <- err }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("no stop in the Spark job: %v", err)
		}
	case err := <-job.done:
		t.Fatalf("the job ended (%v) without stopping at %s:%d", err, lib, line)
	}
}

// freeze stops serve with SIGSTOP, as a closed laptop lid looks from the
// executor: the connection stays, nothing is ever read from or sent on it.
func (p *faultProxy) freeze(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
}

// TestLeaseSparkJobSurvivesFrozenProxy: serve SIGSTOPped while the job's
// worker is stopped at a breakpoint.
func TestLeaseSparkJobSurvivesFrozenProxy(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	dir, lib, line := loansDir(t)
	p := startFaultProxy(t, ctx, "--root", dir)
	job := startLeaseJob(t, ctx, dir, p.Executors, nil)
	stopsInLoanlib(t, ctx, p, lib, line, job)
	t.Logf("partition 0 is stopped at loanlib.py:%d; SIGSTOP serve", line)
	p.freeze(t)
	job.finishes(t, ctx, time.Now())
}

// TestLeaseSparkJobSurvivesDroppedPath: the whole job runs in a network
// namespace the test makes, reaching serve over a veth pair; once its
// worker is stopped, the namespace drops every packet to and from serve,
// as a firewall or a dead VPN does: no FIN, no RST.
func TestLeaseSparkJobSurvivesDroppedPath(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ns := newDropNamespace(t)
	ctx := testContext(t, 5*time.Minute)
	dir, lib, line := loansDir(t)
	p := startFaultProxy(t, ctx, "--root", dir, "--executors", ns.hostIP+":0")
	// Inside the namespace only its loopback and the veth exist: the
	// driver must not bind the machine's hostname address.
	job := startLeaseJob(t, ctx, dir, p.Executors, []string{"ip", "netns", "exec", ns.name},
		"spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1")
	stopsInLoanlib(t, ctx, p, lib, line, job)
	t.Logf("partition 0 is stopped at loanlib.py:%d; drop every packet between the namespace and serve", line)
	ns.drop(t, job.pid)
	job.finishes(t, ctx, time.Now())
}

// dropNamespace is a network namespace joined to this one by a veth pair
// with private addresses of its own; traffic goes only between the two
// ends.
type dropNamespace struct {
	name, hostIP, nsIP string
}

// newDropNamespace makes the namespace, or skips the test without root or
// the tools (scripts/setup installs iptables). Everything it makes is
// removed when the test ends, failed or not.
func newDropNamespace(t testing.TB) *dropNamespace {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to make a network namespace and its firewall rules")
	}
	for _, tool := range []string{"ip", "iptables", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool+" (scripts/setup installs it: apt-get install iproute2 iptables)")
		}
	}
	id := os.Getpid() % 10000
	n := &dropNamespace{name: fmt.Sprintf("sdlease%d", id)}
	subnet := 1 + id%250
	n.hostIP, n.nsIP = fmt.Sprintf("10.213.%d.1", subnet), fmt.Sprintf("10.213.%d.2", subnet)
	hostEnd, nsEnd := fmt.Sprintf("sdlh%d", id), fmt.Sprintf("sdln%d", id)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Registered first, so they run last, whatever failed on the way;
	// deleting the namespace takes its end of the pair, its rules and
	// with them the host's end.
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", hostEnd).Run()
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
			t.Errorf("ip netns del %s: %v\n%s", n.name, err, out)
		}
	})
	run("ip", "netns", "add", n.name)
	run("ip", "link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd)
	run("ip", "link", "set", nsEnd, "netns", n.name)
	run("ip", "addr", "add", n.hostIP+"/30", "dev", hostEnd)
	run("ip", "link", "set", hostEnd, "up")
	in := []string{"ip", "netns", "exec", n.name}
	run(append(in, "ip", "addr", "add", n.nsIP+"/30", "dev", nsEnd)...)
	run(append(in, "ip", "link", "set", nsEnd, "up")...)
	run(append(in, "ip", "link", "set", "lo", "up")...)
	return n
}

// drop makes the namespace drop every packet to and from the host's end.
// It enters the namespace through the process pid that runs in it, not by
// its name: the name is only a file in /run/netns, which anything on the
// machine may remove (`ip -all netns delete`) while the namespace lives on.
func (n *dropNamespace) drop(t testing.TB, pid int) {
	t.Helper()
	for _, rule := range [][]string{
		{"INPUT", "-s", n.hostIP, "-j", "DROP"},
		{"OUTPUT", "-d", n.hostIP, "-j", "DROP"},
	} {
		args := append([]string{fmt.Sprintf("--net=/proc/%d/ns/net", pid), "iptables", "-A"}, rule...)
		if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
			t.Fatalf("nsenter %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestLeasePyCharmJobSurvivesFrozenProxy: the same in PyCharm mode
// (pydevd-pycharm, `serve --ide-kind pycharm`): serve SIGSTOPped while the
// worker is suspended at a breakpoint PyCharm set.
func TestLeasePyCharmJobSurvivesFrozenProxy(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	ctx := testContext(t, 5*time.Minute)
	j := startPyCharmScript(t, ctx, "local[2]", "1", "pcjob.py", "--lease", testLease.String())
	if _, err := j.ide.Start(ctx, pycharmtest.Breakpoint{File: j.localMath, Line: j.line, Func: "scale"}); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	j.nextSuspend(t, ctx)
	t.Logf("partition 1 is suspended at pcmath.py:%d; SIGSTOP serve", j.line)
	if err := j.serve.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Before the harness's cleanup, which stops serve with SIGINT.
	t.Cleanup(func() { _ = j.serve.Process.Signal(syscall.SIGCONT) })
	frozen := time.Now()
	bound, cancel := context.WithTimeout(ctx, testLease+150*time.Second)
	defer cancel()
	j.finish(t, bound)
	took := time.Since(frozen)
	t.Logf("the job finished %v after the proxy went silent", took.Round(time.Millisecond))
	if took < testLease-3*time.Second {
		t.Errorf("the job finished %v after the proxy went silent, before its lease of %v could lapse", took, testLease)
	}
	if n := strings.Count(j.submitOut.String(), leaseLine); n != 1 {
		t.Errorf("the worker said %q %d times, want once", leaseLine, n)
	}
}

// TestLeaseHeldWhileProxyLives: a worker stopped for twice its lease, the
// IDE idle all along, stays stopped as long as serve lives (serve renews
// the lease), then resumes when the IDE says so; the job ends with the
// plain result and the lease never lapsed.
func TestLeaseHeldWhileProxyLives(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	dir, lib, line := loansDir(t)
	p := startFaultProxy(t, ctx, "--root", dir)
	job := startLeaseJob(t, ctx, dir, p.Executors, nil)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, false)
	if bps, err := c.SetBreakpoints(ctx, lib, line); err != nil || len(bps) != 1 {
		t.Fatalf("setBreakpoints %s:%d = %+v, %v", lib, line, bps, err)
	}
	stop := nextStop(t, ctx, c, &sparkRun{done: make(chan struct{})})
	select {
	case err := <-job.done:
		t.Fatalf("the job ended (%v) while its worker was stopped and serve alive", err)
	case <-time.After(2 * testLease):
	}
	if strings.Contains(job.out.String(), leaseLine) {
		t.Fatalf("the lease lapsed while serve was alive")
	}
	// Still stopped, and still debuggable: its stack answers.
	if frames, err := c.StackTrace(ctx, stop.threadID); err != nil || len(frames) == 0 || frames[0].Line != line {
		t.Fatalf("after %v stopped: stackTrace %+v, %v; want the stop at line %d", 2*testLease, frames, err, line)
	}
	// Let every stop go: the IDE leaves, as a developer done with it does.
	if err := c.Disconnect(ctx, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-job.done:
		if err != nil {
			t.Fatalf("the job failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the job did not finish after the IDE left")
	}
	got, want := readJSON(t, job.res), readJSON(t, filepath.Join("..", "workerwrap", "testdata", "loans.want.json"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("job result:\n%v\nwant (plain run):\n%v", got, want)
	}
	if strings.Contains(job.out.String(), leaseLine) {
		t.Errorf("the lease lapsed while serve was alive")
	}
}
