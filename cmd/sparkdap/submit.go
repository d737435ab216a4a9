package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/workerwrap"
)

func init() {
	register("submit", "run spark-submit with the worker wrapper generated and injected", func(stderr io.Writer) *cmdSpec {
		c := newSubmitCmd(os.Stdin, stderr)
		run := c.run
		c.run = func(args []string, stdout, stderr io.Writer) error {
			err := run(args, stdout, stderr)
			var st exitStatusError
			if errors.As(err, &st) {
				// The job's own exit status matters to scripts and schedulers,
				// and main only knows 0, 1 and 2.
				exitProcess(int(st))
			}
			return err
		}
		return c
	})
}

// exitProcess is os.Exit, replaceable in tests.
var exitProcess = os.Exit

// exitStatusError is spark-submit's non-zero exit status.
type exitStatusError int

func (e exitStatusError) Error() string {
	return fmt.Sprintf("spark-submit exited with status %d", int(e))
}

type submitOptions struct {
	sparkSubmit string
	dryRun      bool
	wrap        *wrapFlags
	stdin       io.Reader
}

// runSubmit parses args and runs submit, with stdin for spark-submit.
func runSubmit(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return newSubmitCmd(stdin, stderr).execute(args, stdout, stderr)
}

func newSubmitCmd(stdin io.Reader, stderr io.Writer) *cmdSpec {
	o := &submitOptions{stdin: stdin}
	c := &cmdSpec{fs: newFlagSet("submit", stderr)}
	c.fs.StringVar(&o.sparkSubmit, "spark-submit", "", "spark-submit `binary` (default $SPARK_HOME/bin/spark-submit, else from PATH)")
	defBool(c.fs, &o.dryRun, "n", "prints the spark-submit command")
	o.wrap = addWrapFlags(c, stderr)
	c.usage(stderr, `usage: sparkdap submit [flags] -- <spark-submit arguments>

Generates the worker wrapper and runs spark-submit with it injected
(--py-files, spark.python.daemon.module; the token baked into the shipped
wrapper, never on the command line or in the Spark conf).

Examples:
  export SPARKDAP_TOKEN=$(openssl rand -hex 16)     # the token sparkdap serve uses
  sparkdap submit --partitions 1 -- --master 'local[2]' --py-files loanlib.py loans.py
  sparkdap submit --proxy edge.example.com:5678 --stages 3 --sample-rate 0.1 -- --master yarn app.py
  sparkdap submit -n -- --master 'local[2]' app.py  # print the spark-submit command only

Flags:
`)
	c.run = func(args []string, stdout, stderr io.Writer) error { return submitRun(o, args, stdout, stderr) }
	return c
}

func submitRun(o *submitOptions, sparkArgs []string, stdout, stderr io.Writer) error {
	stdin, wf := o.stdin, o.wrap
	if len(sparkArgs) == 0 {
		return errors.New("no spark-submit arguments: put them after --, e.g. sparkdap submit -- --master 'local[2]' app.py")
	}
	opts, err := wf.options()
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "sparkdap-submit-")
	if err != nil {
		return fmt.Errorf("temp dir for the wrapper: %w", err)
	}
	defer os.RemoveAll(dir)
	wrapper := filepath.Join(dir, workerwrap.FileName)
	// The token travels baked into the wrapper (the file is 0600 in this
	// 0700 directory, and --py-files ships it as the job's code), never on
	// spark-submit's command line, where ps shows it for the whole job, nor
	// in spark.executorEnv, which the event log and the UI's environment
	// page keep. The same on local, standalone and YARN (see SECURITY.md).
	if opts.Token == "" {
		opts.Token = os.Getenv(opts.TokenEnv)
		if opts.Token != "" {
			if err := wf.checkBakedToken(opts.Token); err != nil {
				return err
			}
		}
	}
	if err := workerwrap.WriteFile(wrapper, opts); err != nil {
		return err
	}
	ship, err := wf.shipped(context.Background(), dir)
	if err != nil {
		return err
	}
	inj := workerwrap.Injection{WrapperPath: wrapper, TokenEnv: opts.TokenEnv, Shipped: ship}
	finalArgs, err := inj.Apply(sparkArgs)
	if err != nil {
		return fmt.Errorf("spark-submit arguments: %w", err)
	}
	bin, err := findSparkSubmit(o.sparkSubmit)
	if err != nil {
		return err
	}
	if o.dryRun {
		quoted := make([]string, 0, len(finalArgs)+1)
		quoted = append(quoted, shellquote.Quote(bin))
		for _, a := range finalArgs {
			if inj.Token != "" && strings.Contains(a, inj.Token) {
				a = strings.ReplaceAll(a, inj.Token, "<redacted>")
			}
			quoted = append(quoted, shellquote.Quote(a))
		}
		_, err := fmt.Fprintln(stdout, strings.Join(quoted, " "))
		return err
	}

	if fi, err := os.Stat(workerwrap.FileName); err == nil && !fi.IsDir() {
		// Seen for real: local-mode daemons run in this directory, and
		// `python -m` puts it ahead of PYTHONPATH, so a stale copy wins.
		fmt.Fprintf(stderr, "sparkdap: warning: ./%s in the working directory shadows the generated wrapper in local mode; remove it or run from another directory\n", workerwrap.FileName)
	}
	fmt.Fprintf(stderr, "sparkdap: %s\n", leaseText(opts.Lease))
	cmd := exec.Command(bin, finalArgs...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// Local-mode workers inherit the JVM's environment: the wrapper's
	// directory on PYTHONPATH makes `python -m remote_debug` work even
	// before Spark has fetched the --py-files copy.
	cmd.Env = withPythonPath(os.Environ(), dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	// Ctrl-C reaches spark-submit through the terminal's process group; we
	// only must not die first and leave the wrapper directory behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM {
				_ = cmd.Process.Signal(s)
			}
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if code := ee.ExitCode(); code > 0 {
			return exitStatusError(code)
		}
		return fmt.Errorf("%s: %w", bin, err) // killed by a signal
	}
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	return nil
}

func findSparkSubmit(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if home := os.Getenv("SPARK_HOME"); home != "" {
		p := filepath.Join(home, "bin", "spark-submit")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SPARK_HOME is %s but %w", home, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("spark-submit")
	if err != nil {
		return "", fmt.Errorf("spark-submit not found (set SPARK_HOME, put it on PATH, or pass --spark-submit): %w", err)
	}
	return p, nil
}

func withPythonPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			found = true
			if v != "" {
				kv = "PYTHONPATH=" + dir + string(filepath.ListSeparator) + v
			} else {
				kv = "PYTHONPATH=" + dir
			}
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "PYTHONPATH="+dir)
	}
	return out
}
