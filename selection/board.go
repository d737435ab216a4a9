package selection

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sparkdap/sparkdap/admission"
)

// DefaultMaxWatchers bounds the workers a Board follows at once: one per
// Python worker process of the job, a few per executor core.
const DefaultMaxWatchers = 8192

// ErrTooManyWatchers refuses a watch hello past the Board's bound: that
// worker decides on the selection it was submitted with.
var ErrTooManyWatchers = errors.New("too many workers watch the selection")

// Board is the current selection and the workers that follow it. Its
// methods are safe for concurrent use.
type Board struct {
	max int
	now func() time.Time

	mu sync.Mutex // guards the fields below and every watcher's state
	// sel is the selection set with Set; nil: the one the job was
	// submitted with, which each worker has baked in.
	sel *Selection
	// seq counts changes of sel: a watcher's writer sends until it has
	// sent the latest.
	seq      uint64
	watchers map[*watcher]struct{}
	nextID   uint64
	// changed, if set, gets a worker's state after each of its reports,
	// on that watcher's reader goroutine, under no lock of the Board.
	changed func(Worker)
	// groups are the exception groups (exceptions.go); wanted the tasks
	// whose next exception stop is shown; want shows a held one.
	groups map[groupKey]*ExceptionGroup
	wanted map[int64]struct{}
	want   func(taskAttemptID int64) bool
	// raised names the exception each task raised (exceptions.go), by
	// task attempt id; raisedOrder is its keys, oldest first, to bound it.
	raised      map[int64]string
	raisedOrder []int64
	// finished are the workers whose watch connection closed, the last
	// MaxFinished of them (finished.go).
	finished finishedRing
	// updated, if set, is told of any change of what Workers, Finished
	// and Current report (OnUpdate).
	updated func()
}

// OnChange has f called with a worker's state after each of its reports
// (a task started, or ended): on the reader goroutine of that worker's
// watch, under no lock of the Board, so f may take the caller's own
// locks (and call the Board) but must not wait long. Set it before any
// watch is served.
func (b *Board) OnChange(f func(Worker)) {
	b.mu.Lock()
	b.changed = f
	b.mu.Unlock()
}

// OnUpdate has f called after each change of what Workers, Finished or
// Current report: a worker's watch started, reported or ended, or the
// selection was set. It runs under no lock of the Board, on the goroutine
// that made the change (a watch's reader, or Set's caller), so f must
// neither wait nor take a lock such a caller may hold: a front end marks
// its view stale there and rebuilds it elsewhere. Exception groups
// (Raised, Unhold) do not call it: their callers know. Set it before any
// watch is served.
func (b *Board) OnUpdate(f func()) {
	b.mu.Lock()
	b.updated = f
	b.mu.Unlock()
}

// update tells OnUpdate's func of a change; call it under no lock.
func (b *Board) update() {
	b.mu.Lock()
	f := b.updated
	b.mu.Unlock()
	if f != nil {
		f()
	}
}

// NewBoard is a Board following at most max workers (DefaultMaxWatchers
// when max <= 0), with the selection the job was submitted with.
func NewBoard(max int) *Board {
	if max <= 0 {
		max = DefaultMaxWatchers
	}
	return &Board{max: max, now: time.Now, watchers: map[*watcher]struct{}{}}
}

// Task is a Spark task as a worker reports it.
type Task struct {
	Stage         int64 `json:"stage"`
	Partition     int64 `json:"partition"`
	Attempt       int64 `json:"attempt"`
	TaskAttemptID int64 `json:"taskAttemptId"`
}

// Label names the task as the wrapper's task label does: the partition
// first, since that is what tells the workers of one stage apart where an
// IDE cuts a name short, then the stage; the attempt only for a retry.
func (t Task) Label() string {
	label := fmt.Sprintf("partition %d · stage %d", t.Partition, t.Stage)
	if t.Attempt != 0 {
		label += fmt.Sprintf(" · attempt %d", t.Attempt)
	}
	return label
}

