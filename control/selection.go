package control

import (
	"context"
	"errors"

	"github.com/sparkdap/sparkdap/internal/buildinfo"
	"github.com/sparkdap/sparkdap/selection"
)

// answerSelection answers OpSelect, OpSelection and OpKnownWorkers from
// b's Board, the same for every front end. Their arguments are checked
// (checkArgs).
func answerSelection(ctx context.Context, b Backend, req Request) Answer {
	board := b.Board()
	switch req.Op {
	case OpSelect:
		given := 0
		for _, g := range []bool{req.Selection != nil, req.AsSubmitted, req.Task != nil} {
			if g {
				given++
			}
		}
		if given != 1 {
			return Answer{Error: OpSelect + " needs one of a selection, asSubmitted or a task", Code: CodeBadRequest}
		}
		if req.Task != nil {
			if *req.Task < 0 {
				return Answer{Error: "a task attempt id is not negative", Code: CodeBadRequest}
			}
			board.WantTask(*req.Task)
			cur := board.Current()
			return Answer{Selection: cur, AsSubmitted: cur == nil}
		}
		n, err := board.Set(req.Selection)
		if err != nil {
			code := CodeFailed
			if errors.Is(err, selection.ErrBadSelection) {
				code = CodeBadRequest
			}
			return Answer{Error: err.Error(), Code: code}
		}
		cur := board.Current()
		return Answer{Selection: cur, AsSubmitted: cur == nil, Sent: n}
	case OpSelection:
		cur := board.Current()
		return Answer{Selection: cur, AsSubmitted: cur == nil}
	}
	// What the front end knows of the workers whose debugger is
	// connected: live ones only, as a gone worker's host and pid may be
	// another process's now.
	var out map[WorkerID]int64
	if oc, ok := b.(OutputCounter); ok {
		out = oc.OutputBytes()
	}
	var ids map[WorkerID]uint64
	if sl, ok := b.(SessionLister); ok {
		ids = sl.Sessions()
	}
	live := func(kw *KnownWorker) {
		id := WorkerID{kw.Host, kw.PID}
		if n, ok := out[id]; ok {
			kw.OutputBytes = &n
		}
		if e, ok := ids[id]; ok && kw.Executor == 0 {
			kw.Executor = e
		}
	}
	known := knownWorkers(board.Workers(), board.Finished(), b.StoppedWorkers(ctx), board.TaskExceptions(), live)
	counts := countStates(known)
	sortRows(known)
	ans := Answer{Counts: &counts, Exceptions: board.Groups()}
	if req.MaxRows > 0 && len(known) > req.MaxRows {
		ans.More = len(known) - req.MaxRows
		known = known[:req.MaxRows:req.MaxRows]
	}
	ans.Known = known
	ans.Selection = board.Current()
	ans.AsSubmitted = ans.Selection == nil
	// This package runs in serve's process, so its build is serve's.
	ans.Version = buildinfo.Version
	return ans
}
