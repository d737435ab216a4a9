package demo

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sparkdap/sparkdap/examples/loans"
	"github.com/sparkdap/sparkdap/internal/breakmark"
	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// Options says how to run the demo.
type Options struct {
	// Sparkdap is the sparkdap binary the demo runs serve and submit with.
	Sparkdap string
	// Example is a directory holding loans.py and loanlib.py; "" writes the
	// embedded copy to a temporary directory.
	Example string
	// Python is the job's interpreter, on the driver and the executors
	// ("" leaves it to spark-submit: $PYSPARK_PYTHON, else python3).
	Python string
	// Partitions are the partition ids to debug, as submit --partitions.
	Partitions string
	// Confs are Spark settings KEY=VALUE for the job.
	Confs []string
	// Verbose shows all of Spark's and the proxy's output, not only
	// sparkdap's lines and errors.
	Verbose bool
	// Out gets the tour; Err the children's output. Lines from the
	// children are labelled and, never raw, stripped of control bytes.
	Out, Err io.Writer
}

// Run runs the demo until the job finished, ctx ended or a step failed.
func Run(ctx context.Context, o Options) error {
	if o.Partitions == "" {
		o.Partitions = "0"
	}
	if err := checkTools(ctx, o.Python); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sparkdap-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	example := o.Example
	if example == "" {
		example = filepath.Join(tmp, "loans")
		if err := writeExample(example); err != nil {
			return fmt.Errorf("write the loans example: %w", err)
		}
	}
	if example, err = filepath.Abs(example); err != nil {
		return err
	}
	t := &tour{o: o, example: example, tmp: tmp}
	return t.run(ctx)
}

// writeExample writes the embedded loans example into dir.
func writeExample(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(loans.Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := loans.Files.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, path), b, 0o644)
	})
}

// ErrMissing is returned (wrapped, with what to install) when the
// machine lacks something the demo's job needs.
var ErrMissing = errors.New("the demo's job cannot run here")

