package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Steerer is a Backend that steers workers: the view's buttons, and
// OpContinue, OpPause, OpDetach and OpContinueAll. A Backend that is none
// answers them CodeUnsupported. Its methods are called as Backend's are
// (a goroutine per request, no lock held) and name a worker as the lists
// do (StoppedWorker.Executor). Their errors are classed by the Err*
// errors of this package (errors.Is): ErrUnknownExecutor,
// ErrNotStopped (Continue of a worker that is not stopped),
// ErrUnsupported (a front end that cannot do that one), CodeFailed when
// none.
type Steerer interface {
	// Continue resumes the stopped worker, all its threads, and tells
	// the IDE, as the IDE's own continue would.
	Continue(ctx context.Context, executor uint64) error
	// Pause pauses the worker, all its threads: the IDE sees it stop.
	Pause(ctx context.Context, executor uint64) error
	// Detach lets the worker run on undebugged: its breakpoints are
	// removed, it is resumed and not shown again.
	Detach(ctx context.Context, executor uint64) error
	// ContinueAll resumes every stopped worker and says how many.
	ContinueAll(ctx context.Context) (int, error)
}

// opArgs are the arguments each operation takes (a Request field's JSON
// name); needsExecutor those that need Request.Executor.
var (
	opArgs = map[string][]string{
		OpWorkers:      {},
		OpCapture:      {"executor", "frame", "maxBytes"},
		OpSelect:       {"selection", "asSubmitted", "task"},
		OpSelection:    {},
		OpKnownWorkers: {"maxRows"},
		OpContinue:     {"executor"},
		OpPause:        {"executor"},
		OpDetach:       {"executor"},
		OpContinueAll:  {},
	}
	needsExecutor = map[string]bool{OpCapture: true, OpContinue: true, OpPause: true, OpDetach: true}
	// ops lists the operations in the order an unknown op's refusal
	// names them.
	ops = []string{OpWorkers, OpCapture, OpSelect, OpSelection, OpKnownWorkers, OpContinue, OpPause, OpDetach, OpContinueAll}
)

// checkArgs says what is wrong with req's operation and arguments, ""
// if nothing: an unknown op, an argument the op does not take (each op
// refuses the others, so a client's mistake is named rather than
// ignored), a missing executor, maxRows out of range.
func checkArgs(req Request) string {
	takes, ok := opArgs[req.Op]
	if !ok {
		quoted := make([]string, len(ops))
		for i, op := range ops {
			quoted[i] = fmt.Sprintf("%q", op)
		}
		return fmt.Sprintf("unknown op %q: want one of %s", req.Op, strings.Join(quoted, ", "))
	}
	var extra []string
	for _, a := range []struct {
		name  string
		given bool
	}{
		{"executor", req.Executor != 0}, {"frame", req.Frame != nil}, {"maxBytes", req.MaxBytes != 0},
		{"selection", req.Selection != nil}, {"asSubmitted", req.AsSubmitted}, {"task", req.Task != nil},
		{"maxRows", req.MaxRows != 0},
	} {
		if a.given && !slices.Contains(takes, a.name) {
			extra = append(extra, a.name)
		}
	}
	switch {
	case len(extra) > 0:
		return fmt.Sprintf("%s takes no %s", req.Op, strings.Join(extra, ", "))
	case needsExecutor[req.Op] && req.Executor == 0:
		return req.Op + " needs an executor"
	case req.MaxRows < 0 || req.MaxRows > MaxKnownRows:
		return fmt.Sprintf("maxRows %d: want 1 to %d (0 or none: every row)", req.MaxRows, MaxKnownRows)
	}
	return ""
}

// answerSteer answers OpContinue, OpPause, OpDetach and OpContinueAll,
// their arguments checked, through b's Steerer.
func answerSteer(ctx context.Context, b Backend, req Request) Answer {
	st, ok := b.(Steerer)
	if !ok {
		return Answer{Error: fmt.Sprintf("%s: %v", req.Op, ErrUnsupported), Code: CodeUnsupported}
	}
	var err error
	var ans Answer
	switch req.Op {
	case OpContinue:
		err = st.Continue(ctx, req.Executor)
	case OpPause:
		err = st.Pause(ctx, req.Executor)
	case OpDetach:
		err = st.Detach(ctx, req.Executor)
	case OpContinueAll:
		ans.Sent, err = st.ContinueAll(ctx)
	}
	if err != nil {
		return Answer{Error: err.Error(), Code: code(err)}
	}
	return ans
}
