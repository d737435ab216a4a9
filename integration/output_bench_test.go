//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/bench"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"golang.org/x/sys/unix"
)

// The Spark output benchmarks time a debugged task's print loop against
// the same loop with no debugger: testdata/big_output.py's job, partition
// 0 printing numbered lines of 80 bytes. The plain run is spark-submit
// alone, timed by the task around its loop (flush included). The debugged
// run goes through `sparkdap submit --proxy … --partitions 0` with an IDE
// attached in merged mode, timed from the loop's start (the task's clock)
// until the IDE holds the last line; every line must arrive, in order,
// once each (checkTaskOutputWhole's checks). The rate ratio is the plain
// loop's time ÷ the debugged time, medians of interleaved rounds whose
// order alternates.
//
//	go test ./integration -run '^$' -bench SparkOutput -benchtime 1x -v
//
// SPARKDAP_BENCH_OUTPUT_LINES sets the lines per run (default 250,000:
// 20 MB), SPARKDAP_BENCH_OUTPUT_ROUNDS the rounds (default 3).
//
// Each runs in two layouts. Shared: the job, serve and the IDE (this
// process) share the machine's CPUs, as they never do for users. Split
// (the -split sub-benchmarks) models the job's host apart from the
// developer's laptop on one machine of 2 CPUs or more: the job
// (spark-submit, its JVM and its Python workers, plain or debugged) runs
// on CPU 0 alone, serve and the IDE on CPU 1 alone.

// sparkOutputRun is one run's times.
type sparkOutputRun struct {
	loop     time.Duration // the task's print loop, from its own clock
	total    time.Duration // plain: loop; debugged: loop start → last line at the IDE
	cpu      time.Duration // the task's process, all its threads, during the loop
	serveCPU time.Duration // debugged: serve's, its whole life
	load     float64       // 1-minute load average as the run ended
}

func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// taskLoop is the [start, end, cpu] big_output.py's task wrote to its
// result.
func taskLoop(b *testing.B, result map[string]any) (start, end time.Time, cpu time.Duration) {
	b.Helper()
	l, ok := result["loop"].([]any)
	if !ok || len(l) != 3 {
		b.Fatalf("the job's result has no loop times: %v", result)
	}
	f := func(v any) float64 { x, _ := v.(float64); return x }
	at := func(v any) time.Time { return epochTime(f(v)) }
	return at(l[0]), at(l[1]), time.Duration(f(l[2]) * float64(time.Second))
}