// Worker is what the Board knows of one worker process, as `sparkdap
// workers` lists it.
type Worker struct {
	ExecutorID string `json:"executorId"`
	Host       string `json:"host"`
	PID        int64  `json:"pid"`
	// Running says a task runs; else the worker is idle between tasks and
	// Task is its last one (nil before its first report).
	Running bool  `json:"running"`
	Task    *Task `json:"task,omitempty"`
	// Selected says Task is debugged.
	Selected bool `json:"selected"`
	// Since is when the worker started Task, or went idle.
	Since time.Time `json:"since"`
	// Tasks counts the tasks the worker reported.
	Tasks int64 `json:"tasks"`
	// SparkdapVersion is the sparkdap release whose wrapper the worker
	// runs, as its watch hello said (admission.Hello.SparkdapVersion); ""
	// for a wrapper from before the hellos said it. `sparkdap doctor`
	// compares it with serve's.
	SparkdapVersion string `json:"sparkdapVersion,omitempty"`
}

// watcher is one worker's watch connection. Its fields other than wake
// and id are guarded by Board.mu.
type watcher struct {
	id   uint64
	info Worker
	// wake (one slot) tells the writer goroutine a selection is waiting.
	wake chan struct{}
}

// Current is the selection set with Set, or nil for the one the job was
// submitted with.
func (b *Board) Current() *Selection {
	b.mu.Lock()
	defer b.mu.Unlock()
	return clone(b.sel)
}

// Set makes sel (nil: the one the job was submitted with) the selection
// of every worker, now and as they start: each gets it as one line,
// written on its own goroutine. It returns how many workers it went to.
func (b *Board) Set(sel *Selection) (int, error) {
	if sel != nil {
		if err := sel.Validate(); err != nil {
			return 0, err
		}
	}
	b.mu.Lock()
	b.sel = clone(sel)
	b.seq++
	ws := make([]*watcher, 0, len(b.watchers))
	for w := range b.watchers {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	for _, w := range ws {
		select {
		case w.wake <- struct{}{}:
		default: // a send is already due; it sends the latest
		}
	}
	b.update()
	return len(ws), nil
}

// Workers lists the workers following the selection, by host, pid.
func (b *Board) Workers() []Worker {
	b.mu.Lock()
	out := make([]Worker, 0, len(b.watchers))
	for w := range b.watchers {
		wk := w.info
		if wk.Task != nil {
			t := *wk.Task
			wk.Task = &t
		}
		out = append(out, wk)
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].PID < out[j].PID
	})
	return out
}

// selectLine is the line that gives a worker the current selection.
func (b *Board) selectLine() []byte {
	b.mu.Lock()
	sel := clone(b.sel)
	b.mu.Unlock()
	raw, _ := json.Marshal(sel) // a Selection always encodes; nil is null
	line := make([]byte, 0, len(admission.HelloPrefix)+len("SELECT ")+len(raw)+1)
	line = append(line, admission.HelloPrefix+"SELECT "...)
	line = append(line, raw...)
	return append(line, '\n')
}

func clone(s *Selection) *Selection {
	if s == nil {
		return nil
	}
	c := *s
	c.Partitions = slices.Clone(s.Partitions)
	c.Stages = slices.Clone(s.Stages)
	c.Executors = slices.Clone(s.Executors)
	return &c
}

// Between says what a worker does between its debugged tasks, for the
// label of a worker whose debugger stays connected: "idle · last
// partition 3 · stage 1", "partition 7 · stage 3 · not debugged" while it
// runs a task that is not selected, or "" while it runs a selected one
// (its debugger names that task).
func Between(w Worker) string {
	switch {
	case !w.Running && w.Task != nil:
		return "idle · last " + w.Task.Label()
	case !w.Running:
		return "idle"
	case !w.Selected && w.Task != nil:
		return w.Task.Label() + " · not debugged"
	}
	return ""
}
