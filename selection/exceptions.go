package selection

import (
	"sort"
	"time"
)

// DefaultExceptionHold is how long a worker stopped at an exception of a
// group whose first stop the user already has waits, before it runs on
// as it would without a debugger.
const DefaultExceptionHold = 5 * time.Second

// maxGroups bounds the exception groups a Board keeps: a job that raises
// thousands of different exceptions counts the rest in the last group
// kept ("other").
const maxGroups = 256

// maxWanted bounds the tasks asked for with WantTask and not yet seen.
const maxWanted = 1024

// maxRaisedTasks bounds the tasks whose exception the Board remembers
// (TaskExceptions): more than the workers it lists (live and finished),
// the oldest dropped first.
const maxRaisedTasks = 2 * DefaultMaxWatchers

// ExceptionGroup is the stops at one exception type raised at one place.
type ExceptionGroup struct {
	Type  string `json:"type"`
	Place string `json:"place"` // file:line of the innermost frame
	// Tasks counts the stops of the group; Held those waiting now.
	Tasks int64 `json:"tasks"`
	Held  int64 `json:"held"`
}

type groupKey struct{ typ, place string }

// Raised counts a worker's stop at an exception of type typ at place. It
// reports whether the stop is shown: the group's first, or one of a task
// asked for with WantTask (taskAttemptID, -1 for unknown). A stop not
// shown is held until Unhold.
func (b *Board) Raised(typ, place string, taskAttemptID int64) (show bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.groups == nil {
		b.groups = map[groupKey]*ExceptionGroup{}
	}
	k := groupKey{typ, place}
	g := b.groups[k]
	if g == nil && len(b.groups) >= maxGroups {
		k = groupKey{"other", "elsewhere"}
		g = b.groups[k]
	}
	first := g == nil
	if first {
		g = &ExceptionGroup{Type: k.typ, Place: k.place}
		b.groups[k] = g
	}
	g.Tasks++
	b.noteRaisedLocked(taskAttemptID, typ)
	if _, wanted := b.wanted[taskAttemptID]; wanted && taskAttemptID >= 0 {
		delete(b.wanted, taskAttemptID)
		return true
	}
	if !first {
		g.Held++
	}
	return first
}

// Unhold notes that a held stop of the group ended: it ran on, or was
// shown after all.
func (b *Board) Unhold(typ, place string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.groups[groupKey{typ, place}]; g != nil && g.Held > 0 {
		g.Held--
	} else if g := b.groups[groupKey{"other", "elsewhere"}]; g != nil && g.Held > 0 {
		g.Held--
	}
}

// Groups lists the exception groups, the largest first.
func (b *Board) Groups() []ExceptionGroup {
	b.mu.Lock()
	out := make([]ExceptionGroup, 0, len(b.groups))
	for _, g := range b.groups {
		out = append(out, *g)
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tasks != out[j].Tasks {
			return out[i].Tasks > out[j].Tasks
		}
		return out[i].Type+out[i].Place < out[j].Type+out[j].Place
	})
	return out
}

// WantTask asks for the next stop at an exception in the task of
// taskAttemptID to be shown, as held or when it comes: the front end's
// OnWant func is called with it first (for a stop already held).
func (b *Board) WantTask(taskAttemptID int64) {
	b.mu.Lock()
	if b.wanted == nil {
		b.wanted = map[int64]struct{}{}
	}
	if len(b.wanted) < maxWanted {
		b.wanted[taskAttemptID] = struct{}{}
	}
	f := b.want
	b.mu.Unlock()
	if f != nil && f(taskAttemptID) {
		b.mu.Lock()
		delete(b.wanted, taskAttemptID)
		b.mu.Unlock()
	}
}

// OnWant has f called by WantTask, under no lock of the Board: f shows
// the task's held stop if it has one, and reports whether it did. Set it
// before serving.
func (b *Board) OnWant(f func(taskAttemptID int64) bool) {
	b.mu.Lock()
	b.want = f
	b.mu.Unlock()
}

// noteRaisedLocked remembers that the task of taskAttemptID (-1: unknown,
// not kept) raised an exception of type typ. Callers hold b.mu.
func (b *Board) noteRaisedLocked(taskAttemptID int64, typ string) {
	if taskAttemptID < 0 {
		return
	}
	if b.raised == nil {
		b.raised = map[int64]string{}
	}
	if _, ok := b.raised[taskAttemptID]; !ok {
		if len(b.raisedOrder) >= maxRaisedTasks {
			delete(b.raised, b.raisedOrder[0])
			b.raisedOrder = b.raisedOrder[1:]
		}
		b.raisedOrder = append(b.raisedOrder, taskAttemptID)
	}
	b.raised[taskAttemptID] = typ
}

// TaskExceptions names the exception type each task raised, by task
// attempt id, as the front ends counted them in exception groups
// (Raised): a task that raised where nothing stopped at exceptions (no
// exception breakpoint, or a task not debugged) is not in it. A copy.
func (b *Board) TaskExceptions() map[int64]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int64]string, len(b.raised))
	for k, v := range b.raised {
		out[k] = v
	}
	return out
}
