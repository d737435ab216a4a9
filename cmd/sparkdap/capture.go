package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/sparkdap/sparkdap/control"
)

func init() {
	register("capture", "list the workers stopped in a running proxy, or capture one's call for sparkdap replay", newCaptureCmd)
}

type captureOptions struct {
	ide, control string
	executor     uint64
	frame        *int // nil: the innermost frame of the user's code
}

// captureTimeout bounds one capture command: a capture of the largest
// size the proxy takes, chunk by chunk, on a slow link.
const captureTimeout = 10 * time.Minute

func newCaptureCmd(stderr io.Writer) *cmdSpec {
	o := &captureOptions{}
	c := &cmdSpec{fs: newFlagSet("capture", stderr)}
	defAddr(c.fs, &o.ide, "ide", defaultIDEAddr, "capture finds the proxy's control socket from it")
	defString(c.fs, &o.control, "control", "", "")
	c.fs.Uint64Var(&o.executor, "executor", 0, "capture this executor session: its `id` as the list shows it (\"executor ID\", the proxy's number for the worker, as in sparkdap paths; the label's \"exec N\" is Spark's); without it, list the stopped workers")
	c.fs.Var(funcValue{set: func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want an index, 0 the innermost frame", v)
		}
		o.frame = &n
		return nil
	}}, "frame", "capture the frame at this `index` of the stopped thread's stack (0 the innermost; default: the innermost of your code, => in the list)")
	c.usage(stderr, "usage: sparkdap capture [--ide HOST:PORT | --control PATH] [--executor ID [--frame N]]\n\n"+
		"Without --executor: lists the workers stopped in the running 'sparkdap serve' (at a breakpoint or, with\n"+
		"--post-mortem, an exception), each with its stack. With it: captures the function of that worker's frame and\n"+
		"the arguments it holds to a file in serve's --capture-dir, and prints the 'sparkdap replay' command for it.\n"+
		"The same as typing !capture in the IDE's Debug Console with that frame selected.\n\n"+
		"Examples:\n  sparkdap capture\n  sparkdap capture --executor 3\n  sparkdap capture --ide 127.0.0.1:4800 --executor 3 --frame 1\n\nFlags:\n")
	c.run = func(args []string, stdout, _ io.Writer) error { return captureRun(o, args, stdout) }
	return c
}

func captureRun(o *captureOptions, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (capture takes only flags)", args)
	}
	if o.frame != nil && o.executor == 0 {
		return errors.New("--frame needs --executor: the frame of which worker")
	}
	path := o.control
	if path == "" {
		path = control.PathFor(o.ide)
	}
	ctx, cancel := context.WithTimeout(context.Background(), captureTimeout)
	defer cancel()
	req := control.Request{Op: control.OpWorkers}
	if o.executor != 0 {
		req = control.Request{Op: control.OpCapture, Executor: o.executor, Frame: o.frame}
	}
	ans, err := control.Call(ctx, path, req)
	if err != nil {
		return captureError(o, path, err)
	}
	if req.Op == control.OpCapture {
		fmt.Fprintln(stdout, ans.Capture.Summary)
		fmt.Fprintf(stdout, "file: %s\nreplay: sparkdap replay %s\n", ans.Capture.Path, localShell.Quote(ans.Capture.Path))
		return nil
	}
	if len(ans.Workers) == 0 {
		return errors.New("no worker is stopped: stop one at a breakpoint, or at an exception (wrap --post-mortem), then run this again")
	}
	for _, w := range ans.Workers {
		th := fmt.Sprintf("thread %d", w.Thread)
		if w.ThreadName != "" {
			th += " " + w.ThreadName
		}
		fmt.Fprintf(stdout, "executor %d  [%s]  %s\n", w.Executor, w.Label, th)
		if w.StackError != "" {
			fmt.Fprintf(stdout, "  stack unknown: %s\n", w.StackError)
		}
		for i, f := range w.Frames {
			mark := "  "
			if i == w.Top {
				mark = "=>"
			}
			note := ""
			if f.Plumbing {
				note = "  (sparkdap/PySpark plumbing)"
			}
			fmt.Fprintf(stdout, "  %s #%d %s  %s:%d%s\n", mark, i, f.Name, f.File, f.Line, note)
		}
	}
	w := ans.Workers[0]
	fmt.Fprintf(stdout, "capture one: sparkdap capture --executor %d   (=> marks the frame it takes; --frame N for another)\n", w.Executor)
	return nil
}

// captureError says what a failed control call means for the user.
func captureError(o *captureOptions, path string, err error) error {
	var ce *control.Error
	switch {
	case errors.As(err, &ce):
		switch ce.Code {
		case control.CodeUnknownExecutor:
			return flagError("executor", fmt.Errorf("%s (run 'sparkdap capture' without --executor to list the stopped ones)", ce.Message))
		case control.CodeNoFrame:
			return flagError("frame", errors.New(ce.Message))
		}
		return errors.New(ce.Message)
	case control.NoServer(err):
		how := "--ide " + o.ide
		if o.control != "" {
			how = "--control " + o.control
		}
		return fmt.Errorf("no sparkdap serve is running for %s (no control socket answers at %s): start one, or give the "+
			"--ide or --control it printed at its start", how, path)
	}
	return fmt.Errorf("control socket %s: %w", path, err)
}
