package pycharm_test

import (
	"context"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/watchtest"
)

// The PyCharm front end serves a watch connection past the time a
// connection has to identify itself, pushes each new selection and lists
// the worker with its task.
func TestWatchFollowsSelection(t *testing.T) {
	defer pycharm.SetIdentifyTimeout(300 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, _ := startProxy(t, ctx, pycharm.Config{})
	f, err := watchtest.Dial(px.Addr().String(), "tok", admission.TaskInfo{ExecutorID: "1", Host: "node-1", PID: 77})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if sel, err := f.Next(5 * time.Second); err != nil || sel != nil {
		t.Fatalf("first selection %v, %v; want null", sel, err)
	}
	if err := f.Task(2, 5, 1, 88, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * 300 * time.Millisecond) // past the time to identify
	none := selection.None()
	if ans, err := control.Ask(ctx, px, control.Request{Op: control.OpSelect, Selection: &none}); err != nil || ans.Sent != 1 {
		t.Fatalf("select: %+v, %v", ans, err)
	}
	if sel, err := f.Next(5 * time.Second); err != nil || sel == nil || sel.Partitions == nil || len(sel.Partitions) != 0 {
		t.Fatalf("pushed %v, %v; want no partition", sel, err)
	}
	var ws []control.KnownWorker
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ans, _ := control.Ask(ctx, px, control.Request{Op: control.OpKnownWorkers})
		if ws = ans.Known; len(ws) == 1 && ws[0].PID == 77 && ws[0].Task != nil && ws[0].Task.Partition == 5 && ws[0].Selected {
			return
		}
	}
	t.Fatalf("workers: %+v", ws)
}
