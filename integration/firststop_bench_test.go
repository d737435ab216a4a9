//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/bench"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// The first-stop benchmarks time what a developer waits for: from the
// moment a job is submitted until the IDE shows the first stop, against
// the same job submitted plainly, from submit until its first task
// begins. Both runs time the same line of testdata/firststop_job.py: the
// plain run reads it from the job's own report, the debugged run stops
// there. Each round runs both, in an order that alternates, and the
// report is the ratio of the medians, so a machine that slows down in
// the middle of a run slows both sides.
//
//	go test ./integration -run '^$' -bench FirstStop -benchtime 1x
//
// SPARKDAP_BENCH_FIRSTSTOP_ROUNDS sets the rounds (default 5).

// firstStopScript is testdata/firststop_job.py.
func firstStopScript(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "firststop_job.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// firstStopLine is the line of firststop_job.py that reads the clock in
// every task: the debugged runs' breakpoint.
func firstStopLine(t testing.TB, script string) int {
	t.Helper()
	f, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), "# first-stop:") {
			return n
		}
	}
	t.Fatalf("%s has no line marked # first-stop:", script)
	return 0
}

// firstTaskAt is when the earliest task of firststop_job.py began, from
// the SPARKDAP-FIRST-TASK line in its output.
func firstTaskAt(out string) (time.Time, error) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "SPARKDAP-FIRST-TASK ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 {
			return time.Time{}, fmt.Errorf("malformed report %q", line)
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("malformed report %q: %w", line, err)
		}
		return epochTime(sec), nil
	}
	return time.Time{}, fmt.Errorf("the job printed no SPARKDAP-FIRST-TASK line")
}

// epochTime is the time sec seconds after the Unix epoch, as Python's
// time.time() gives it.
func epochTime(sec float64) time.Time {
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9))
}

// firstStopRun is one run's times, each from the submit.
type firstStopRun struct {
	first time.Duration // plain: to the first task; debugged: to the first stop at the IDE
	job   time.Duration // to the end of spark-submit
}

// firstStopRounds runs plain and debugged once per round, alternating
// which goes first, and returns every run of each.
func firstStopRounds(b *testing.B, rounds int, plain, debugged func(round int) firstStopRun) (plains, debuggeds []firstStopRun) {
	b.Helper()
	for r := 0; r < rounds; r++ {
		if r%2 == 0 {
			plains = append(plains, plain(r))
			debuggeds = append(debuggeds, debugged(r))
		} else {
			debuggeds = append(debuggeds, debugged(r))
			plains = append(plains, plain(r))
		}
		b.Logf("round %d: plain first task %v (job %v); debugged first stop %v (job %v)", r+1,
			plains[r].first.Round(time.Millisecond), plains[r].job.Round(time.Millisecond),
			debuggeds[r].first.Round(time.Millisecond), debuggeds[r].job.Round(time.Millisecond))
	}
	return plains, debuggeds
}

// firstStopRoundsWanted is $SPARKDAP_BENCH_FIRSTSTOP_ROUNDS, or def.
func firstStopRoundsWanted(b *testing.B, def int) int {
	return benchEnvInt(b, "SPARKDAP_BENCH_FIRSTSTOP_ROUNDS", def)
}

