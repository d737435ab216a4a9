//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// The executor side on Python 3.13 and Java 21: Python 3.12+ runs pydevd on
// sys.monitoring, a different tracing backend from 3.11's, and the wrapper
// patches pydevd internals. The Spark job runs inside a Debian trixie root
// (scripts/setup-trixie: python3 3.13, openjdk-21, a venv with the pinned
// pyspark and debugpy at /opt/sparkdap-venv), the proxy and the IDE outside
// it. The chroot shares the host's network, so the workers reach the proxy
// on 127.0.0.1.

// trixieRoot returns the prepared trixie root, or the test is
// testenv.Missing: it needs root (chroot, mounts), unshare and the root
// built by scripts/setup-trixie.
func trixieRoot(t testing.TB) string {
	t.Helper()
	root := os.Getenv("SPARKDAP_TRIXIE_ROOT")
	if root == "" {
		abs, err := filepath.Abs(filepath.Join("..", ".cache", "trixie-root"))
		if err != nil {
			t.Fatal(err)
		}
		root = abs
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the trixie leg needs root (chroot, mount)")
	}
	for _, tool := range []string{"unshare", "chroot", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s not found: %v", tool, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".sparkdap-ready")); err != nil {
		testenv.Missing(t, "no trixie root at %s (run scripts/setup-trixie as root): %v", root, err)
	}
	return root
}

// inTrixieScript runs as root in a mount namespace of its own (unshare -m,
// private propagation), so every mount it makes vanishes with its last
// process, whatever happens to the test: proc for the JVM, a tmpfs on /tmp,
// the job's directory at /srv/job, and the wrapper's directory at its own
// path, which is where `sparkdap conf` told Spark to find it. Then it runs
// its arguments chrooted, in /srv/job, with a clean environment.
const inTrixieScript = `set -eu
root=$1 job=$2 wrap=$3; shift 3
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/tmp"
mkdir -p "$root/srv/job" "$root$wrap"
mount --bind "$job" "$root/srv/job"
mount --bind "$wrap" "$root$wrap"
exec chroot "$root" /usr/bin/env -i PATH=/opt/sparkdap-venv/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  SPARK_LOCAL_IP=127.0.0.1 /bin/sh -c 'cd /srv/job && exec "$@"' sh "$@"
`

