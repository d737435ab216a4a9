package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/selection"
)

// steeringBackend is a fakeBackend that steers: it records each call and
// answers with err.
type steeringBackend struct {
	*fakeBackend
	calls []string
	err   error
	all   int
}

func (s *steeringBackend) Continue(_ context.Context, executor uint64) error {
	s.calls = append(s.calls, fmt.Sprintf("continue %d", executor))
	return s.err
}

func (s *steeringBackend) Pause(_ context.Context, executor uint64) error {
	s.calls = append(s.calls, fmt.Sprintf("pause %d", executor))
	return s.err
}

func (s *steeringBackend) Detach(_ context.Context, executor uint64) error {
	s.calls = append(s.calls, fmt.Sprintf("detach %d", executor))
	return s.err
}

func (s *steeringBackend) ContinueAll(context.Context) (int, error) {
	s.calls = append(s.calls, "continue-all")
	return s.all, s.err
}

// Each operation takes its own arguments and refuses the others, as a
// bad request that names them and reaches no Backend method; the ops
// that name a worker need one, and maxRows is bounded.
func TestOpArguments(t *testing.T) {
	b := &steeringBackend{fakeBackend: &fakeBackend{capture: func(uint64, *int, int64) (CaptureResult, error) {
		t.Error("a bad request reached the backend")
		return CaptureResult{}, nil
	}}}
	zero, task := 0, int64(3)
	sel := selection.All()
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Op: OpContinue}, "continue needs an executor"},
		{Request{Op: OpPause}, "pause needs an executor"},
		{Request{Op: OpDetach}, "detach needs an executor"},
		{Request{Op: OpContinue, Executor: 1, Frame: &zero}, "continue takes no frame"},
		{Request{Op: OpPause, Executor: 1, MaxRows: 5}, "pause takes no maxRows"},
		{Request{Op: OpDetach, Executor: 1, Selection: &sel}, "detach takes no selection"},
		{Request{Op: OpContinueAll, Executor: 1}, "continue-all takes no executor"},
		{Request{Op: OpContinueAll, AsSubmitted: true, Task: &task}, "continue-all takes no asSubmitted, task"},
		{Request{Op: OpKnownWorkers, Executor: 1}, "known-workers takes no executor"},
		{Request{Op: OpKnownWorkers, MaxRows: -1}, "maxRows -1: want 1 to 5000 (0 or none: every row)"},
		{Request{Op: OpKnownWorkers, MaxRows: MaxKnownRows + 1}, "maxRows 5001: want 1 to 5000 (0 or none: every row)"},
		{Request{Op: OpWorkers, MaxRows: 3}, "workers takes no maxRows"},
		{Request{Op: OpSelection, MaxRows: 3}, "selection takes no maxRows"},
		{Request{Op: OpSelect, AsSubmitted: true, MaxRows: 3}, "select takes no maxRows"},
		{Request{Op: OpCapture, Executor: 1, MaxRows: 3}, "capture takes no maxRows"},
		{Request{Op: OpCapture, Executor: 1, Task: &task}, "capture takes no task"},
		{Request{Op: "resume"}, `unknown op "resume": want one of "workers", "capture", "select", "selection", "known-workers", "continue", "pause", "detach", "continue-all"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			ans, err := Ask(context.Background(), b, tc.req)
			if !errors.Is(err, ErrBadRequest) || ans.Code != CodeBadRequest || ans.Error != tc.want {
				t.Errorf("%+v: %+v, %v; want a bad request %q", tc.req, ans, err, tc.want)
			}
		})
	}
	if len(b.calls) != 0 {
		t.Errorf("bad requests reached the backend: %v", b.calls)
	}
	for _, ok := range []Request{{Op: OpKnownWorkers, MaxRows: 1}, {Op: OpKnownWorkers, MaxRows: MaxKnownRows}, {Op: OpKnownWorkers}} {
		if ans := answer(context.Background(), b, ok); ans.Error != "" {
			t.Errorf("%+v: %s", ok, ans.Error)
		}
	}
}

// The steering ops reach a Steerer through the socket, with the worker
// they name; its errors come back with their class's code, and
// continue-all says how many it resumed.
func TestSteerOps(t *testing.T) {
	b := &steeringBackend{fakeBackend: &fakeBackend{}, all: 3}
	path := serve(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, req := range []Request{{Op: OpContinue, Executor: 4}, {Op: OpPause, Executor: 5}, {Op: OpDetach, Executor: 6}} {
		if ans, err := Call(ctx, path, req); err != nil || ans.Error != "" {
			t.Fatalf("%+v: %+v, %v", req, ans, err)
		}
	}
	ans, err := Call(ctx, path, Request{Op: OpContinueAll})
	if err != nil || ans.Sent != 3 {
		t.Fatalf("continue-all: %+v, %v; want sent 3", ans, err)
	}
	if got := strings.Join(b.calls, ", "); got != "continue 4, pause 5, detach 6, continue-all" {
		t.Errorf("the backend got %s", got)
	}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("executor 4: %w", ErrUnknownExecutor), CodeUnknownExecutor},
		{fmt.Errorf("executor 4: %w", ErrNotStopped), CodeNotStopped},
		{fmt.Errorf("pause: %w: not here", ErrUnsupported), CodeUnsupported},
		{errors.New("executor 4: pause: no answer in time"), CodeFailed},
	} {
		b.err = tc.err
		for _, op := range []string{OpContinue, OpPause, OpDetach, OpContinueAll} {
			req := Request{Op: op, Executor: 4}
			if op == OpContinueAll {
				req.Executor = 0
			}
			_, err := Call(ctx, path, req)
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != tc.code || ce.Message != tc.err.Error() {
				t.Errorf("%s answering %v: %v, want code %s", op, tc.err, err, tc.code)
			}
		}
	}
}

// A front end that does not steer answers each steering op "unsupported".
func TestSteerUnsupported(t *testing.T) {
	b := &fakeBackend{}
	for _, req := range []Request{{Op: OpContinue, Executor: 1}, {Op: OpPause, Executor: 1}, {Op: OpDetach, Executor: 1}, {Op: OpContinueAll}} {
		ans, err := Ask(context.Background(), b, req)
		if err != nil || ans.Code != CodeUnsupported || !strings.Contains(ans.Error, req.Op+": not supported by this front end") {
			t.Errorf("%s: %+v, %v; want unsupported", req.Op, ans, err)
		}
	}
}
