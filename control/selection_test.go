package control

import (
	"context"
	"errors"
	"testing"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/selection"
)

func TestSelectRequests(t *testing.T) {
	b := &fakeBackend{}
	one := selection.Selection{Partitions: []int64{3}, SampleRate: 1}
	for _, tc := range []struct {
		name string
		req  Request
		code string
	}{
		{"select", Request{Op: OpSelect, Selection: &one}, ""},
		{"as submitted", Request{Op: OpSelect, AsSubmitted: true}, ""},
		{"neither", Request{Op: OpSelect}, CodeBadRequest},
		{"both", Request{Op: OpSelect, Selection: &one, AsSubmitted: true}, CodeBadRequest},
		{"bad rate", Request{Op: OpSelect, Selection: &selection.Selection{SampleRate: 2}}, CodeBadRequest},
		{"selection takes none", Request{Op: OpSelection, Selection: &one}, CodeBadRequest},
		{"known workers with executor", Request{Op: OpKnownWorkers, Executor: 1}, CodeBadRequest},
	} {
		ans := answer(context.Background(), b, tc.req)
		if ans.Code != tc.code {
			t.Errorf("%s: code %q (%s), want %q", tc.name, ans.Code, ans.Error, tc.code)
		}
	}
	if _, err := Ask(context.Background(), b, Request{Op: OpSelect}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Ask of a bad request: %v", err)
	}
	b.Board().Set(&one)
	if ans := answer(context.Background(), b, Request{Op: OpSelection}); ans.Selection == nil || ans.Selection.String() != one.String() || ans.AsSubmitted {
		t.Errorf("current selection: %+v", ans)
	}
}

// A worker is listed once, with where it is stopped when it is: the
// watching and the stopped workers are joined by host and pid, and a
// stopped worker that watches nothing is listed too.
func TestKnownWorkersJoinStops(t *testing.T) {
	b := &fakeBackend{workers: []StoppedWorker{
		{Executor: 5, Host: "h", PID: 2, Top: 1, Frames: []WorkerFrame{{Name: "wrap", File: "/w.py", Line: 1}, {Name: "f", File: "/udf.py", Line: 12}}},
		{Executor: 6, Host: "h", PID: 9, Top: -1},
	}}
	for _, pid := range []int64{1, 2} {
		if _, err := b.Board().Admit(admission.Hello{TaskInfo: admission.TaskInfo{Host: "h", PID: pid}}); err != nil {
			t.Fatal(err)
		}
	}
	ans := answer(context.Background(), b, Request{Op: OpKnownWorkers})
	if len(ans.Known) != 3 {
		t.Fatalf("listed %+v", ans.Known)
	}
	// Stopped workers first.
	if k := ans.Known[0]; k.PID != 2 || k.Stopped == nil || k.Stopped.File != "/udf.py" || k.Stopped.Line != 12 || k.Executor != 5 || k.State != StateStopped {
		t.Errorf("stopped worker: %+v", k)
	}
	if k := ans.Known[1]; k.PID != 9 || k.Stopped == nil || k.Executor != 6 || k.State != StateStopped {
		t.Errorf("stopped worker that watches nothing: %+v", k)
	}
	if k := ans.Known[2]; k.PID != 1 || k.Stopped != nil || k.State != StateIdle {
		t.Errorf("idle worker: %+v", k)
	}
}

type countingBackend struct {
	*fakeBackend
	out map[WorkerID]int64
}

func (c countingBackend) OutputBytes() map[WorkerID]int64 { return c.out }

// A front end that counts its workers' output has it listed with them;
// a worker it does not count has none.
func TestKnownWorkersOutput(t *testing.T) {
	b := countingBackend{&fakeBackend{}, map[WorkerID]int64{{"h", 1}: 2048}}
	for _, pid := range []int64{1, 2} {
		if _, err := b.Board().Admit(admission.Hello{TaskInfo: admission.TaskInfo{Host: "h", PID: pid}}); err != nil {
			t.Fatal(err)
		}
	}
	ans := answer(context.Background(), b, Request{Op: OpKnownWorkers})
	if len(ans.Known) != 2 || ans.Known[0].OutputBytes == nil || *ans.Known[0].OutputBytes != 2048 || ans.Known[1].OutputBytes != nil {
		t.Errorf("listed %+v", ans.Known)
	}
}
