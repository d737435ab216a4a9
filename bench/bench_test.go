package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/quickack"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// The full side-by-side report is scripts/bench. These Go benchmarks are
// the parts that need no Python, for quick A/B work on the proxy:
//
//	go test ./bench -run '^$' -bench . -benchtime 2000x

func TestMain(m *testing.M) {
	RunChildIfRequested() // the proxy child is this test binary, re-run
	os.Exit(m.Run())
}

func testdata(tb testing.TB) string {
	tb.Helper()
	td, err := filepath.Abs("testdata")
	if err != nil {
		tb.Fatal(err)
	}
	return td
}

// TestQuickSmoke runs the Python-free sections at toy sizes, so a broken
// harness shows in go test. It asserts that they run, never their timings.
func TestQuickSmoke(t *testing.T) {
	testenv.SkipIfShort(t, "starts proxy processes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logf := func(string, ...any) {}
	tables := []func() (*Table, error){
		func() (*Table, error) {
			return Fanout(ctx, FanoutConfig{Testdata: testdata(t), Ns: []int{1, 10}, Repeats: 2, Token: "t"}, logf)
		},
		func() (*Table, error) { return Scale(ctx, ScaleConfig{Ns: []int{20}, Token: "t"}, logf) },
		func() (*Table, error) {
			return Throughput(ctx, ThroughputConfig{Executors: []int{1, 3}, Bytes: 64 << 10, EventBytes: 1024, Rounds: 1, Token: "t"}, logf)
		},
		func() (*Table, error) { return Storm(ctx, StormConfig{Ns: []int{3}, Rounds: 1, Token: "t"}, logf) },
	}
	for _, f := range tables {
		tab, err := f()
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.Rows) == 0 {
			t.Errorf("%s: no rows", tab.Title)
		}
	}
}

