package pycharm

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/selection"
)

// StoppedFrame is one frame of a stopped thread as PyCharm was shown it
// (local file, the wrapper's and the daemon's frames left out).
type StoppedFrame struct {
	ID   string `xml:"id,attr"` // pydevd's id(frame), valid while stopped
	Name string `xml:"name,attr"`
	File string `xml:"file,attr"`
	Line int64  `xml:"line,attr"`
}

// StoppedThread is a worker's thread stopped in the debugger, for
// `sparkdap capture` in PyCharm mode.
type StoppedThread struct {
	PID    int64
	Host   string // the worker's host, as its hello said
	Label  string // the task label
	Thread string // pydevd's thread id, pid_<pid>_id_<n>
	Name   string
	Frames []StoppedFrame // innermost first
}

type suspendDoc struct {
	Threads []struct {
		ID     string         `xml:"id,attr"`
		Name   string         `xml:"name,attr"`
		Frames []StoppedFrame `xml:"frame"`
	} `xml:"thread"`
}

// noteStop records the stops PyCharm is shown and forgets resumed or
// ended threads, so that the control socket can list them. m is as sent
// to PyCharm (frame files local). Callers hold p.mu.
func (e *executor) noteStop(m Message) {
	switch m.ID {
	case CmdThreadSuspend:
		var d suspendDoc
		if err := xml.Unmarshal([]byte(PyUnquote(m.Payload)), &d); err != nil {
			return
		}
		for _, t := range d.Threads {
			frames := make([]StoppedFrame, len(t.Frames))
			for i, f := range t.Frames {
				f.Name, f.File = PyUnquote(f.Name), PyUnquote(f.File)
				frames[i] = f
			}
			e.stopped[t.ID] = StoppedThread{PID: e.pid, Thread: t.ID, Name: e.threads[t.ID], Frames: frames}
		}
	case CmdThreadRun, CmdThreadKill:
		for _, id := range eventThreads(m) {
			delete(e.stopped, id)
		}
	}
}

// Stopped lists the workers' stopped threads, by pid and thread id.
func (p *Proxy) Stopped() []StoppedThread {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []StoppedThread
	for _, e := range p.execs {
		for _, st := range e.stopped {
			st.Label = taskOf(e.label)
			st.Host = e.hello.Host
			st.Frames = append([]StoppedFrame(nil), st.Frames...)
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].Thread < out[j].Thread
	})
	return out
}

// Errors of CaptureStopped, each answered on the control socket with its
// class's code.
var (
	ErrNotStopped = control.WithClass(errors.New("the worker is not stopped"), control.ErrNotStopped)
	ErrNoFrame    = control.ErrNoFrame
)

// The Proxy is a control.Backend: `sparkdap capture` lists its stopped
// workers and captures one's frame through the control socket. A worker
// is named by its pid, and its stack is the one PyCharm was shown at the
// stop (the wrapper's frames left out, so frame 0 is user code).
var _ control.Backend = (*Proxy)(nil)

// StoppedWorkers lists the workers' stopped threads, by pid and thread id,
// with the stacks PyCharm was shown (control.Backend).
func (p *Proxy) StoppedWorkers(context.Context) []control.StoppedWorker {
	var out []control.StoppedWorker
	for _, st := range p.Stopped() {
		w := control.StoppedWorker{Executor: uint64(st.PID), Host: st.Host, PID: st.PID, Label: st.Label, Thread: ThreadNumber(st.Thread),
			ThreadName: st.Name, Frames: []control.WorkerFrame{}, Top: -1}
		for _, f := range st.Frames {
			w.Frames = append(w.Frames, control.WorkerFrame{Name: f.Name, File: f.File, Line: f.Line})
		}
		if len(w.Frames) > 0 {
			w.Top = 0
		}
		out = append(out, w)
	}
	return out
}

// CaptureStopped captures frame index frame (0 the innermost; nil the
// same: the wrapper's frames are never in the stack) of worker pid's
// stopped thread, as `sparkdap capture` asks (control.Backend). Call it on
// no lock.
func (p *Proxy) CaptureStopped(ctx context.Context, pid uint64, frame *int, maxBytes int64) (control.CaptureResult, error) {
	if p.cfg.CaptureDir == "" {
		return control.CaptureResult{}, control.ErrCaptureDisabled
	}
	var st *StoppedThread
	p.mu.Lock()
	e := p.execs[int64(pid)]
	if e != nil {
		ids := make([]string, 0, len(e.stopped))
		for id := range e.stopped {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if len(ids) > 0 {
			s := e.stopped[ids[0]]
			st = &s
		}
		p.noteAsked(e)
	}
	p.mu.Unlock()
	switch {
	case e == nil:
		// Not yet the capture's ErrWorkerGone (which fails a capture the
		// worker left during): no such worker to capture.
		return control.CaptureResult{}, control.WithClass(fmt.Errorf("worker pid %d: %w", pid, ErrWorkerGone), control.ErrUnknownExecutor)
	case st == nil:
		return control.CaptureResult{}, fmt.Errorf("worker pid %d: %w: stop it at a breakpoint or an exception first", pid, ErrNotStopped)
	}
	idx := 0
	if frame != nil {
		idx = *frame
	}
	if idx < 0 || idx >= len(st.Frames) {
		return control.CaptureResult{}, fmt.Errorf("worker pid %d: %w: frame %d of a stack of %d (0 is the innermost)", pid, ErrNoFrame, idx, len(st.Frames))
	}
	res, err := p.Capture(ctx, st.Thread, st.Frames[idx].ID, maxBytes)
	if err != nil {
		return control.CaptureResult{}, err
	}
	return control.CaptureResult{Path: res.Path, Bytes: int64(res.Bytes),
		Function: admission.Clean(res.Function, admission.MaxTextRunes), Task: admission.Clean(res.Task, 4*admission.MaxTextRunes),
		Executor: uint64(res.PID), Frame: idx, Summary: res.Summary}, nil
}

// ThreadNumber is the <n> of a thread id pid_<pid>_id_<n>, 0 if none.
func ThreadNumber(id string) int64 {
	if !threadIDRE.MatchString(id) {
		return 0
	}
	v, _ := strconv.ParseInt(id[strings.LastIndex(id, "_")+1:], 10, 64)
	return v
}

// Board is the live selection and the workers that follow it
// (control.Backend).
func (p *Proxy) Board() *selection.Board { return p.board }
