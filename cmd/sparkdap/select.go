package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/workerwrap"
)

func init() {
	register("select", "change which tasks stop, in a running proxy, while the job runs", newSelectCmd)
	register("workers", "list every worker a running proxy knows: its task, selected or not, where it is stopped", newWorkersCmd)
}

// controlTimeout bounds a select or workers command: the proxy answers
// from memory, or asks each stopped worker for its stack.
const controlTimeout = time.Minute

type selectOptions struct {
	ide, control              string
	partitions, stages, execs string
	sampleRate                float64
	all, none, asSubmitted    bool
	asJSON                    bool
	task                      int64
}

func newSelectCmd(stderr io.Writer) *cmdSpec {
	o := &selectOptions{}
	c := &cmdSpec{fs: newFlagSet("select", stderr)}
	defAddr(c.fs, &o.ide, "ide", defaultIDEAddr, "select finds the proxy's control socket from it")
	defString(c.fs, &o.control, "control", "", "")
	defString(c.fs, &o.partitions, "partitions", "", "")
	defString(c.fs, &o.stages, "stages", "", "")
	defFloat(c.fs, &o.sampleRate, "sample-rate", 1, "")
	c.fs.StringVar(&o.execs, "executor-ids", "", "debug only tasks on these Spark executor `ids` (comma separated, as the label's \"exec N\" and 'sparkdap workers' show them; default all)")
	c.fs.BoolVar(&o.all, "all", false, "select every task")
	c.fs.BoolVar(&o.none, "none", false, "select no task")
	c.fs.BoolVar(&o.asSubmitted, "as-submitted", false, "go back to the selection each worker was submitted with")
	c.fs.Int64Var(&o.task, "task", -1, "stop in this task (its task attempt `id`, as 'sparkdap workers' lists it) at its next exception, though others of the same exception group stopped already; the selection stays as it is")
	defBool(c.fs, &o.asJSON, "json", "")
	c.usage(stderr, "usage: sparkdap select [--ide HOST:PORT | --control PATH] [--partitions IDS] [--stages IDS]\n"+
		"                       [--executor-ids IDS] [--sample-rate F] | --all | --none | --as-submitted | --task ID\n\n"+
		"Changes which tasks stop, while the job runs: every task that starts after it, on every worker that\n"+
		"follows the running 'sparkdap serve', decides on the new selection. A task already running keeps its\n"+
		"choice. The flags say the whole selection: a flag left out selects all. Without flags it prints the\n"+
		"current selection. With exception breakpoints on, the first task that raises a given exception at a\n"+
		"given place stops; the others of that group wait 'serve --exception-hold', then run on: --task asks\n"+
		"for one of them to stop instead.\n\n"+
		"Examples:\n  sparkdap select --partitions 37\n  sparkdap select --stages 4 --sample-rate 0.1\n  sparkdap select --none\n\nFlags:\n")
	c.run = func(args []string, stdout, _ io.Writer) error { return selectRun(c, o, args, stdout) }
	return c
}

// selectionOf is the selection the flags say, nil for none given.
func selectionOf(c *cmdSpec, o *selectOptions) (req control.Request, err error) {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	filters := set["partitions"] || set["stages"] || set["executor-ids"] || set["sample-rate"]
	modes := 0
	for _, m := range []bool{o.all, o.none, o.asSubmitted, filters, set["task"]} {
		if m {
			modes++
		}
	}
	if modes > 1 {
		return req, errors.New("--all, --none, --as-submitted, --task and the selecting flags (--partitions, --stages, --executor-ids, --sample-rate) exclude each other")
	}
	req.Op = control.OpSelect
	switch {
	case set["task"]:
		if o.task < 0 {
			return req, flagError("task", errors.New("want a task attempt id, 0 or more"))
		}
		req.Task = &o.task
		return req, nil
	case o.asSubmitted:
		req.AsSubmitted = true
		return req, nil
	case o.all:
		s := selection.All()
		req.Selection = &s
		return req, nil
	case o.none:
		s := selection.None()
		req.Selection = &s
		return req, nil
	case !filters:
		return control.Request{Op: control.OpSelection}, nil
	}
	s := selection.All()
	if s.Partitions, err = ids(o.partitions); err != nil {
		return req, flagError("partitions", err)
	}
	if s.Stages, err = ids(o.stages); err != nil {
		return req, flagError("stages", err)
	}
	if set["executor-ids"] {
		if s.Executors, err = executorIDs(o.execs); err != nil {
			return req, flagError("executor-ids", err)
		}
	}
	s.SampleRate = o.sampleRate
	if err := s.Validate(); err != nil {
		name := "sample-rate"
		if strings.Contains(err.Error(), "executor") {
			name = "executor-ids"
		}
		return req, flagError(name, err)
	}
	req.Selection = &s
	return req, nil
}

// ids parses --partitions and --stages as the wrapper's flags do.
func ids(text string) ([]int64, error) {
	l, err := workerwrap.ParseIDs(text)
	if err != nil || l == nil {
		return nil, err
	}
	out := make([]int64, len(l))
	for i, v := range l {
		out[i] = int64(v)
	}
	return out, nil
}