// serveChildren is the /proc stat fields, after the command, of this
// process's `sparkdap serve` children, by pid.
func serveChildren() map[string][]string {
	children := map[string][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if !strings.Contains(string(cmdline), "\x00serve\x00") {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// After the command: state ppid … utime (12th) stime (13th).
		if len(f) < 13 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		children[e.Name()] = f
	}
	return children
}

// serveCPU is the CPU time so far of this process's `sparkdap serve`
// children (one at a time here), from /proc.
func serveCPU() time.Duration {
	var ticks int64
	for _, f := range serveChildren() {
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func loadAvg() float64 {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// benchSparkOutput runs the rounds; newProxy starts a serve for one
// debugged run (its own, so that run's checks read its log alone) and
// returns the executors' address.
// sparkSubmit is what both runs start spark-submit as (the debugged run
// through `sparkdap submit`, which finds it on PATH).
func benchSparkOutput(b *testing.B, ctx context.Context, where, sparkSubmit string, newProxy func() (*proxy, string)) {
	lines := benchEnvInt(b, "SPARKDAP_BENCH_OUTPUT_LINES", 250_000)
	rounds := benchEnvInt(b, "SPARKDAP_BENCH_OUTPUT_ROUNDS", 3)
	script := bigOutputScript(b)
	plain := func() sparkOutputRun {
		dir := b.TempDir()
		result := dir + "/out.json"
		job := startSpark(b, ctx, dir, nil, sparkSubmit, "--master", "local[2]", script, "job", result, strconv.Itoa(lines))
		job.wait(b, ctx)
		start, end, cpu := taskLoop(b, readJSON(b, result))
		return sparkOutputRun{loop: end.Sub(start), total: end.Sub(start), cpu: cpu, load: loadAvg()}
	}
	debugged := func() sparkOutputRun {
		p, executors := newProxy()
		defer p.Stop()
		r := runTaskOutput(b, ctx, p, executors, lines)
		proxyCPU := serveCPU()
		b.Logf("serve's CPUs: %s", serveAffinity())
		r.check(b, p, lines)
		start, end, cpu := taskLoop(b, r.result)
		r.out.mu.Lock()
		at := r.out.lineAt
		r.out.mu.Unlock()
		return sparkOutputRun{loop: end.Sub(start), total: at.Sub(start), cpu: cpu, serveCPU: proxyCPU, load: loadAvg()}
	}
	for i := 0; i < b.N; i++ {
		var plains, debuggeds []sparkOutputRun
		for r := 0; r < rounds; r++ {
			if r%2 == 0 {
				plains = append(plains, plain())
				debuggeds = append(debuggeds, debugged())
			} else {
				debuggeds = append(debuggeds, debugged())
				plains = append(plains, plain())
			}
			pl, d := plains[r], debuggeds[r]
			b.Logf("round %d: plain loop %v (task CPU %v); debugged loop %v (task CPU %v, serve CPU %v), to the last line at the IDE %v (%.3f of plain's rate); load %.2f/%.2f",
				r+1, pl.loop.Round(time.Millisecond), pl.cpu.Round(time.Millisecond), d.loop.Round(time.Millisecond),
				d.cpu.Round(time.Millisecond), d.serveCPU.Round(time.Millisecond), d.total.Round(time.Millisecond),
				pl.total.Seconds()/d.total.Seconds(), pl.load, d.load)
		}
		reportSparkOutput(b, where, lines, plains, debuggeds)
	}
}

func reportSparkOutput(b *testing.B, where string, lines int, plains, debuggeds []sparkOutputRun) {
	b.Helper()
	loop := func(r sparkOutputRun) time.Duration { return r.loop }
	total := func(r sparkOutputRun) time.Duration { return r.total }
	cpu := func(r sparkOutputRun) time.Duration { return r.cpu }
	proxyCPU := func(r sparkOutputRun) time.Duration { return r.serveCPU }
	p, d := medianOf(plains, total), medianOf(debuggeds, total)
	ratio := p.Seconds() / d.Seconds()
	mb := float64(lines*bigOutputLineWidth) / 1e6
	ratios := make([]string, len(plains))
	loads := make([]string, 0, 2*len(plains))
	for i := range plains {
		ratios[i] = fmt.Sprintf("%.3f", plains[i].total.Seconds()/debuggeds[i].total.Seconds())
		loads = append(loads, fmt.Sprintf("%.2f", plains[i].load), fmt.Sprintf("%.2f", debuggeds[i].load))
	}
	t := &bench.Table{
		Title: "Task output at print speed: " + where,
		Header: []string{"run", "rounds", "print loop in the task, median", "loop start → last line (plain: loop end), median", "MB/s", "rate ÷ plain",
			"task process CPU in the loop, median", "serve CPU, median"},
	}
	t.Add("plain spark-submit", strconv.Itoa(len(plains)), fmtDur(medianOf(plains, loop)), fmtDur(p),
		fmt.Sprintf("%.1f", mb/p.Seconds()), "1.000", fmtDur(medianOf(plains, cpu)), "")
	t.Add("sparkdap, IDE attached (merged)", strconv.Itoa(len(debuggeds)), fmtDur(medianOf(debuggeds, loop)), fmtDur(d),
		fmt.Sprintf("%.1f", mb/d.Seconds()), fmt.Sprintf("%.3f", ratio), fmtDur(medianOf(debuggeds, cpu)), fmtDur(medianOf(debuggeds, proxyCPU)))
	verdict := "met"
	if ratio < 0.9 {
		verdict = "**missed**"
	}
	t.Note("goal ≥ 0.9 × the plain loop's rate, nothing lost: %.3f — %s; per round: %s", ratio, verdict, strings.Join(ratios, ", "))
	t.Note("%d lines of 80 B (%.0f MB) from partition 0 of local[2]; every debugged run checked whole, in order, once each at the IDE", lines, mb)
	t.Note("each round runs both, alternating which goes first; load average (1 min) after each run, plain/debugged: %s", strings.Join(loads, " "))
	writeBenchTable(b, t)
	b.ReportMetric(ratio, "debugged/plain")
}

// BenchmarkSparkOutput: local, serve on loopback; tunnel, executors reach
// serve through `serve --ssh` (agent mode, a real sshd on loopback); each
// shared and split (see above).
func BenchmarkSparkOutput(b *testing.B) {
	testenv.SkipIfShort(b, "runs Spark jobs")
	for _, split := range []bool{false, true} {
		name, layout := "local", "shared CPUs"
		if split {
			name, layout = "local-split", splitLayout
		}
		b.Run(name, func(b *testing.B) {
			sparkSubmit := outputLayout(b, split)
			ctx := testContext(b, 30*time.Minute)
			benchSparkOutput(b, ctx, "local[2], serve on loopback; "+layout, sparkSubmit, func() (*proxy, string) {
				p := startProxy(b, ctx)
				return p, p.Executors
			})
		})
	}
	for _, split := range []bool{false, true} {
		name, layout := "tunnel", "shared CPUs"
		if split {
			name, layout = "tunnel-split", splitLayout+" (sshd and the agent too)"
		}
		b.Run(name, func(b *testing.B) {
			sparkSubmit := outputLayout(b, split)
			ctx := testContext(b, 30*time.Minute)
			g := startGateway(b, ctx, "127.0.0.1")
			benchSparkOutput(b, ctx, "local[2], executors through `serve --ssh` (agent mode, sshd on loopback); "+layout, sparkSubmit, func() (*proxy, string) {
				remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(b, "127.0.0.1")))
				p := tunnelProxy(b, ctx, g, remote, "--agent-path", sparkdapBinary(b))
				return p, remote
			})
		})
	}
}

const splitLayout = "split: the job on CPU 0, serve and the IDE on CPU 1"

// outputLayout sets up a sub-benchmark's layout and returns the
// spark-submit its runs start. Split: this process's threads move to CPU 1
// until the sub-benchmark ends, so serve (and sshd), started after,
// inherit it; the job's spark-submit is a script on PATH, where `sparkdap
// submit` finds it, that runs the real one under `taskset -c 0`.
func outputLayout(b *testing.B, split bool) string {
	sparkSubmit := requireSpark(b)
	if !split {
		return sparkSubmit
	}
	var have unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err != nil {
		b.Fatalf("sched_getaffinity: %v", err)
	}
	if !have.IsSet(0) || !have.IsSet(1) {
		b.Skipf("the split layout puts the job on CPU 0 and serve and the IDE on CPU 1: this process may run on %d CPU(s) (runtime.NumCPU %d), not both", have.Count(), runtime.NumCPU())
	}
	taskset := testenv.Tool(b, "taskset", "util-linux")
	bin := b.TempDir()
	script := "#!/bin/sh\n"
	if home := os.Getenv("SPARK_HOME"); home != "" {
		// Unset below so that `sparkdap submit` takes this script from
		// PATH rather than $SPARK_HOME/bin; the real one gets it back.
		script += "SPARK_HOME=" + shQuote(home) + "; export SPARK_HOME\n"
		b.Setenv("SPARK_HOME", "")
	}
	script += "exec " + shQuote(taskset) + " -c 0 " + shQuote(sparkSubmit) + ` "$@"` + "\n"
	wrapper := filepath.Join(bin, "spark-submit")
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	var one unix.CPUSet
	one.Set(1)
	pinThreads(b, &one)
	b.Cleanup(func() { pinThreads(b, &have) })
	return wrapper
}

// pinThreads sets the CPUs of every thread of this process. Threads the
// runtime starts meanwhile inherit their creator's set, which may not be
// set yet: so again until a pass finds no thread it has not set.
func pinThreads(b *testing.B, set *unix.CPUSet) {
	b.Helper()
	done := map[int]bool{}
	for pass := 0; pass < 20; pass++ {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			b.Fatal(err)
		}
		fresh := 0
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				b.Fatalf("sched_setaffinity(%d): %v", tid, err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			return
		}
	}
	b.Fatalf("this process's threads kept changing: could not set their CPUs")
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// serveAffinity is the CPUs this process's serve children may run on
// (pid: list).
func serveAffinity() string {
	var cpus []string
	for pid := range serveChildren() {
		status, _ := os.ReadFile("/proc/" + pid + "/status")
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				cpus = append(cpus, pid+": "+strings.TrimSpace(v))
			}
		}
	}
	sort.Strings(cpus)
	return strings.Join(cpus, ", ")
}
