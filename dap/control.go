package dap

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/selection"
)

// The Hub is a control.Backend: `sparkdap capture` lists its stopped
// executors and captures one's frame through the control socket. An
// executor is named by its session id; its stack is asked of its pydevd
// by the Hub itself (the IDE never sees the request), so the plumbing
// frames are in it, marked.

var _ control.Backend = (*Hub)(nil)

// stoppedThread is a stopped executor's thread as a snapshot under the Hub's lock.
type stoppedThread struct {
	es                *ExecutorSession
	label, threadName string
	tid               int64
	host              string // the worker's, as its hello said
	pid               int64
	exception         string  // the type it stopped at, if at an exception
	stop              Message // the stopped event it stands in, as executorState.stopped holds it
}

// stackMemo is a stopped thread's stack, kept for as long as the thread
// stays in the stop it was asked in: the view's feed lists every stopped
// worker several times a second, and pydevd's frames and their ids do not
// change while a thread stays stopped.
type stackMemo struct {
	stop   Message // the stopped event; a new stop or a resume replaces or drops it
	frames []stackFrame
}

// sameStop reports whether a and b are the one stopped event that
// executorState.stopped holds (it stores a fresh copy at every stop).
// A memo holds its event, so its map cannot be freed and reused by another.
func sameStop(a, b Message) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// stackFrame is a frame of a stopped thread's stack with pydevd's id of
// it, valid while the thread stays stopped.
type stackFrame struct {
	control.WorkerFrame
	id int64
}

// stoppedThreads lists the ready executors that are stopped, by id, each
// with its lowest stopped thread (a PySpark worker runs the user's code
// on one thread).
func (tx *held) stoppedThreads() []stoppedThread {
	var out []stoppedThread
	for _, es := range tx.executors {
		if !tx.exec(es).ready || len(tx.exec(es).stopped) == 0 {
			continue
		}
		tid := int64(-1)
		for t := range tx.exec(es).stopped {
			if tid < 0 || t < tid {
				tid = t
			}
		}
		x := tx.exec(es)
		var exception string
		if b := x.stopped[tid].Body(); b["reason"] == "exception" {
			exception, _ = b["text"].(string)
			exception = admission.Clean(exception, admission.MaxTextRunes)
		}
		out = append(out, stoppedThread{es: es, label: x.label(), threadName: admission.Clean(x.threads[tid], admission.MaxTextRunes), tid: tid,
			host: x.task.Host, pid: x.task.PID, exception: exception, stop: x.stopped[tid]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].es.id < out[j].es.id })
	return out
}

// stackOf asks the executor's pydevd for the thread's stack, as the Hub's
// own request (the IDE never sees it), once per stop: the answer is kept
// while the thread stays in st's stop. Runs on no lock: it waits.
func (h *Hub) stackOf(st stoppedThread) ([]stackFrame, error) {
	tx := h.lock()
	memo, ok := tx.exec(st.es).stacks[st.tid]
	tx.unlock()
	if ok && sameStop(memo.stop, st.stop) {
		return slices.Clone(memo.frames), nil
	}
	frames, err := h.askStack(st)
	if err != nil {
		return nil, err
	}
	tx = h.lock()
	defer tx.unlock()
	x := tx.exec(st.es)
	if sameStop(x.stopped[st.tid], st.stop) {
		for tid := range x.stacks {
			if _, still := x.stopped[tid]; !still {
				delete(x.stacks, tid)
			}
		}
		if x.stacks == nil {
			x.stacks = map[int64]stackMemo{}
		}
		x.stacks[st.tid] = stackMemo{stop: st.stop, frames: slices.Clone(frames)}
	}
	return frames, nil
}

// askStack asks the executor's pydevd for the thread's stack. Runs on no
// lock: it waits.
func (h *Hub) askStack(st stoppedThread) ([]stackFrame, error) {
	type result struct {
		m   Message
		err error
	}
	ch := make(chan result, 1)
	st.es.request("stackTrace", map[string]any{"threadId": st.tid}, h.cfg.RequestTimeout,
		func(m Message, err error) { ch <- result{m, err} })
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("executor %d: stackTrace: %w", st.es.id, r.err)
	}
	if !r.m.Success() {
		return nil, fmt.Errorf("executor %d: stackTrace: %s", st.es.id, r.m.ErrorMessage())
	}
	raw, _ := r.m.Body()["stackFrames"].([]any)
	frames := make([]stackFrame, 0, len(raw))
	tx := h.lock()
	defer tx.unlock()
	for _, f := range raw {
		fr, _ := f.(map[string]any)
		src, _ := fr["source"].(map[string]any)
		path, _ := src["path"].(string)
		id, _ := toInt(fr["id"])
		line, _ := toInt(fr["line"])
		name, _ := fr["name"].(string)
		wf := control.WorkerFrame{Name: admission.Clean(name, admission.MaxTextRunes), File: path, Line: line, Plumbing: admission.IsPlumbingFile(path)}
		if h.cfg.Paths != nil && path != "" {
			if r := tx.mapRemote(st.es, path); r.Err == nil {
				wf.File = r.Mapping.Local
			}
		}
		wf.File = admission.Clean(wf.File, 4096)
		frames = append(frames, stackFrame{WorkerFrame: wf, id: id})
	}
	return frames, nil
}

