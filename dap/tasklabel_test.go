package dap

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/nvimdapclient"
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