// trixieRun starts args inside the trixie root (see inTrixieScript), with
// job mounted at /srv/job and wrap at its own path.
func trixieRun(t testing.TB, ctx context.Context, root, job, wrap string, args ...string) *sparkRun {
	t.Helper()
	return startSpark(t, ctx, job, nil, "unshare",
		append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", inTrixieScript, "sh", root, job, wrap}, args...)...)
}

// jvmOfWorker is a one-line Python expression for the debug console: the
// executable of the nearest ancestor of this worker whose executable is a
// java binary, i.e. the JVM that started it.
const jvmOfWorker = `(lambda up: up(up, __import__('os').getpid(), 8))(` +
	`lambda up, pid, n: __import__('os').readlink('/proc/%d/exe' % pid) ` +
	`if __import__('os').readlink('/proc/%d/exe' % pid).endswith('/java') or n == 0 or pid <= 1 ` +
	`else up(up, int([l.split()[1] for l in open('/proc/%d/status' % pid) if l.startswith('PPid:')][0]), n - 1))`

// TestTrixieExecutorsOnPython313AndJava21 runs the loans job inside the
// trixie root through the wrapper from `sparkdap wrap` + `sparkdap conf`,
// with its library shipped only as a --py-files zip and its files at
// /srv/job, while the developer's copy and the proxy are outside. It must
// stop once in a driver lambda, the zipped module, a UDF and a mapInPandas
// function, each at the developer's file and line with the task label and
// real values; the worker must report Python 3.13 and a Java 21 JVM from
// inside; and the job's result must equal a plain run's in the same root.
func TestTrixieExecutorsOnPython313AndJava21(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job in a trixie root")
	root := trixieRoot(t)
	ctx := testContext(t, 10*time.Minute)

	l := newLoansLayout(t)
	// Spark gets loanlib only in a zip: no loanlib.py beside the job.
	zipFiles(t, filepath.Join(l.ship, "deps.zip"), l.shipLib)
	if err := os.Remove(l.shipLib); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(l.ship, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	const (
		jobMain = "/srv/job/loans.py"
		jobDeps = "/srv/job/deps.zip"
	)

	// The reference result, with the same Python and Java, without sparkdap.
	// It needs no wrapper: l.src stands in for the wrapper mount.
	plain := trixieRun(t, ctx, root, l.ship, l.src, "spark-submit", "--master", "local[2]",
		"--py-files", jobDeps, jobMain, "--output", "/srv/job/out/plain.json")
	plain.wait(t, ctx)
	want := readJSON(t, filepath.Join(l.ship, "out", "plain.json"))

	p := startProxy(t, ctx, "--root", l.src)
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	bps := loansPlaces(t, l.srcMain, l.srcLib, "mapvalues-lambda", "loanlib-payment", "udf-body", "mapinpandas-body")
	armed := armedLines(bps)
	if err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			for path, lines := range armed {
				if _, err := ide.SetBreakpoints(ctx, path, lines...); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
		t.Fatal(err)
	}

	// The options `sparkdap conf` prints, with the job's zip added to the
	// wrapper's --py-files as conf's comment says to.
	opts := wrapConfArgs(t, ctx, p, "--partitions", "0")
	wrapDir := ""
	for i := 0; i+1 < len(opts); i++ {
		if opts[i] == "--py-files" {
			// The wrapper comes first; what ships beside it (the debugpy
			// wheel) lives in the same directory.
			first, _, _ := strings.Cut(opts[i+1], ",")
			wrapDir = filepath.Dir(first)
			opts[i+1] += "," + jobDeps
		}
	}
	if wrapDir == "" {
		t.Fatalf("sparkdap conf printed no --py-files for the wrapper: %q", opts)
	}
	args := append(append([]string{"spark-submit", "--master", "local[2]"}, opts...), jobMain, "--output", "/srv/job/out/debugged.json")
	job := trixieRun(t, ctx, root, l.ship, wrapDir, args...)

	seen := map[string]sparkStop{}
	for len(seen) < len(bps) {
		s := nextStop(t, ctx, ide, job)
		if len(seen) == 0 {
			checkTrixieWorker(t, ctx, ide, s)
		}
		name := placeName(bps, s)
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), which is none of the breakpoints, or not at the developer's path", s.path, s.line, s.function)
		}
		if _, dup := seen[name]; dup {
			t.Fatalf("stopped at %s twice: its breakpoint was removed after the first hit", name)
		}
		seen[name] = s
		if name == "loanlib-payment" {
			checkZipMapped(t, ctx, p.IDE, l.srcLib)
		}
		t.Logf("stop %s at %s:%d in %q, locals %v", name, s.path, s.line, s.thread, s.locals)
		disarmAndContinue(t, ctx, ide, armed, s)
	}
	for name, s := range seen {
		if m := labelRE.FindStringSubmatch(s.thread); m == nil || m[1] != "0" {
			t.Errorf("%s: thread %q does not show the task label of partition 0", name, s.thread)
		}
	}
	for _, name := range []string{"loanlib-payment", "udf-body"} {
		v := seen[name].locals["principal"]
		if f, err := strconv.ParseFloat(v, 64); err != nil || f < 10000 || int(f-10000)%2500 != 0 {
			t.Errorf("%s: principal = %q, not a principal of the portfolio (10000 + k·2500)", name, v)
		}
	}
	if n, years := seen["loanlib-payment"].locals["n"], seen["loanlib-payment"].locals["years"]; n == "" || years == "" {
		t.Errorf("loanlib-payment locals %v lack n and years", seen["loanlib-payment"].locals)
	} else if ni, _ := strconv.Atoi(n); fmt.Sprint(ni/12) != years {
		t.Errorf("loanlib-payment: n = %s but years = %s", n, years)
	}
	if _, ok := seen["mapinpandas-body"].locals["pdf"]; !ok {
		t.Errorf("mapinpandas-body locals %v lack the pandas batch pdf", seen["mapinpandas-body"].locals)
	}
	// The driver lambda's argument: one loan of the portfolio.
	if loan := seen["mapvalues-lambda"].locals["loan"]; !strings.Contains(loan, "'principal': ") {
		t.Errorf("mapvalues-lambda: loan = %q, want a loan record", loan)
	}

	job.wait(t, ctx)
	got := readJSON(t, filepath.Join(l.ship, "out", "debugged.json"))
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("result under sparkdap differs from the plain run:\n got %s\nwant %s", g, w)
	}
}

// checkZipMapped: `sparkdap paths` shows loanlib ran from inside the
// shipped zip and was mapped to the developer's file.
func checkZipMapped(t testing.TB, ctx context.Context, ideAddr, srcLib string) {
	t.Helper()
	report, err := exec.CommandContext(ctx, sparkdapBinary(t), "paths", "--ide", ideAddr).CombinedOutput()
	if err != nil {
		t.Fatalf("sparkdap paths: %v\n%s", err, report)
	}
	if !regexp.MustCompile(`deps\.zip/loanlib\.py\n\s+→ ` + regexp.QuoteMeta(srcLib)).Match(report) {
		t.Errorf("sparkdap paths does not show the zip entry mapped to %s:\n%s", srcLib, report)
	}
}

// checkTrixieWorker asks the stopped worker, through the debug console,
// which Python runs it and which JVM started it: the point of the leg is
// Python 3.13 under Java 21, not whatever the root happens to hold.
func checkTrixieWorker(t testing.TB, ctx context.Context, ide *dapclient.Client, s sparkStop) {
	t.Helper()
	for _, c := range []struct{ expr, want string }{
		{"__import__('sys').version", "'3.13."},
		{jvmOfWorker, "java-21-openjdk"},
	} {
		r, err := ide.Evaluate(ctx, s.frameID, c.expr)
		if err != nil {
			t.Errorf("evaluate %s: %v", c.expr, err)
			continue
		}
		if !strings.Contains(r.Result, c.want) {
			t.Errorf("evaluate %s = %s, want it to contain %q", c.expr, r.Result, c.want)
		}
		t.Logf("the worker in the trixie root: %.40s… = %s", c.expr, r.Result)
	}
}