// requestPair is a DAP client talking to one fake pydevd, directly or
// through a proxy child.
func requestPair(b *testing.B, viaProxy bool) *dapclient.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !viaProxy {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		p, err := fakepydevd.Dial(ctx, ln.Addr().String(), fakepydevd.Config{Token: "t", PID: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		conn, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		c := dapclient.New(quickack.Wrap(conn))
		b.Cleanup(func() { c.Close() })
		return c
	}
	px, err := StartProxy(ctx, ProxyConfig{Token: "t", Root: testdata(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(px.Close)
	c, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	swarm := &fakeSwarm{}
	b.Cleanup(swarm.close)
	if err := swarm.grow(ctx, px.ExecutorAddr, "t", "/job/udf.py", 1, 1); err != nil {
		b.Fatal(err)
	}
	if err := px.WaitExecutors(ctx, 1); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkThreadsRequest is one threads round trip to a fake pydevd:
// the proxy's own cost per request, with no Python in the way.
func BenchmarkThreadsRequest(b *testing.B) {
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "proxy"
		}
		b.Run(name, func(b *testing.B) {
			c := requestPair(b, via)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Threads(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFanout is the setBreakpoints round trip with N fake executors.
func BenchmarkFanout(b *testing.B) {
	script := filepath.Join(testdata(b), "debuggee.py")
	lines, err := fanoutLines(script, "# FANOUT")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			px, err := StartProxy(ctx, ProxyConfig{Token: "t", Root: testdata(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer px.Close()
			c, err := attachIDE(ctx, px.IDEAddr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			swarm := &fakeSwarm{}
			defer swarm.close()
			if err := swarm.grow(ctx, px.ExecutorAddr, "t", script, n, 64); err != nil {
				b.Fatal(err)
			}
			if err := px.WaitExecutors(ctx, n); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := timeSetBreakpoints(ctx, c, script, lines, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOutput is output events from one fake executor through the
// proxy to a merged-mode IDE.
func BenchmarkOutput(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	px, err := StartProxy(ctx, ProxyConfig{Token: "t"})
	if err != nil {
		b.Fatal(err)
	}
	defer px.Close()
	ide, err := dialRawIDE(ctx, px.IDEAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer ide.close()
	p, err := fakepydevd.Dial(ctx, px.ExecutorAddr, fakepydevd.Config{Token: "t", PID: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	<-p.Configured()
	if err := px.WaitExecutors(ctx, 1); err != nil {
		b.Fatal(err)
	}
	ev := fakepydevd.OutputEvent("stdout", outputText(1024))
	b.SetBytes(int64(ev.TextBytes()))
	base := ide.outputs.Load()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if err := p.SendOutput(ev); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := ide.waitOutputs(ctx, base+int64(n)); err != nil {
		b.Fatal(err)
	}
}

// TestOutputBatchingRealDebugpy prints numbered lines from real debugpy
// workers through a proxy child to a merged-mode IDE: with the wrapper's
// batching every line arrives once, in order, in far fewer events than
// lines; without it (pydevd as shipped) there are two events per print().
func TestOutputBatchingRealDebugpy(t *testing.T) {
	testenv.SkipIfShort(t, "starts Python processes")
	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import debugpy").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 with debugpy is required in CI: %v", err)
		}
		t.Skipf("no python3 with debugpy: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	td := testdata(t)
	cfg := OutputConfig{Python: python, Testdata: td, WrapperDir: filepath.Join(td, "..", "..", "workerwrap", "python"),
		Lines: 3000, Token: "t"}
	for _, tc := range []struct {
		mode      string
		workers   int
		maxEvents int64
		minEvents int64
	}{
		{"batched", 1, 3000 / 20, 1},
		{"batched", 3, 3 * 3000 / 20, 3},
		{"unbatched", 1, 1 << 30, 2 * 3000},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.mode, tc.workers), func(t *testing.T) {
			r, err := RunOutput(ctx, cfg, tc.mode, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			if r.OrderErrors != 0 {
				t.Errorf("%d lines out of order or missing", r.OrderErrors)
			}
			if r.Events < tc.minEvents || r.Events > tc.maxEvents {
				t.Errorf("%d output events for %d lines from %d workers, want %d…%d", r.Events, cfg.Lines, tc.workers, tc.minEvents, tc.maxEvents)
			}
			t.Logf("%s, %d workers: %d events, %.2f MB/s", tc.mode, tc.workers, r.Events, r.MBps())
		})
	}
}

// BenchmarkStackTraceRequest is one stackTrace round trip to a stopped
// fake pydevd through a proxy child: the proxy's own cost per relayed
// request (SPARKDAP_BENCH_PROFILE_DIR profiles the child).
func BenchmarkStackTraceRequest(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	px, err := StartProxy(ctx, ProxyConfig{Token: "t", Root: testdata(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer px.Close()
	c, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	swarm := &fakeSwarm{}
	defer swarm.close()
	if err := swarm.grow(ctx, px.ExecutorAddr, "t", "/job/udf.py", 1, 1); err != nil {
		b.Fatal(err)
	}
	if err := px.WaitExecutors(ctx, 1); err != nil {
		b.Fatal(err)
	}
	if err := swarm.peers[0].Stop(); err != nil {
		b.Fatal(err)
	}
	ev, err := c.WaitEvent(ctx, "stopped", nil)
	if err != nil {
		b.Fatal(err)
	}
	var body struct {
		ThreadID int `json:"threadId"`
	}
	if err := ev.Decode(&body); err != nil {
		b.Fatal(err)
	}
	cpu0 := procCPU(px.PID())
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.StackTrace(ctx, body.ThreadID); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The proxy child's own CPU per request (10 ms ticks: run enough
	// iterations), steadier than ns/op on a shared machine.
	b.ReportMetric(float64((procCPU(px.PID())-cpu0).Microseconds())/float64(b.N), "proxy-µs/op")
}

// TestAttachSectionRuns runs section 8 for one round with real debugpy
// workers: every path attaches (its worker prints RUNNING under the
// debugger), so a broken path shows in go test. No timing is asserted.
func TestAttachSectionRuns(t *testing.T) {
	testenv.SkipIfShort(t, "starts Python processes")
	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import debugpy").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 with debugpy is required in CI: %v", err)
		}
		t.Skipf("no python3 with debugpy: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	td := testdata(t)
	tab, err := Attach(ctx, AttachConfig{Python: python, Testdata: td, Rounds: 1, Token: "t"}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Rows) != 10 {
		t.Fatalf("%d rows, want 10 (fresh: floor, sparkdap, bare, listen, adapter; fork: floor, sparkdap, listen, adapter, hoisted)", len(tab.Rows))
	}
}