// medianOf is the median of what pick returns for each run.
func medianOf[R any](runs []R, pick func(R) time.Duration) time.Duration {
	s := make([]time.Duration, len(runs))
	for i, r := range runs {
		s[i] = pick(r)
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// reportFirstStop prints the benchmark's Markdown table on stdout (as
// scripts/bench's report has it) and reports the ratio as a metric.
func reportFirstStop(b *testing.B, where, how string, plains, debuggeds []firstStopRun) {
	b.Helper()
	first := func(r firstStopRun) time.Duration { return r.first }
	job := func(r firstStopRun) time.Duration { return r.job }
	p, d := medianOf(plains, first), medianOf(debuggeds, first)
	ratio := d.Seconds() / p.Seconds()
	extra := d - p
	t := &bench.Table{
		Title: "First stop after submit: " + where,
		Header: []string{"run", "rounds", "submit → first task (plain) or first stop (debugged), median",
			"÷ plain", "whole spark-submit, median"},
	}
	t.Add("plain spark-submit", strconv.Itoa(len(plains)), fmtDur(p), "1.000", fmtDur(medianOf(plains, job)))
	t.Add("sparkdap, breakpoint on the task's first line", strconv.Itoa(len(debuggeds)), fmtDur(d),
		fmt.Sprintf("%.3f", ratio), fmtDur(medianOf(debuggeds, job)))
	met := ratio <= 1.1 && extra <= 500*time.Millisecond
	verdict := "met"
	if !met {
		verdict = "**missed**"
	}
	t.Note("goal first stop ≤ 1.1 × plain first task and ≤ +0.5 s: %.3f, %+.2f s — %s", ratio, extra.Seconds(), verdict)
	t.Note("%s", how)
	t.Note("each round runs both, alternating which goes first; the debugged run's IDE attaches in merged mode before the submit and continues at the stop")
	writeBenchTable(b, t)
	b.ReportMetric(ratio, "firststop/plain")
	b.ReportMetric(extra.Seconds(), "extra-s")
}

// writeBenchTable prints t as Markdown on stdout and, when
// $SPARKDAP_BENCH_REPORT names a file, appends it there: how sparkdap-bench
// (scripts/bench -only spark,kubernetes) puts these benchmarks' tables in
// its report.
func writeBenchTable(b *testing.B, t *bench.Table) {
	b.Helper()
	t.Write(os.Stdout)
	path := os.Getenv("SPARKDAP_BENCH_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		b.Fatalf("SPARKDAP_BENCH_REPORT: %v", err)
	}
	t.Write(f)
	if err := f.Close(); err != nil {
		b.Fatalf("SPARKDAP_BENCH_REPORT: %v", err)
	}
}

// fmtDur is d in seconds with two decimals.
func fmtDur(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// firstStopAt waits for the IDE's first stopped event and returns when it
// came; then it clears the breakpoint and continues, so the job ends.
func firstStopAt(b *testing.B, ctx context.Context, ide *dapclient.Client, job *sparkRun, script string) time.Time {
	b.Helper()
	s := nextStopTime(b, ctx, ide, job)
	if _, err := ide.SetBreakpoints(ctx, script); err != nil {
		b.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		b.Fatal(err)
	}
	return s.at
}

// detachIDE ends a debugged round's IDE session. Disconnect, not only
// close: serve frees its one IDE slot before it answers, so the next
// round's attach, which may follow at once, finds it free; after a bare
// close it may not have noticed yet ("another IDE is already attached").
func detachIDE(b *testing.B, ctx context.Context, ide *dapclient.Client) {
	b.Helper()
	if err := ide.Disconnect(ctx, false); err != nil {
		b.Error(err)
	}
	ide.Close()
}

// timedStop is a stopped event and when the IDE got it.
type timedStop struct {
	threadID int
	at       time.Time
}

// nextStopTime waits for a stopped event, or fails if the job ends first.
func nextStopTime(b *testing.B, ctx context.Context, ide *dapclient.Client, job *sparkRun) timedStop {
	b.Helper()
	ch := make(chan timedStop, 1)
	errc := make(chan error, 1)
	go func() {
		st, err := ide.StoppedEvent(ctx)
		if err != nil {
			errc <- err
			return
		}
		ch <- timedStop{threadID: st.ThreadId, at: time.Now()}
	}()
	select {
	case s := <-ch:
		return s
	case err := <-errc:
		b.Fatalf("waiting for the first stop: %v", err)
	case <-job.done:
		b.Fatalf("the job ended (%v) without stopping at the first task's first line:\n%s", job.err, tail(job.out.String(), 4<<10))
	}
	return timedStop{}
}

// BenchmarkFirstStop/local: local[2], `sparkdap submit` against a running
// serve, partition 0 selected.
func BenchmarkFirstStop(b *testing.B) {
	testenv.SkipIfShort(b, "runs Spark jobs")
	b.Run("local", func(b *testing.B) {
		sparkSubmit := requireSpark(b)
		ctx := testContext(b, 20*time.Minute)
		script := firstStopScript(b)
		line := firstStopLine(b, script)
		p := startProxy(b, ctx)
		rounds := firstStopRoundsWanted(b, 5)
		for i := 0; i < b.N; i++ {
			plain := func(int) firstStopRun {
				job := startSpark(b, ctx, b.TempDir(), nil, sparkSubmit, "--master", "local[2]", script, "4")
				job.wait(b, ctx)
				at, err := firstTaskAt(job.out.String())
				if err != nil {
					b.Fatal(err)
				}
				return firstStopRun{first: at.Sub(job.started), job: job.elapsed}
			}
			debugged := func(int) firstStopRun {
				ide := attachAtLine(b, ctx, p, script, line)
				defer detachIDE(b, ctx, ide)
				job := startSpark(b, ctx, b.TempDir(), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(b),
					"submit", "--proxy", p.Executors, "--partitions", "0", "--",
					"--master", "local[2]", script, "4")
				at := firstStopAt(b, ctx, ide, job, script)
				job.wait(b, ctx)
				return firstStopRun{first: at.Sub(job.started), job: job.elapsed}
			}
			plains, debuggeds := firstStopRounds(b, rounds, plain, debugged)
			reportFirstStop(b, "local[2]",
				"local[2] on this machine; plain = spark-submit of testdata/firststop_job.py (4 partitions); debugged = `sparkdap submit --proxy … --partitions 0` to a running serve, breakpoint on the task's first line",
				plains, debuggeds)
		}
	})
}
