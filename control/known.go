package control

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/sparkdap/sparkdap/selection"
)

// The rows of OpKnownWorkers: every worker the Board follows, joined with
// the stopped ones, and the workers that went away, each with its state;
// ordered so that a bounded answer (Request.MaxRows) keeps those that
// need the user first.

// knownWorkers joins the workers that follow the selection with the
// stopped ones, by host and pid; a stopped worker that does not follow
// it (a wrapper without live selection) is listed too. The finished
// workers follow, joined with nothing: their process is gone, and a
// worker of the same host and pid now is another process. raised names
// the exception of each task that raised, by task attempt id; live adds
// to each row of a live worker what the front end knows of it.
func knownWorkers(watching, finished []selection.Worker, stopped []StoppedWorker, raised map[int64]string, live func(*KnownWorker)) []KnownWorker {
	type key struct {
		host string
		pid  int64
	}
	byKey := make(map[key]StoppedWorker, len(stopped))
	for _, s := range stopped {
		byKey[key{s.Host, s.PID}] = s
	}
	out := make([]KnownWorker, 0, len(watching)+len(stopped)+len(finished))
	for _, w := range watching {
		kw := KnownWorker{Worker: w}
		if s, ok := byKey[key{w.Host, w.PID}]; ok {
			kw.Stopped, kw.Executor, kw.Exception = stopAt(s), s.Executor, s.Exception
			delete(byKey, key{w.Host, w.PID})
		}
		live(&kw)
		out = append(out, withState(kw, false, raised))
	}
	for _, s := range stopped {
		if _, ok := byKey[key{s.Host, s.PID}]; !ok {
			continue
		}
		kw := KnownWorker{Worker: selection.Worker{Host: s.Host, PID: s.PID, Running: true, Selected: true},
			Stopped: stopAt(s), Executor: s.Executor, Exception: s.Exception, Unwatched: true}
		live(&kw)
		out = append(out, withState(kw, false, raised))
	}
	for _, w := range finished {
		out = append(out, withState(KnownWorker{Worker: w}, true, raised))
	}
	return out
}

// withState sets kw's State, and its Exception from raised when its
// last task raised one; gone says its process is gone.
func withState(kw KnownWorker, gone bool, raised map[int64]string) KnownWorker {
	var taskRaised string
	if kw.Task != nil {
		taskRaised = raised[kw.Task.TaskAttemptID]
	}
	if kw.Exception == "" {
		kw.Exception = taskRaised
	}
	switch {
	case kw.Stopped != nil:
		kw.State = StateStopped
	case kw.Running && !gone:
		kw.State = StateRunning
	case taskRaised != "":
		kw.State = StateFailed
	case gone:
		kw.State = StateFinished
	default:
		kw.State = StateIdle
	}
	return kw
}

// stateRank orders the states in a list: what needs the user first.
var stateRank = map[string]int{StateStopped: 0, StateRunning: 1, StateIdle: 2, StateFailed: 3, StateFinished: 4}

// sortRows orders rows by state (stopped, running, idle, failed,
// finished), then by executor id (numbers as numbers, before names such
// as "driver"), stage and partition; the rest only makes the order
// total, so that the same workers always give the same answer.
func sortRows(rows []KnownWorker) {
	slices.SortStableFunc(rows, func(a, b KnownWorker) int {
		if c := cmp.Compare(stateRank[a.State], stateRank[b.State]); c != 0 {
			return c
		}
		if c := compareExecutorIDs(a.ExecutorID, b.ExecutorID); c != 0 {
			return c
		}
		ta, tb := taskKey(a.Task), taskKey(b.Task)
		for i := range ta {
			if c := cmp.Compare(ta[i], tb[i]); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		if c := cmp.Compare(a.PID, b.PID); c != 0 {
			return c
		}
		return a.Since.Compare(b.Since)
	})
}

// taskKey is what orders a task: stage, partition, attempt, task attempt
// id; a worker that reported none comes after those that did.
func taskKey(t *selection.Task) [4]int64 {
	if t == nil {
		return [4]int64{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64}
	}
	return [4]int64{t.Stage, t.Partition, t.Attempt, t.TaskAttemptID}
}

// compareExecutorIDs orders Spark executor ids: numbers by value, then
// names ("driver"), then none.
func compareExecutorIDs(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(na, nb)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	case (a == "") != (b == ""):
		if a == "" {
			return 1
		}
		return -1
	}
	return cmp.Compare(a, b)
}

// countStates counts rows by state.
func countStates(rows []KnownWorker) Counts {
	c := Counts{Workers: len(rows)}
	for _, r := range rows {
		switch r.State {
		case StateRunning:
			c.Running++
		case StateStopped:
			c.Stopped++
		case StateIdle:
			c.Idle++
		case StateFinished:
			c.Finished++
		case StateFailed:
			c.Failed++
		}
	}
	return c
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
