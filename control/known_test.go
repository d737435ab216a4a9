package control

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/buildinfo"
	"github.com/sparkdap/sparkdap/selection"
)

func task(stage, partition, id int64) *selection.Task {
	return &selection.Task{Stage: stage, Partition: partition, TaskAttemptID: id}
}

// Each worker's state comes from where it stands: stopped in the
// debugger, running a task, between tasks, or gone; a worker whose last
// task raised has failed once that task ended, and names the exception.
func TestRowStates(t *testing.T) {
	raised := map[int64]string{70: "KeyError"}
	for _, tc := range []struct {
		name      string
		row       KnownWorker
		gone      bool
		state     string
		exception string
	}{
		{"running", KnownWorker{Worker: selection.Worker{Running: true, Task: task(1, 2, 3)}}, false, StateRunning, ""},
		{"idle", KnownWorker{Worker: selection.Worker{Task: task(1, 2, 3)}}, false, StateIdle, ""},
		{"idle before any task", KnownWorker{}, false, StateIdle, ""},
		{"stopped", KnownWorker{Worker: selection.Worker{Running: true}, Stopped: &WorkerFrame{}}, false, StateStopped, ""},
		{"stopped at an exception", KnownWorker{Worker: selection.Worker{Running: true, Task: task(1, 2, 70)}, Stopped: &WorkerFrame{}, Exception: "ValueError"},
			false, StateStopped, "ValueError"},
		{"running its task that raised (held)", KnownWorker{Worker: selection.Worker{Running: true, Task: task(1, 2, 70)}}, false, StateRunning, "KeyError"},
		{"idle after its task raised", KnownWorker{Worker: selection.Worker{Task: task(1, 2, 70)}}, false, StateFailed, "KeyError"},
		{"gone", KnownWorker{Worker: selection.Worker{Task: task(1, 2, 3)}}, true, StateFinished, ""},
		{"gone while running", KnownWorker{Worker: selection.Worker{Running: true, Task: task(1, 2, 3)}}, true, StateFinished, ""},
		{"gone after its task raised", KnownWorker{Worker: selection.Worker{Task: task(1, 2, 70)}}, true, StateFailed, "KeyError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withState(tc.row, tc.gone, raised)
			if got.State != tc.state || got.Exception != tc.exception {
				t.Errorf("state %q, exception %q; want %q, %q", got.State, got.Exception, tc.state, tc.exception)
			}
		})
	}
}

// Rows come stopped first, then running, idle, failed and finished; in
// each, by executor id (as a number, names after), stage and partition.
func TestRowOrder(t *testing.T) {
	row := func(pid int64, state, exec string, tk *selection.Task) KnownWorker {
		return KnownWorker{Worker: selection.Worker{PID: pid, ExecutorID: exec, Task: tk}, State: state}
	}
	want := []KnownWorker{
		row(1, StateStopped, "2", task(9, 9, 1)),
		row(2, StateStopped, "10", task(0, 0, 2)),
		row(3, StateRunning, "1", task(1, 3, 3)),
		row(4, StateRunning, "1", task(2, 0, 4)),
		row(5, StateRunning, "1", task(2, 1, 5)),
		row(6, StateRunning, "driver", task(0, 0, 6)),
		row(7, StateIdle, "1", task(0, 0, 7)),
		row(8, StateIdle, "1", nil),
		row(9, StateFailed, "3", task(0, 0, 9)),
		row(10, StateFinished, "1", task(0, 5, 10)),
		row(11, StateFinished, "", task(0, 0, 11)),
	}
	got := make([]KnownWorker, len(want))
	for i, j := range []int{10, 3, 8, 0, 6, 9, 5, 1, 7, 2, 4} {
		got[i] = want[j]
	}
	sortRows(got)
	for i := range want {
		if got[i].PID != want[i].PID {
			var pids []int64
			for _, r := range got {
				pids = append(pids, r.PID)
			}
			t.Fatalf("order by pid %v, want 1 to 11", pids)
		}
	}
}

// finishWorker serves a worker's watch on the Board until its reports
// end: the worker came, ran its tasks, and went.
func finishWorker(t *testing.T, b *selection.Board, pid int64, reports string) {
	t.Helper()
	wa, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{ExecutorID: "1", Host: "h", PID: pid}, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := wa.Serve(bufio.NewReader(strings.NewReader(reports)), func([]byte) {}); err != nil {
		t.Fatal(err)
	}
}