// topUserFrame is the index of the innermost frame of user code, -1 for
// none.
func topUserFrame(frames []stackFrame) int {
	for i, f := range frames {
		if !f.Plumbing {
			return i
		}
	}
	return -1
}

// StoppedWorkers lists the executors stopped in the debugger, with the
// stopped thread's stack (control.Backend). It asks each executor's pydevd
// (concurrently, each request bounded by Config.RequestTimeout): call it
// on no lock.
func (h *Hub) StoppedWorkers(context.Context) []control.StoppedWorker {
	tx := h.lock()
	sts := tx.stoppedThreads()
	tx.unlock()
	out := make([]control.StoppedWorker, len(sts))
	var wg sync.WaitGroup
	for i, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := control.StoppedWorker{Executor: st.es.id, Host: st.host, PID: st.pid, Label: st.label, Thread: st.tid, ThreadName: st.threadName, Top: -1,
				Exception: st.exception}
			frames, err := h.stackOf(st)
			if err != nil {
				w.StackError = err.Error()
			}
			w.Frames = make([]control.WorkerFrame, len(frames))
			for i, f := range frames {
				w.Frames[i] = f.WorkerFrame
			}
			w.Top = topUserFrame(frames)
			out[i] = w
		}()
	}
	wg.Wait()
	return out
}

// CaptureStopped captures the frame at index frame (nil: the innermost of
// user code) of stopped executor executor's stack, like the IDE's
// sparkdapCapture; maxBytes > 0 lowers the cap (control.Backend). Its
// waits are bounded by Config.RequestTimeout, not by ctx. Call it on no
// lock.
func (h *Hub) CaptureStopped(_ context.Context, executor uint64, frame *int, maxBytes int64) (control.CaptureResult, error) {
	if h.cfg.CaptureDir == "" {
		return control.CaptureResult{}, control.ErrCaptureDisabled
	}
	tx := h.lock()
	es := tx.executors[executor]
	var st *stoppedThread
	ready := es != nil && tx.exec(es).ready
	if ready {
		for _, s := range tx.stoppedThreads() {
			if s.es == es {
				st = &s
			}
		}
		tx.noteAsked(es)
	}
	tx.unlock()
	switch {
	case !ready:
		return control.CaptureResult{}, fmt.Errorf("executor %d: %w", executor, control.ErrUnknownExecutor)
	case st == nil:
		return control.CaptureResult{}, fmt.Errorf("executor %d: %w: stop it at a breakpoint or an exception first", executor, control.ErrNotStopped)
	}
	frames, err := h.stackOf(*st)
	if err != nil {
		return control.CaptureResult{}, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	idx := topUserFrame(frames)
	if frame != nil {
		idx = *frame
	}
	if idx < 0 || idx >= len(frames) {
		return control.CaptureResult{}, fmt.Errorf("executor %d: %w: frame %d of a stack of %d (0 is the innermost)", executor, control.ErrNoFrame, idx, len(frames))
	}
	limit := h.cfg.CaptureMaxBytes
	if maxBytes > 0 && maxBytes < int64(limit) {
		limit = int(maxBytes)
	}
	path, body, err := h.runCapture(es, frames[idx].id, limit, st.label)
	if err != nil {
		es.logger().Info().Err(err).Msg("capture failed")
		return control.CaptureResult{}, err
	}
	es.logger().Info().Str("path", path).Msg("captured the stopped function and its arguments")
	n, _ := toInt(body["bytes"])
	fn, _ := body["function"].(string)
	task, _ := body["task"].(string)
	return control.CaptureResult{Path: path, Bytes: n, Function: admission.Clean(fn, admission.MaxTextRunes), Task: admission.Clean(task, 4*admission.MaxTextRunes), Executor: executor, Frame: idx,
		Summary: captureSummary(body)}, nil
}

// Board is the live selection and the workers that follow it
// (control.Backend).
func (h *Hub) Board() *selection.Board { return h.board }

// workerChanged labels a debugging worker's threads with what it does
// between debugged tasks, as its watch connection reported (the Board's
// OnChange): a worker that debugged an earlier task stays connected, and
// without this its threads would keep naming that task while it is idle
// or runs tasks that are not debugged. A worker whose debugged task
// starts is labelled by its sparkdapTask event (taskEvent).
func (h *Hub) workerChanged(w selection.Worker) {
	between := selection.Between(w)
	tx := h.lock()
	defer tx.unlock()
	for _, es := range tx.executors {
		x := tx.exec(es)
		if x.proc.PID != w.PID || x.task.Host != w.Host || x.between == between {
			continue
		}
		if len(x.stopped) > 0 {
			return // a stopped worker runs its debugged task
		}
		if between == "" && w.Running {
			return // its sparkdapTask event names the task
		}
		x.between = between
		x.threadsChanged()
		if x.ready {
			tx.retitleThreads(es)
		}
		return
	}
}

// OutputBytes is the output each connected worker sent the IDE, by host
// and pid (control.OutputCounter).
func (h *Hub) OutputBytes() map[control.WorkerID]int64 {
	tx := h.lock()
	defer tx.unlock()
	out := make(map[control.WorkerID]int64, len(tx.executors))
	for _, es := range tx.executors {
		x := tx.exec(es)
		out[control.WorkerID{Host: x.task.Host, PID: x.proc.PID}] += x.outputBytes
	}
	return out
}
