// Command demo is sparkdap's guided tour: it starts `sparkdap serve`,
// attaches a scripted DAP client in place of your IDE, runs the loans example
// under `sparkdap submit` on local Spark, and shows each executor task that
// stops at a breakpoint — where, which task, and its variables — before
// letting the job finish. Run it through ./scripts/demo.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sparkdap/sparkdap/internal/breakmark"
	"github.com/sparkdap/sparkdap/internal/dapclient"
)

func main() {
	sparkdap := flag.String("sparkdap", "bin/sparkdap", "the sparkdap binary")
	example := flag.String("example", "examples/loans", "directory of the loans example")
	partitions := flag.String("partitions", "0", "partitions to debug")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	var confs sparkConfs
	flag.Var(&confs, "conf", "a Spark setting KEY=VALUE for the job (repeatable), as spark-submit's --conf")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *sparkdap, *example, *partitions, confs); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		os.Exit(1)
	}
}

// sparkConfs collects --conf flags.
type sparkConfs []string

func (c *sparkConfs) String() string { return strings.Join(*c, " ") }

func (c *sparkConfs) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*c = append(*c, v)
	return nil
}

// prefixed copies a child's output line by line behind a label, so the
// proxy's, Spark's and the demo's own lines can be told apart. Unless
// verbose, only lines that keep matter to a reader: sparkdap's own, and
// errors.
func prefixed(label string, r io.Reader, wg *sync.WaitGroup) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	hidden := 0
	for sc.Scan() {
		line := sc.Text()
		if !*verbose && !strings.Contains(line, "sparkdap:") && !strings.Contains(line, "ERROR") &&
			!strings.Contains(line, "Traceback") && !strings.Contains(line, "Error:") {
			hidden++
			continue
		}
		fmt.Fprintf(os.Stderr, "  %s | %s\n", label, line)
	}
	if hidden > 0 {
		fmt.Fprintf(os.Stderr, "  %s | (%d more lines not shown; run with --verbose to see them)\n", label, hidden)
	}
}

var verbose = flag.Bool("verbose", false, "show all of Spark's and the proxy's output")

func logLevel() string {
	if *verbose {
		return "debug"
	}
	return "warn"
}

func say(format string, args ...any) { fmt.Printf("\n▶ "+format+"\n", args...) }

