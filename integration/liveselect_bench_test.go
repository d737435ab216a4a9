//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/bench"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// BenchmarkUnselectedTasks times a job of many short tasks
// (testdata/short_tasks.py: SPARKDAP_BENCH_UNSELECTED_ACTIONS actions of
// 200 one-row partitions, default 6, on local[2]), as the driver times
// its actions, three ways in rotating order per round
// (SPARKDAP_BENCH_UNSELECTED_ROUNDS, default 5): plain spark-submit;
// `sparkdap submit --partitions none` against a serve on loopback; the
// same through `serve --ssh` (agent mode, a real sshd on loopback). While
// a debugged job runs, the selection changes every 250 ms, between no
// partition and a partition that does not exist, so every worker gets
// every change and still selects no task. The ratio is the median of
// each debugged way over the plain median. A fourth way, the wrapper with
// its watch turned off, tells what following the selection costs apart
// from the rest of the wrapper.
func BenchmarkUnselectedTasks(b *testing.B) {
	testenv.SkipIfShort(b, "runs Spark jobs and starts sshd")
	sparkSubmit := requireSpark(b)
	ctx := testContext(b, 60*time.Minute)
	rounds := benchEnvInt(b, "SPARKDAP_BENCH_UNSELECTED_ROUNDS", 5)
	actions := benchEnvInt(b, "SPARKDAP_BENCH_UNSELECTED_ACTIONS", 6)
	const parts = 200
	script, err := filepath.Abs(filepath.Join("testdata", "short_tasks.py"))
	if err != nil {
		b.Fatal(err)
	}
	g := startGateway(b, ctx, "127.0.0.1")
	want := float64(actions * parts * (parts + 1) / 2)

	type run struct {
		action        time.Duration
		changes, sent int
	}
	// watch off: the same wrapper with SPARKDAP_LIVE_SELECTION=0, which
	// isolates what following the selection costs from the rest of the
	// wrapper (its daemon preloads the worker's modules before it forks,
	// which plain PySpark does not).
	job := func(p *proxy, executors string, watchOff bool) run {
		dir := b.TempDir()
		result := filepath.Join(dir, "out.json")
		args := []string{"--master", "local[2]", "--conf", "spark.ui.enabled=false", script, result, strconv.Itoa(actions), strconv.Itoa(parts)}
		var r run
		if p == nil {
			startSpark(b, ctx, dir, nil, sparkSubmit, args...).wait(b, ctx)
		} else {
			env := []string{"SPARKDAP_TOKEN=" + p.Token}
			if watchOff {
				env = append(env, "SPARKDAP_LIVE_SELECTION=0")
			}
			j := startSpark(b, ctx, dir, env, sparkdapBinary(b),
				append([]string{"submit", "--proxy", executors, "--partitions", "none", "--"}, args...)...)
			if !watchOff {
				r.changes, r.sent = changeSelectionUntil(b, ctx, p, j.done)
			}
			j.wait(b, ctx)
		}
		res := readJSON(b, result)
		if res["total"] != want {
			b.Fatalf("total %v, want %v", res["total"], want)
		}
		s, _ := res["action_s"].(float64)
		r.action = time.Duration(s * float64(time.Second))
		return r
	}
	ways := []struct {
		name string
		run  func() run
	}{
		{"plain spark-submit", func() run { return job(nil, "", false) }},
		{"sparkdap, nothing selected, serve on loopback", func() run {
			p := startProxy(b, ctx)
			defer p.Stop()
			return job(p, p.Executors, false)
		}},
		{"sparkdap, nothing selected, through `serve --ssh`", func() run {
			remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(b, "127.0.0.1")))
			p := tunnelProxy(b, ctx, g, remote, "--agent-path", sparkdapBinary(b))
			defer p.Stop()
			return job(p, remote, false)
		}},
		{"sparkdap, nothing selected, watch off (SPARKDAP_LIVE_SELECTION=0), serve on loopback", func() run {
			p := startProxy(b, ctx)
			defer p.Stop()
			return job(p, p.Executors, true)
		}},
	}
	for i := 0; i < b.N; i++ {
		runs := make([][]run, len(ways))
		for r := 0; r < rounds; r++ {
			for k := range ways {
				w := (r + k) % len(ways)
				got := ways[w].run()
				runs[w] = append(runs[w], got)
				b.Logf("round %d: %s: actions %v; %d selection changes, reaching up to %d workers", r+1, ways[w].name,
					got.action.Round(time.Millisecond), got.changes, got.sent)
			}
		}
		action := func(r run) time.Duration { return r.action }
		plain := medianOf(runs[0], action)
		t := &bench.Table{Title: "Tasks not selected, selection changing while the job runs",
			Header: []string{"run", "rounds", "actions, median", "÷ plain", "per round"}}
		worst := 0.0
		for k, w := range ways {
			m := medianOf(runs[k], action)
			ratio := m.Seconds() / plain.Seconds()
			if (k == 1 || k == 2) && ratio > worst {
				worst = ratio
			}
			per := make([]string, len(runs[k]))
			for i, r := range runs[k] {
				per[i] = fmtDur(r.action)
			}
			t.Add(w.name, strconv.Itoa(len(runs[k])), fmtDur(m), fmt.Sprintf("%.3f", ratio), strings.Join(per, ", "))
		}
		verdict := "met"
		if worst > 1.02 {
			verdict = "**missed**"
		}
		t.Note("goal ≤ 1.02 × plain: worst %.3f — %s", worst, verdict)
		off := medianOf(runs[3], action)
		t.Note("following the selection alone, loopback ÷ watch off: %.3f; through the tunnel ÷ watch off: %.3f",
			medianOf(runs[1], action).Seconds()/off.Seconds(), medianOf(runs[2], action).Seconds()/off.Seconds())
		t.Note("%d actions of %d one-row partitions on local[2], timed by the driver around its actions; ways in rotating order each round; the selection changed every 250 ms during each debugged job", actions, parts)
		writeBenchTable(b, t)
		b.ReportMetric(worst, "unselected/plain")
	}
}

// changeSelectionUntil changes p's selection every 250 ms until done
// closes, between no partition and one that does not exist, and returns
// how many changes it made and the most workers one reached. A
// job whose workers never followed the selection would measure nothing
// of it: that fails the benchmark.
func changeSelectionUntil(b *testing.B, ctx context.Context, p *proxy, done <-chan struct{}) (changes, reached int) {
	b.Helper()
	none, absent := selection.None(), selection.Selection{Partitions: []int64{1 << 40}, SampleRate: 1}
	path := control.PathFor(p.IDE)
	maxSent := 0
	var once sync.Once
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if maxSent == 0 {
				b.Fatalf("no worker followed the selection in %d changes", changes)
			}
			return changes, maxSent
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-tick.C:
		}
		sel := &none
		if changes%2 == 1 {
			sel = &absent
		}
		ans, err := control.Call(ctx, path, control.Request{Op: control.OpSelect, Selection: sel})
		if err != nil {
			once.Do(func() { b.Logf("select: %v", err) })
			continue
		}
		changes++
		maxSent = max(maxSent, ans.Sent)
	}
}