// executorIDs parses --executor-ids: "" or none for none, all or * for all.
func executorIDs(text string) ([]string, error) {
	text = strings.TrimSpace(text)
	switch text {
	case "all", "*":
		return nil, nil
	case "", "none":
		return []string{}, nil
	}
	out := []string{}
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

func selectRun(c *cmdSpec, o *selectOptions, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (select takes only flags)", args)
	}
	req, err := selectionOf(c, o)
	if err != nil {
		return err
	}
	ans, err := callControl(o.ide, o.control, req)
	if err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(stdout, map[string]any{"selection": ans.Selection, "asSubmitted": ans.AsSubmitted, "sent": ans.Sent})
	}
	what := "as each worker was submitted"
	if ans.Selection != nil {
		what = ans.Selection.String()
	}
	if req.Task != nil {
		fmt.Fprintf(stdout, "task %d stops at its next exception (held now or to come); selection: %s\n", *req.Task, what)
		return nil
	}
	if req.Op == control.OpSelection {
		fmt.Fprintf(stdout, "selection: %s\n", what)
		return nil
	}
	fmt.Fprintf(stdout, "selection: %s (sent to %d %s; tasks that start from now on decide on it)\n", what, ans.Sent, plural(ans.Sent, "worker", "workers"))
	return nil
}

type workersOptions struct {
	ide, control string
	asJSON       bool
}

func newWorkersCmd(stderr io.Writer) *cmdSpec {
	o := &workersOptions{}
	c := &cmdSpec{fs: newFlagSet("workers", stderr)}
	defAddr(c.fs, &o.ide, "ide", defaultIDEAddr, "workers finds the proxy's control socket from it")
	defString(c.fs, &o.control, "control", "", "")
	defBool(c.fs, &o.asJSON, "json", "")
	c.usage(stderr, "usage: sparkdap workers [--ide HOST:PORT | --control PATH] [--json]\n\n"+
		"Lists every Python worker that follows the running 'sparkdap serve': executor, host, pid, its current\n"+
		"task (or its last one, when idle), whether that task is selected, running, idle or stopped at file:line,\n"+
		"for how long, and how many tasks it ran; stopped workers first. The last 1,000 workers that went away\n"+
		"follow, finished (or failed, when their last task raised an exception the proxy saw).\n\n"+
		"Examples:\n  sparkdap workers\n  sparkdap workers --json\n\nFlags:\n")
	c.run = func(args []string, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected arguments %q (workers takes only flags)", args)
		}
		ans, err := callControl(o.ide, o.control, control.Request{Op: control.OpKnownWorkers})
		if err != nil {
			return err
		}
		if o.asJSON {
			ex := ans.Exceptions
			if ex == nil {
				ex = []selection.ExceptionGroup{}
			}
			return printJSON(stdout, map[string]any{"workers": nonNil(ans.Known), "exceptions": ex})
		}
		printWorkers(stdout, ans.Known, time.Now())
		for _, g := range ans.Exceptions {
			fmt.Fprintln(stdout, exceptionLine(g))
		}
		return nil
	}
	return c
}

func nonNil(ws []control.KnownWorker) []control.KnownWorker {
	if ws == nil {
		return []control.KnownWorker{}
	}
	return ws
}

// printWorkers prints one line per worker.
func printWorkers(w io.Writer, ws []control.KnownWorker, now time.Time) {
	if len(ws) == 0 {
		fmt.Fprintln(w, "no worker follows this proxy yet: workers appear when they start their first task")
		return
	}
	fmt.Fprintf(w, "%-10s %-20s %8s  %-46s %-8s %-28s %8s %6s %8s\n", "EXECUTOR", "HOST", "PID", "TASK", "SELECTED", "STATE", "FOR", "TASKS", "OUTPUT")
	for _, k := range ws {
		task := "-"
		if k.Task != nil {
			task = fmt.Sprintf("%s · task %d", k.Task.Label(), k.Task.TaskAttemptID)
		}
		state := "idle"
		switch {
		case k.Stopped != nil:
			state = fmt.Sprintf("stopped at %s:%d", shortPath(k.Stopped.File), k.Stopped.Line)
		case k.State == control.StateFailed && k.Exception != "":
			state = "failed: " + k.Exception
		case k.State == control.StateFinished || k.State == control.StateFailed:
			// The process is gone: FOR is since it went.
			state = k.State
		case k.Running:
			state = "running"
		}
		sel := "no"
		if k.Selected {
			sel = "yes"
		}
		since := "-"
		if !k.Since.IsZero() {
			since = now.Sub(k.Since).Round(time.Second).String()
		}
		exec := k.ExecutorID
		if exec == "" {
			exec = "-"
		}
		output := "-"
		if k.OutputBytes != nil {
			output = byteCount(*k.OutputBytes)
		}
		fmt.Fprintf(w, "%-10s %-20s %8d  %-46s %-8s %-28s %8s %6d %8s\n", exec, k.Host, k.PID, task, sel, state, since, k.Tasks, output)
	}
}

// exceptionLine says an exception group: "37 tasks raised KeyError at
// udf.py:12 (1 waiting)".
func exceptionLine(g selection.ExceptionGroup) string {
	line := fmt.Sprintf("%d %s raised %s at %s", g.Tasks, plural(int(g.Tasks), "task", "tasks"), g.Type, g.Place)
	if g.Held > 0 {
		line += fmt.Sprintf(" (%d waiting: sparkdap select --task ID stops in one)", g.Held)
	}
	return line
}

// byteCount is n bytes for people: 512 B, 3.1 KiB, 20.0 MiB.
func byteCount(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// shortPath is a file's last two path elements.
func shortPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return p
	}
	if j := strings.LastIndexByte(p[:i], '/'); j >= 0 {
		return p[j+1:]
	}
	return p
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// callControl makes one request to the proxy's control socket, found from
// --control or else --ide, with errors that say what to do.
func callControl(ide, path string, req control.Request) (control.Answer, error) {
	o := &captureOptions{ide: ide, control: path}
	if path == "" {
		path = control.PathFor(ide)
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	ans, err := control.Call(ctx, path, req)
	if err != nil {
		var ce *control.Error
		if errors.As(err, &ce) && ce.Code == control.CodeBadRequest {
			return ans, errors.New(ce.Message)
		}
		return ans, captureError(o, path, err)
	}
	return ans, nil
}
