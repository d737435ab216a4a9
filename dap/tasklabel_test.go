package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/nvimdapclient"
	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
	"github.com/sparkdap/sparkdap/testkit/watchtest"
)

const taskFile = "/w/job.py"

func taskEvent(f *fakePydevd, pid int, stage, partition int) {
	f.event("sparkdapTask", map[string]any{"executorId": "1", "host": "worker-1", "pid": pid,
		"stageId": stage, "partitionId": partition,
		"label": "stage " + itoa(int64(stage)) + " · partition " + itoa(int64(partition))})
}

// TestNvimDapThreadNameFollowsTask: a reused worker stops in one task,
// runs on and stops in a task of a later stage. nvim-dap reads thread
// names only for a thread id it does not know (or a table a thread event
// made stale), so unless the proxy tells it, the name it holds at the
// second stop still names the first task.
func TestNvimDapThreadNameFollowsTask(t *testing.T) {
	p := startProxy(t, nil)
	root := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, taskFile, 5)
		return err
	})
	nv := nvimdapclient.New(root, 1, "sparkdap")
	const pid = 900
	f := p.executor(pid, nil)
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	for i, stage := range []int{3, 6} {
		taskEvent(f, pid, stage, i)
		want := "stage " + itoa(int64(stage)) + " · partition " + itoa(int64(i))
		waitFor(t, "task label", func() (bool, string) {
			ex := p.hub.Executors()
			return len(ex) == 1 && strings.Contains(ex[0].Label, want), jsonText(ex)
		})
		if !f.hit(taskFile, 5) {
			t.Fatal("the worker did not stop at its breakpoint")
		}
		st, err := root.StoppedEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := nv.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		th, ok := nv.StoppedThread()
		if !ok || !strings.Contains(th.Name, want) {
			t.Errorf("stop %d: nvim-dap holds thread %d as %q, want a name with %q", i+1, st.ThreadId, th.Name, want)
		}
		if err := root.Continue(ctx, st.ThreadId); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "resumed", func() (bool, string) {
			susp, _ := f.state()
			return !susp, "still suspended"
		})
	}
}

// threeTasks are the tasks of three workers stopped at once.
var threeTasks = []struct{ pid, stage, partition int }{{910, 3, 0}, {911, 3, 1}, {912, 6, 0}}

func taskWanted(stage, partition int) []string {
	return []string{fmt.Sprintf("stage %d", stage), fmt.Sprintf("partition %d", partition)}
}

// missing is the first of want that s lacks, or "".
func missing(s string, want []string) string {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return w
		}
	}
	return ""
}

// TestVSCodeShowsTheTaskOfEachStop: three workers stop at once, each in
// its child session. VS Code's CALL STACK shows each session's name (cut
// at its end) with the stop's text, or else its description, beside it,
// and no thread row for a one-thread session: that label must name the
// stage and partition, and the three must differ.
func TestVSCodeShowsTheTaskOfEachStop(t *testing.T) {
	p := startProxy(t, nil)
	ide := vscodeclient.New(vscodeclient.Options{Workspace: "/w"})
	t.Cleanup(ide.Close)
	ide.SetBreakpoints(taskFile, 5)
	host, port, _ := net.SplitHostPort(p.srv.IDEAddr().String())
	if _, err := ide.Attach(p.ctx, map[string]any{"name": "sparkdap", "type": "debugpy", "request": "attach",
		"connect": map[string]any{"host": host, "port": port}}); err != nil {
		t.Fatal(err)
	}
	var fakes []*fakePydevd
	for _, w := range threeTasks {
		f := p.executor(w.pid, nil)
		taskEvent(f, w.pid, w.stage, w.partition)
		fakes = append(fakes, f)
	}
	for i, f := range fakes {
		waitFor(t, "breakpoint armed", func() (bool, string) {
			_, armed := f.state()
			return strings.Contains(armed, taskFile), armed
		})
		if !f.hit(taskFile, 5) {
			t.Fatalf("worker %d did not stop", threeTasks[i].pid)
		}
	}
	for range threeTasks {
		nextChild(t, ide) // listed at its stop
	}
	labels := map[string]bool{}
	for range threeTasks {
		st := nextVSCodeStop(t, ide)
		label := st.Event.Text
		if label == "" {
			label = st.Event.Description
		}
		var w = threeTasks[0]
		for _, tw := range threeTasks {
			if strings.Contains(st.Session.Name, fmt.Sprintf("pid %d", tw.pid)) {
				w = tw
			}
		}
		if m := missing(label, taskWanted(w.stage, w.partition)); m != "" {
			t.Errorf("session %q shows the stop as %q: no %q", st.Session.Name, label, m)
		}
		if m := missing(st.Thread, taskWanted(w.stage, w.partition)); m != "" {
			t.Errorf("session %q names its thread %q: no %q", st.Session.Name, st.Thread, m)
		}
		labels[label] = true
	}
	if len(labels) != len(threeTasks) {
		t.Errorf("three stops in three tasks look alike in VS Code: %v", labels)
	}
}