// known-workers lists live, stopped and finished workers with their
// state; counts them all; keeps at most maxRows rows, those that need the
// user first, and says how many it left out; and says the selection.
func TestKnownWorkersBoundedAndCounted(t *testing.T) {
	b := &fakeBackend{workers: []StoppedWorker{
		{Executor: 5, Host: "h", PID: 2, Top: 0, Frames: []WorkerFrame{{Name: "f", File: "/udf.py", Line: 12}}, Exception: "ZeroDivisionError"},
	}}
	board := b.Board()
	for pid := int64(1); pid <= 4; pid++ { // idle: admitted, no report yet
		if _, err := board.Admit(admission.Hello{TaskInfo: admission.TaskInfo{ExecutorID: "1", Host: "h", PID: pid}}); err != nil {
			t.Fatal(err)
		}
	}
	line := func(partition, id int64) string {
		return fmt.Sprintf(`SPARKDAP/2 TASK {"stageId":1,"partitionId":%d,"attemptNumber":0,"taskAttemptId":%d,"selected":false}`+"\n", partition, id)
	}
	finishWorker(t, board, 20, line(3, 30))
	finishWorker(t, board, 21, line(4, 31))
	board.Raised("KeyError", "udf.py:9", 31)

	all := answer(context.Background(), b, Request{Op: OpKnownWorkers})
	wantCounts := Counts{Workers: 6, Stopped: 1, Idle: 3, Finished: 1, Failed: 1}
	if all.Error != "" || all.Counts == nil || *all.Counts != wantCounts || all.More != 0 || len(all.Known) != 6 {
		t.Fatalf("every row: %+v (counts %+v), want counts %+v", all, all.Counts, wantCounts)
	}
	var states []string
	for _, k := range all.Known {
		states = append(states, fmt.Sprintf("%d:%s", k.PID, k.State))
	}
	if got := strings.Join(states, " "); got != "2:stopped 1:idle 3:idle 4:idle 21:failed 20:finished" {
		t.Errorf("rows %s", got)
	}
	if k := all.Known[0]; k.Exception != "ZeroDivisionError" || k.Executor != 5 {
		t.Errorf("stopped row %+v", k)
	}
	if k := all.Known[4]; k.Exception != "KeyError" || k.Task == nil || k.Task.TaskAttemptID != 31 {
		t.Errorf("failed row %+v", k)
	}
	if !all.AsSubmitted || all.Selection != nil {
		t.Errorf("selection %v, asSubmitted %v; want as submitted", all.Selection, all.AsSubmitted)
	}

	none := selection.None()
	if _, err := board.Set(&none); err != nil {
		t.Fatal(err)
	}
	two := answer(context.Background(), b, Request{Op: OpKnownWorkers, MaxRows: 2})
	if len(two.Known) != 2 || two.More != 4 || *two.Counts != wantCounts || two.Known[0].PID != 2 || two.Known[1].PID != 1 {
		t.Fatalf("two rows: %+v", two)
	}
	if two.AsSubmitted || two.Selection == nil || two.Selection.String() != none.String() {
		t.Errorf("selection %v, asSubmitted %v; want none", two.Selection, two.AsSubmitted)
	}
	raw, _ := json.Marshal(two)
	for _, key := range []string{`"state":"stopped"`, `"more":4`, `"counts":{"workers":6,"running":0,"stopped":1,"idle":3,"finished":1,"failed":1}`, `"exception":"ZeroDivisionError"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("answer %s lacks %s", raw, key)
		}
	}
}

type sessionBackend struct {
	*fakeBackend
	ids map[WorkerID]uint64
}

func (s sessionBackend) Sessions() map[WorkerID]uint64 { return s.ids }

// A live worker whose debugger is connected is named by its session, so
// it can be paused or detached; a finished one of the same host and pid
// is another process and is not.
func TestKnownWorkersNameSessions(t *testing.T) {
	b := sessionBackend{&fakeBackend{}, map[WorkerID]uint64{{"h", 1}: 8}}
	finishWorker(t, b.Board(), 1, "")
	if _, err := b.Board().Admit(admission.Hello{TaskInfo: admission.TaskInfo{Host: "h", PID: 1}}); err != nil {
		t.Fatal(err)
	}
	ans := answer(context.Background(), b, Request{Op: OpKnownWorkers})
	if len(ans.Known) != 2 || ans.Known[0].State != StateIdle || ans.Known[0].Executor != 8 || ans.Known[1].State != StateFinished || ans.Known[1].Executor != 0 {
		t.Errorf("rows %+v", ans.Known)
	}
}

// known-workers says serve's own sparkdap version and, in each row, the
// version of the wrapper the worker runs, as its watch hello said: live
// and finished workers alike, "" (left out of the JSON) for a wrapper
// that said none. A stopped worker without a watch is marked unwatched:
// its version is unknown, not empty.
func TestKnownWorkersSayVersions(t *testing.T) {
	b := &fakeBackend{workers: []StoppedWorker{{Executor: 5, Host: "h", PID: 9, Top: -1}}}
	board := b.Board()
	for _, w := range []struct {
		pid     int64
		version string
	}{{1, buildinfo.Version}, {2, "0.1.0"}, {3, ""}} {
		if _, err := board.Admit(admission.Hello{TaskInfo: admission.TaskInfo{ExecutorID: "1", Host: "h", PID: w.pid}, Watch: true, SparkdapVersion: w.version}); err != nil {
			t.Fatal(err)
		}
	}
	wa, err := board.Admit(admission.Hello{TaskInfo: admission.TaskInfo{ExecutorID: "2", Host: "h", PID: 4}, Watch: true, SparkdapVersion: "0.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := wa.Serve(bufio.NewReader(strings.NewReader("")), func([]byte) {}); err != nil {
		t.Fatal(err)
	}

	ans, err := Ask(context.Background(), b, Request{Op: OpKnownWorkers})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Version != buildinfo.Version {
		t.Errorf("serve's version %q, want %q", ans.Version, buildinfo.Version)
	}
	got := map[int64]string{}
	for _, k := range ans.Known {
		got[k.PID] = k.SparkdapVersion
		if k.Unwatched != (k.PID == 9) {
			t.Errorf("pid %d: unwatched %v", k.PID, k.Unwatched)
		}
	}
	want := map[int64]string{1: buildinfo.Version, 2: "0.1.0", 3: "", 4: "0.2.0", 9: ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("versions by pid %v, want %v", got, want)
	}
	raw, _ := json.Marshal(ans)
	for _, key := range []string{`"version":"` + buildinfo.Version + `"`, `"sparkdapVersion":"0.1.0"`, `"sparkdapVersion":"0.2.0"`, `"unwatched":true`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("answer %s lacks %s", raw, key)
		}
	}

	// The other operations do not say it: only known-workers lists workers.
	if sel, _ := Ask(context.Background(), b, Request{Op: OpSelection}); sel.Version != "" {
		t.Errorf("selection's answer says version %q", sel.Version)
	}
}
