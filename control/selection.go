package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/sparkdap/sparkdap/selection"
)

// answerSelection answers OpSelect, OpSelection and OpKnownWorkers from
// b's Board, the same for every front end.
func answerSelection(ctx context.Context, b Backend, req Request) Answer {
	if req.Executor != 0 || req.Frame != nil || req.MaxBytes != 0 {
		return Answer{Error: req.Op + " takes no executor, frame or maxBytes", Code: CodeBadRequest}
	}
	if req.Op != OpSelect && (req.Selection != nil || req.AsSubmitted || req.Task != nil) {
		return Answer{Error: req.Op + " takes no selection", Code: CodeBadRequest}
	}
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
	known := knownWorkers(board.Workers(), b.StoppedWorkers(ctx))
	if oc, ok := b.(OutputCounter); ok {
		out := oc.OutputBytes()
		for i := range known {
			if n, ok := out[WorkerID{known[i].Host, known[i].PID}]; ok {
				known[i].OutputBytes = &n
			}
		}
	}
	return Answer{Known: known, Exceptions: board.Groups()}
}

// knownWorkers joins the workers that follow the selection with the
// stopped ones, by host and pid; a stopped worker that does not follow
// it (a wrapper without live selection) is listed too.
func knownWorkers(watching []selection.Worker, stopped []StoppedWorker) []KnownWorker {
	type key struct {
		host string
		pid  int64
	}
	byKey := make(map[key]StoppedWorker, len(stopped))
	for _, s := range stopped {
		byKey[key{s.Host, s.PID}] = s
	}
	out := make([]KnownWorker, 0, len(watching)+len(stopped))
	for _, w := range watching {
		kw := KnownWorker{Worker: w}
		if s, ok := byKey[key{w.Host, w.PID}]; ok {
			kw.Stopped, kw.Executor = stopAt(s), s.Executor
			delete(byKey, key{w.Host, w.PID})
		}
		out = append(out, kw)
	}
	for _, s := range stopped {
		if _, ok := byKey[key{s.Host, s.PID}]; !ok {
			continue
		}
		out = append(out, KnownWorker{Worker: selection.Worker{Host: s.Host, PID: s.PID, Running: true, Selected: true},
			Stopped: stopAt(s), Executor: s.Executor})
	}
	return out
}

// stopAt is where a stopped worker stands: its innermost frame of user
// code, else its innermost frame, else an empty frame.
func stopAt(s StoppedWorker) *WorkerFrame {
	switch {
	case s.Top >= 0 && s.Top < len(s.Frames):
		f := s.Frames[s.Top]
		return &f
	case len(s.Frames) > 0:
		f := s.Frames[0]
		return &f
	}
	return &WorkerFrame{Name: fmt.Sprintf("thread %d", s.Thread)}
}
