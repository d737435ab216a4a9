// Command sparkdap-bench runs sparkdap's benchmark suite (package bench) and
// prints a Markdown report. Run it through scripts/bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/bench"
	"github.com/sparkdap/sparkdap/internal/safefile"
)

func main() {
	bench.RunChildIfRequested()
	quick := flag.Bool("quick", false, "few samples, small sizes: a smoke run of a minute or two")
	only := flag.String("only", "latency,fanout,scale,throughput,worker,output,storm,attach,spark",
		"comma-separated sections to run (kubernetes, not in the default, starts a one-node Kubernetes)")
	sparkdapBin := flag.String("sparkdap", "", "sparkdap executable, uploaded as the tunnel's agent (tunnel rows need it)")
	testdata := flag.String("testdata", "bench/testdata", "directory of the benchmarks' Python workers")
	out := flag.String("out", "", "also write the report to this file")
	flag.Parse()

	td, err := filepath.Abs(*testdata)
	if err != nil {
		fatal(err)
	}
	python, _ := exec.LookPath("python3")
	var w io.Writer = os.Stdout
	var report strings.Builder
	w = io.MultiWriter(os.Stdout, &report)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	sections := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		sections[strings.TrimSpace(s)] = true
	}
	mode := "full"
	if *quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "## Benchmark results (%s run, %s)\n\n", mode, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Machine: %s\n\n", bench.MachineFacts(python))

	ctx := context.Background()
	token := "bench-token-7d41"
	var failed []string
	run := func(name string, f func() (*bench.Table, error)) {
		if !sections[name] {
			return
		}
		logf("== %s", name)
		start := time.Now()
		t, err := f()
		if err != nil {
			logf("%s FAILED: %v", name, err)
			failed = append(failed, name)
			fmt.Fprintf(w, "### %s\n\nFAILED: %v\n\n", name, err)
			return
		}
		if t == nil { // the section wrote its own tables
			fmt.Fprintf(w, "- section took %s\n\n", time.Since(start).Round(time.Second))
			return
		}
		t.Note("section took %s", time.Since(start).Round(time.Second))
		t.Write(w)
	}
	// The real-cluster sections are Go benchmarks in package integration,
	// beside the harness that starts Spark, YARN and Kubernetes; they append
	// their tables to $SPARKDAP_BENCH_REPORT.
	repo := filepath.Join(td, "..", "..")
	goBench := func(pattern string, env ...string) (*bench.Table, error) {
		if *quick {
			env = append(env, "SPARKDAP_BENCH_FIRSTSTOP_ROUNDS=1", "SPARKDAP_BENCH_OUTPUT_LINES=20000")
		}
		return nil, runGoBench(ctx, repo, pattern, w, env)
	}
	run("latency", func() (*bench.Table, error) {
		cfg := bench.LatencyConfig{Python: python, Testdata: td, Requests: 10000, SlowRequests: 200, Token: token}
		if *quick {
			cfg.Requests, cfg.SlowRequests = 200, 20
		}
		return bench.Latency(ctx, cfg, logf)
	})
	run("fanout", func() (*bench.Table, error) {
		cfg := bench.FanoutConfig{Python: python, Testdata: td, Ns: []int{1, 10, 100, 1000}, RealNs: []int{1, 10},
			Repeats: 30, Token: token}
		if *quick {
			cfg.Ns, cfg.RealNs, cfg.Repeats = []int{1, 10, 100}, []int{1}, 5
		}
		return bench.Fanout(ctx, cfg, logf)
	})
	run("scale", func() (*bench.Table, error) {
		cfg := bench.ScaleConfig{Ns: []int{1000, 10000}, Token: token, RealNs: []int{20, 200}, Python: python, Testdata: td}
		if *quick {
			cfg.Ns, cfg.RealNs = []int{200}, nil
		}
		return bench.Scale(ctx, cfg, logf)
	})
	run("throughput", func() (*bench.Table, error) {
		cfg := bench.ThroughputConfig{Executors: []int{1, 100}, Bytes: 64 << 20, Rounds: 3, EventBytes: 1024,
			SparkdapBin: *sparkdapBin, Token: token}
		if *quick {
			cfg.Bytes, cfg.Rounds = 4<<20, 1
		}
		return bench.Throughput(ctx, cfg, logf)
	})
	run("worker", func() (*bench.Table, error) {
		cfg := bench.WorkerConfig{Python: python, Testdata: td, Runs: 5, Rows: 8 * 4000, Token: token}
		if *quick {
			cfg.Runs, cfg.Rows = 1, 8*100
		}
		return bench.Worker(ctx, cfg, logf)
	})
	run("output", func() (*bench.Table, error) {
		cfg := bench.OutputConfig{Python: python, Testdata: td, WrapperDir: filepath.Join(td, "..", "..", "workerwrap", "python"),
			Workers: []int{1, 20}, Lines: 20000, Rounds: 3, Token: token}
		if *quick {
			cfg.Lines, cfg.Rounds = 2000, 1
		}
		if v := os.Getenv("SPARKDAP_BENCH_OUTPUT_LINES"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("SPARKDAP_BENCH_OUTPUT_LINES: %w", err)
			}
			cfg.Lines = n
		}
		return bench.Output(ctx, cfg, logf)
	})
	run("storm", func() (*bench.Table, error) {
		cfg := bench.StormConfig{Ns: []int{10, 50, 200, 1000}, RealNs: []int{10, 50, 200}, Rounds: 5, Token: token, Python: python,
			Testdata: td}
		if *quick {
			cfg.Ns, cfg.RealNs, cfg.Rounds = []int{10, 50}, []int{10}, 2
		}
		if v := os.Getenv("SPARKDAP_BENCH_STORM_NS"); v != "" {
			cfg.Ns = nil
			for _, f := range strings.Split(v, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return nil, fmt.Errorf("SPARKDAP_BENCH_STORM_NS: %w", err)
				}
				cfg.Ns = append(cfg.Ns, n)
			}
		}
		if v, ok := os.LookupEnv("SPARKDAP_BENCH_STORM_REAL_NS"); ok {
			cfg.RealNs = nil
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f == "" {
					continue
				}
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, fmt.Errorf("SPARKDAP_BENCH_STORM_REAL_NS: %w", err)
				}
				cfg.RealNs = append(cfg.RealNs, n)
			}
		}
		return bench.Storm(ctx, cfg, logf)
	})
	run("attach", func() (*bench.Table, error) {
		cfg := bench.AttachConfig{Python: python, Testdata: td, Rounds: 15, Token: token}
		if *quick {
			cfg.Rounds = 3
		}
		return bench.Attach(ctx, cfg, logf)
	})
	run("spark", func() (*bench.Table, error) {
		return goBench("^(BenchmarkFirstStop|BenchmarkFirstStopYARN|BenchmarkSparkOutput|BenchmarkUnselectedTasks)$")
	})
	run("kubernetes", func() (*bench.Table, error) {
		return goBench("^BenchmarkFirstStopKubernetes$", "SPARKDAP_K8S=1")
	})
	fmt.Fprintf(w, "Reproduce: `scripts/bench%s` (Go %s).\n", map[bool]string{true: " -quick", false: ""}[*quick], runtime.Version())
	if *out != "" {
		if err := safefile.WriteFile(*out, []byte(report.String()), 0o644); err != nil {
			fatal(err)
		}
	}
	if len(failed) > 0 {
		logf("failed sections: %s", strings.Join(failed, ", "))
		os.Exit(1)
	}
}

// runGoBench runs the integration package's benchmarks matching pattern
// once each, their progress on stderr, and copies the tables they wrote to
// $SPARKDAP_BENCH_REPORT into w.
func runGoBench(ctx context.Context, repo, pattern string, w io.Writer, env []string) error {
	dir, err := os.MkdirTemp("", "sparkdap-bench-go")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, "report.md")
	cmd := exec.CommandContext(ctx, "go", "test", "./integration", "-run", "^$", "-bench", pattern,
		"-benchtime", "1x", "-timeout", "120m", "-v")
	cmd.Dir = repo
	cmd.Env = append(append(os.Environ(), "SPARKDAP_BENCH_REPORT="+report), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runErr := cmd.Run()
	tables, err := os.ReadFile(report)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_, _ = w.Write(tables)
	if runErr != nil {
		return fmt.Errorf("go test -bench %s: %w", pattern, runErr)
	}
	if len(tables) == 0 {
		return fmt.Errorf("go test -bench %s wrote no table: skipped? (see its output above)", pattern)
	}
	return nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sparkdap-bench:", err)
	os.Exit(1)
}