// checkTools checks for spark-submit and for what the job imports, so
// that a missing package is one clear line rather than a Spark stack
// trace minutes later.
func checkTools(ctx context.Context, python string) error {
	if _, err := exec.LookPath("spark-submit"); err != nil {
		return fmt.Errorf("%w: no spark-submit on PATH (pip install pyspark, in the environment you run sparkdap from)", ErrMissing)
	}
	if python == "" {
		python = os.Getenv("PYSPARK_PYTHON")
	}
	if python == "" {
		python = "python3"
	}
	missing, err := missingModules(ctx, python, "pyspark", "debugpy", "pandas", "pyarrow")
	if err != nil {
		return fmt.Errorf("%w: cannot run %s: %v", ErrMissing, python, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks %s (pip install %s)", ErrMissing, python, strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	return nil
}

// missingModules returns the modules python cannot import, found without
// importing them (pyspark takes seconds to import).
func missingModules(ctx context.Context, python string, modules ...string) ([]string, error) {
	const probe = `import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))`
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, append([]string{"-c", probe}, modules...)...).Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// tour is one run of the demo.
type tour struct {
	o            Options
	example, tmp string
	wg           sync.WaitGroup // the goroutines copying children's output
}

func (t *tour) say(format string, args ...any) {
	fmt.Fprintf(t.o.Out, "\n▶ "+format+"\n", args...)
}

func (t *tour) logLevel() string {
	if t.o.Verbose {
		return "debug"
	}
	return "warn"
}

// prefixed copies a child's output line by line behind a label, so the
// proxy's, Spark's and the demo's own lines can be told apart. Unless
// verbose, only lines that matter to a reader are kept: sparkdap's own,
// and errors.
func (t *tour) prefixed(label string, r io.Reader) {
	defer t.wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	hidden := 0
	for sc.Scan() {
		line := sc.Text()
		if !t.o.Verbose && !strings.Contains(line, "sparkdap:") && !strings.Contains(line, "ERROR") &&
			!strings.Contains(line, "Traceback") && !strings.Contains(line, "Error:") {
			hidden++
			continue
		}
		fmt.Fprintf(t.o.Err, "  %s | %s\n", label, printable(line))
	}
	if hidden > 0 {
		fmt.Fprintf(t.o.Err, "  %s | (%d more lines not shown; run with --verbose to see them)\n", label, hidden)
	}
}

// printable replaces control characters, so that nothing a child prints
// moves the terminal's cursor or changes its state.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

func (t *tour) run(ctx context.Context) error {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	token := hex.EncodeToString(tok)
	defer t.wg.Wait()

	// 1. The proxy.
	ready := filepath.Join(t.tmp, "ready.json")
	serve := exec.CommandContext(ctx, t.o.Sparkdap, "serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0",
		"--token", token, "--ready-file", ready, "--root", t.example, "--log-level", t.logLevel())
	serveErr, err := serve.StderrPipe()
	if err != nil {
		return err
	}
	if err := serve.Start(); err != nil {
		return fmt.Errorf("start sparkdap serve: %w", err)
	}
	t.wg.Add(1)
	go t.prefixed("proxy", serveErr)
	defer func() { stopChild(serve) }()
	var addrs struct{ IDE, Executors string }
	for i := 0; ; i++ {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		if i > 200 {
			return errors.New("sparkdap serve did not start listening within 20s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.say("sparkdap serve is up: IDE port %s, executor port %s", addrs.IDE, addrs.Executors)

	// 2. The "IDE": breakpoints in a UDF body (a function pickled from the
	// driver's script) and in a helper module shipped with --py-files.
	main := filepath.Join(t.example, "loans.py")
	lib := filepath.Join(t.example, "loanlib.py")
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
	t.say("attached as the IDE; breakpoints at loans.py:%d (UDF body) and loanlib.py:%d (helper module)", udfLine, libLine)

	// 3. The job, with only the chosen partitions debugged.
	out := filepath.Join(t.tmp, "result.json")
	args := []string{"submit", "--proxy", addrs.Executors, "--partitions", t.o.Partitions, "--", "--master", "local[2]"}
	for _, c := range t.o.Confs {
		args = append(args, "--conf", c)
	}
	args = append(args, "--py-files", lib, main, "--output", out)
	submit := exec.CommandContext(ctx, t.o.Sparkdap, args...)
	submit.Dir = t.example
	submit.Env = append(os.Environ(), "SPARKDAP_TOKEN="+token)
	if t.o.Python != "" {
		submit.Env = append(submit.Env, "PYSPARK_PYTHON="+t.o.Python)
	}
	so, err := submit.StdoutPipe()
	if err != nil {
		return err
	}
	se, err := submit.StderrPipe()
	if err != nil {
		return err
	}
	if err := submit.Start(); err != nil {
		return fmt.Errorf("sparkdap submit: %w", err)
	}
	t.wg.Add(2)
	go t.prefixed("spark", so)
	go t.prefixed("spark", se)
	t.say("sparkdap submit --partitions %s -- --master local[2] loans.py  (a real Spark job)", t.o.Partitions)
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
		if err := t.show(ctx, ide, tid, pending); err != nil {
			return err
		}
		if err := ide.Continue(ctx, tid); err != nil {
			return err
		}
	}
	t.say("both breakpoints hit; removed them and let the job run on")
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
	t.say("the job finished normally. Its result:\n  %s", compact)
	return nil
}

// stopChild asks a child to stop (an interrupt, where the OS has one) and
// waits for it.
func stopChild(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	if err := c.Process.Signal(os.Interrupt); err != nil {
		_ = c.Process.Kill()
	}
	_ = c.Wait()
}

// show prints where a thread stopped and its locals, then removes the
// breakpoint of that file so the task runs on.
func (t *tour) show(ctx context.Context, ide *dapclient.Client, tid int, pending map[string]bool) error {
	threads, err := ide.Threads(ctx)
	if err != nil {
		return err
	}
	name := fmt.Sprint(tid)
	for _, th := range threads {
		if th.Id == tid {
			name = th.Name
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
	t.say("STOPPED in an executor task at %s:%d, function %s\n  thread: %s", printable(path), top.Line, printable(top.Name), printable(name))
	scopes, err := ide.Scopes(ctx, top.Id)
	if err == nil && len(scopes) > 0 {
		vars, err := ide.Variables(ctx, scopes[0].VariablesReference)
		if err == nil {
			for i, v := range vars {
				if i == 8 {
					break
				}
				fmt.Fprintf(t.o.Out, "    %s = %s\n", printable(v.Name), printable(v.Value))
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