func run(ctx context.Context, sparkdap, example, partitions string, confs []string) error {
	example, _ = filepath.Abs(example)
	sparkdap, _ = filepath.Abs(sparkdap)
	tmp, err := os.MkdirTemp("", "sparkdap-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tok := make([]byte, 16)
	rand.Read(tok)
	token := hex.EncodeToString(tok)

	var wg sync.WaitGroup
	defer wg.Wait()

	// 1. The proxy.
	ready := filepath.Join(tmp, "ready.json")
	serve := exec.CommandContext(ctx, sparkdap, "serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0",
		"--token", token, "--ready-file", ready, "--root", example, "--log-level", logLevel())
	serveErr, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		return fmt.Errorf("start sparkdap serve: %w", err)
	}
	wg.Add(1)
	go prefixed("proxy", serveErr, &wg)
	defer func() { serve.Process.Signal(os.Interrupt); serve.Wait() }()
	var addrs struct{ IDE, Executors string }
	for i := 0; ; i++ {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		if i > 200 {
			return errors.New("sparkdap serve did not start listening within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	say("sparkdap serve is up: IDE port %s, executor port %s", addrs.IDE, addrs.Executors)

	// 2. The "IDE": breakpoints in a UDF body (a function pickled from the
	// driver's script) and in a helper module shipped with --py-files.
	main := filepath.Join(example, "loans.py")
	lib := filepath.Join(example, "loanlib.py")
	udfLine, err := breakmark.Line(main, "udf-body")
	if err != nil {
		return err
	}
	libLine, err := breakmark.Line(lib, "loanlib-payment")
	if err != nil {
		return err
	}
	ide, err := dapclient.Dial(ctx, addrs.IDE)
	if err != nil {
		return err
	}
	defer ide.Close()
	if _, err := ide.Initialize(ctx, false); err != nil {
		return err
	}
	err = ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			if _, err := ide.SetBreakpoints(ctx, main, udfLine); err != nil {
				return err
			}
			_, err := ide.SetBreakpoints(ctx, lib, libLine)
			return err
		})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	say("attached as the IDE; breakpoints at loans.py:%d (UDF body) and loanlib.py:%d (helper module)", udfLine, libLine)

	// 3. The job, with only the chosen partitions debugged.
	out := filepath.Join(tmp, "result.json")
	args := []string{"submit", "--proxy", addrs.Executors, "--partitions", partitions, "--", "--master", "local[2]"}
	for _, c := range confs {
		args = append(args, "--conf", c)
	}
	args = append(args, "--py-files", lib, main, "--output", out)
	submit := exec.CommandContext(ctx, sparkdap, args...)
	submit.Dir = example
	submit.Env = append(os.Environ(), "SPARKDAP_TOKEN="+token)
	so, _ := submit.StdoutPipe()
	se, _ := submit.StderrPipe()
	if err := submit.Start(); err != nil {
		return fmt.Errorf("sparkdap submit: %w", err)
	}
	wg.Add(2)
	go prefixed("spark", so, &wg)
	go prefixed("spark", se, &wg)
	say("sparkdap submit --partitions %s -- --master local[2] loans.py  (a real Spark job)", partitions)
	jobDone := make(chan error, 1)
	go func() { jobDone <- submit.Wait() }()

	// 4. Stop, look, go on — once per file, then let the job finish.
	pending := map[string]bool{main: true, lib: true}
	for len(pending) > 0 {
		stopCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		stopped := make(chan error, 1)
		var tid int
		go func() {
			st, err := ide.StoppedEvent(stopCtx)
			if err == nil {
				tid = st.ThreadId
			}
			stopped <- err
		}()
		select {
		case err := <-stopped:
			cancel()
			if err != nil {
				return fmt.Errorf("waiting for a breakpoint: %w", err)
			}
		case err := <-jobDone:
			cancel()
			return fmt.Errorf("the job ended (%v) before stopping at %d more breakpoint(s)", err, len(pending))
		}
		if err := show(ctx, ide, tid, pending); err != nil {
			return err
		}
		if err := ide.Continue(ctx, tid); err != nil {
			return err
		}
	}
	say("both breakpoints hit; removed them and let the job run on")
	if err := <-jobDone; err != nil {
		return fmt.Errorf("the Spark job failed: %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	var result map[string]any
	if err := json.Unmarshal(b, &result); err != nil {
		return fmt.Errorf("job result %s: %w", out, err)
	}
	compact, _ := json.Marshal(result)
	say("the job finished normally. Its result:\n  %s", compact)
	return nil
}

// show prints where a thread stopped and its locals, then removes the
// breakpoint of that file so the task runs on.
func show(ctx context.Context, ide *dapclient.Client, tid int, pending map[string]bool) error {
	threads, err := ide.Threads(ctx)
	if err != nil {
		return err
	}
	name := fmt.Sprint(tid)
	for _, t := range threads {
		if t.Id == tid {
			name = t.Name
		}
	}
	frames, err := ide.StackTrace(ctx, tid)
	if err != nil || len(frames) == 0 {
		return fmt.Errorf("stackTrace: %v", err)
	}
	top := frames[0]
	path := ""
	if top.Source != nil {
		path = top.Source.Path
	}
	say("STOPPED in an executor task at %s:%d, function %s\n  thread: %s", path, top.Line, top.Name, name)
	scopes, err := ide.Scopes(ctx, top.Id)
	if err == nil && len(scopes) > 0 {
		vars, err := ide.Variables(ctx, scopes[0].VariablesReference)
		if err == nil {
			for i, v := range vars {
				if i == 8 {
					break
				}
				fmt.Printf("    %s = %s\n", v.Name, v.Value)
			}
		}
	}
	if pending[path] {
		delete(pending, path)
		if _, err := ide.SetBreakpoints(ctx, path); err != nil {
			return err
		}
	}
	return nil
}