// TestNvimDapShowsTheTaskOfEachStop: the same three stops in nvim-dap,
// one child session each. Its threads widget lists each session's thread
// names, which must name the stage and partition, and differ.
func TestNvimDapShowsTheTaskOfEachStop(t *testing.T) {
	p := startProxy(t, nil)
	root, children := p.childRoot(nil, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, taskFile, 5)
		return err
	})
	// nvim-dap sends the breakpoints to the root session too.
	if _, err := root.SetBreakpoints(p.ctx, taskFile, 5); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	names := map[string]bool{}
	for i, w := range threeTasks {
		f := p.executor(w.pid, nil)
		taskEvent(f, w.pid, w.stage, w.partition)
		waitFor(t, "task label", func() (bool, string) {
			for _, ex := range p.hub.Executors() {
				if ex.Process.PID == int64(w.pid) && strings.Contains(ex.Label, fmt.Sprintf("stage %d", w.stage)) {
					return true, ""
				}
			}
			return false, jsonText(p.hub.Executors())
		})
		waitFor(t, "breakpoint armed", func() (bool, string) {
			_, armed := f.state()
			return strings.Contains(armed, taskFile), armed
		})
		if !f.hit(taskFile, 5) {
			t.Fatalf("worker %d did not stop", w.pid)
		}
		child := p.nextChild(children) // listed at its stop
		var cfg struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(child.Config.Configuration, &cfg); err != nil {
			t.Fatal(err)
		}
		name := cfg.Name
		nv := nvimdapclient.New(child.Client, i+2, name)
		if _, err := child.Client.WaitEvent(ctx, "stopped", nil); err != nil {
			t.Fatal(err)
		}
		ths, err := nv.ThreadsWidget(ctx)
		if err != nil {
			t.Fatal(err)
		}
		th, _ := nv.StoppedThread()
		if m := missing(th.Name, taskWanted(w.stage, w.partition)); m != "" {
			t.Errorf("nvim-dap session %q: threads widget %v, stopped thread %q has no %q", nv.SessionsLine(), ths, th.Name, m)
		}
		if m := missing(nv.SessionsLine(), taskWanted(w.stage, w.partition)); m != "" {
			t.Errorf("nvim-dap's sessions widget shows %q: no %q", nv.SessionsLine(), m)
		}
		names[th.Name] = true
	}
	if len(names) != len(threeTasks) {
		t.Errorf("three stops in three tasks look alike in nvim-dap: %v", names)
	}
}

// TestNvimDapIdleWorkerSaysIdle: a worker that debugged a task stays
// connected when the task ends; its watch connection says it is idle, and
// nvim-dap's threads widget then names it idle with its last task, not as
// if that task still ran. A task it runs undebugged says so.
func TestNvimDapIdleWorkerSaysIdle(t *testing.T) {
	p := startProxy(t, nil)
	root := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, taskFile, 5)
		return err
	})
	nv := nvimdapclient.New(root, 1, "sparkdap")
	const pid = 920
	f := p.executor(pid, nil)
	taskEvent(f, pid, 1, 4)
	w, err := watchtest.Dial(p.srv.ExecutorAddr().String(), testToken, admission.TaskInfo{ExecutorID: "1", Host: "worker-1", PID: pid})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	widget := func(want string) {
		t.Helper()
		var names []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			threads, err := nv.ThreadsWidget(ctx)
			if err != nil {
				t.Fatal(err)
			}
			names = names[:0]
			for _, th := range threads {
				names = append(names, th.Name)
			}
			if len(names) == 1 && strings.Contains(names[0], want) {
				return
			}
		}
		t.Fatalf("nvim-dap's threads widget shows %q, want one thread naming %q", names, want)
	}
	_ = w.Task(1, 4, 0, 40, true)
	if !f.hit(taskFile, 5) {
		t.Fatal("the worker did not stop at its breakpoint")
	}
	st, err := root.StoppedEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	widget("stage 1 · partition 4")
	if err := root.Continue(ctx, st.ThreadId); err != nil {
		t.Fatal(err)
	}
	_ = w.Idle()
	widget("idle · last partition 4 · stage 1]")
	_ = w.Task(3, 7, 0, 71, false)
	widget("partition 7 · stage 3 · not debugged]")
	_ = w.Task(3, 8, 0, 72, true)
	taskEvent(f, pid, 3, 8)
	widget("stage 3 · partition 8]")
}

// TestStopDescriptionStartsWithTheTask: VS Code's CALL STACK shows a
// stopped session's row as the stop's text (or description) beside the
// session's name; at its default side bar width (300 px) only some 34
// characters of that text show and none of the name, so the task that
// tells workers apart comes first.
func TestStopDescriptionStartsWithTheTask(t *testing.T) {
	tests := []struct {
		name           string
		body           map[string]any
		wantDesc, text string
	}{
		{"a breakpoint", map[string]any{"reason": "breakpoint"}, "partition 7 · stage 3 · Paused on breakpoint", ""},
		{"pydevd's own description", map[string]any{"reason": "step", "description": "Paused on step"}, "partition 7 · stage 3 · Paused on step", ""},
		{"an exception", map[string]any{"reason": "exception", "description": "Paused on exception", "text": "KeyError"},
			"partition 7 · stage 3 · Paused on exception", "partition 7 · stage 3 · KeyError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &executorState{task: TaskInfo{Label: "partition 7 · stage 3"}}
			ev := Message{"body": tt.body}
			x.describeStop(ev)
			if got := tt.body["description"]; got != tt.wantDesc {
				t.Errorf("description %q, want %q", got, tt.wantDesc)
			}
			if got, _ := tt.body["text"].(string); got != tt.text {
				t.Errorf("text %q, want %q", got, tt.text)
			}
		})
	}
}
