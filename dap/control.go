package dap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/acceptretry"
	"github.com/sparkdap/sparkdap/worker"
)

// The control protocol: `sparkdap capture` talks to a running proxy over
// a local socket that only its user can reach (cmd/sparkdap makes it: a
// Unix socket, mode 0600, in a 0700 directory). One connection carries
// one request, a JSON object on one line, and its answer, a JSON object
// on one line; then the proxy closes it. A request is at most
// MaxControlRequestBytes and may hold no field ControlRequest lacks.

// Control operations.
const (
	// ControlWorkers lists the stopped workers (ControlAnswer.Workers).
	ControlWorkers = "workers"
	// ControlCapture captures one stopped worker's frame
	// (ControlAnswer.Capture).
	ControlCapture = "capture"
)

// Every string of an answer is cluster text or may hold some (a stack
// frame's name, an executor's error message quoted in Error), and the
// client prints them to a terminal: the answer is cleaned as a whole
// (worker.CleanAll) where the proxy encodes it and again where a client
// decodes it, so neither a front end that forgot a field nor a proxy of
// another version gets a control character to the terminal.

// MaxControlRequestBytes bounds one control request: it names an
// operation and a few numbers.
const MaxControlRequestBytes = 4 << 10

// maxControlAnswerBytes bounds what ControlCall reads back: a list of
// stopped workers with their stacks.
const maxControlAnswerBytes = 8 << 20

// clean cleans every string of a (see above), each capped at
// worker.MaxMessageRunes: a path, or an error message with the executor's
// words in it.
func (a *ControlAnswer) clean() { worker.CleanAll(a, worker.MaxMessageRunes) }

// controlReadTimeout bounds how long a control connection may take to
// send its request.
const controlReadTimeout = 10 * time.Second

// ControlRequest is one request on the control socket.
type ControlRequest struct {
	Op string `json:"op"`
	// Executor is the executor session to capture (ControlCapture).
	Executor uint64 `json:"executor,omitempty"`
	// Frame is the index of the frame to capture in the stopped thread's
	// stack, 0 the innermost; nil: the innermost frame of user code (not
	// one of worker.IsPlumbingFile's).
	Frame *int `json:"frame,omitempty"`
	// MaxBytes, if > 0, lowers the proxy's size cap for this capture.
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// ControlAnswer is the answer to a ControlRequest: Error (and Code) when
// it failed.
type ControlAnswer struct {
	Error string `json:"error,omitempty"`
	// Code classifies Error: one of the Code* constants.
	Code    string          `json:"code,omitempty"`
	Workers []StoppedWorker `json:"workers,omitempty"`
	Capture *CaptureResult  `json:"capture,omitempty"`
}

// Codes of ControlAnswer.Code, one per error class a client tells apart.
const (
	CodeBadRequest      = "bad-request"
	CodeCaptureDisabled = "capture-disabled"
	CodeUnknownExecutor = "unknown-executor"
	CodeNotStopped      = "not-stopped"
	CodeNoFrame         = "no-frame"
	CodeFailed          = "failed"
)

// Errors of the Hub's capture entry points for other front ends than the
// IDE (the control socket).
var (
	ErrCaptureDisabled = errors.New("this proxy takes no captures: it was started with an empty --capture-dir")
	ErrUnknownExecutor = errors.New("no executor session with that id")
	ErrNotStopped      = errors.New("the executor is not stopped")
	ErrNoFrame         = errors.New("no such frame")
)

// StoppedWorker is one executor stopped in the debugger, as `sparkdap
// capture` lists it.
type StoppedWorker struct {
	Executor   uint64 `json:"executor"`
	Label      string `json:"label"`
	Thread     int64  `json:"thread"` // pydevd's id of the stopped thread
	ThreadName string `json:"threadName,omitempty"`
	// Frames is the stopped thread's stack, innermost first; Top indexes
	// its innermost frame of user code (-1: none).
	Frames []WorkerFrame `json:"frames"`
	Top    int           `json:"top"`
	// StackError says why Frames is empty.
	StackError string `json:"stackError,omitempty"`
}

// WorkerFrame is one frame of a stopped worker's stack.
type WorkerFrame struct {
	Name string `json:"name"`
	// File is the local file when the path maps to one, else the
	// executor's path.
	File     string `json:"file"`
	Line     int64  `json:"line"`
	Plumbing bool   `json:"plumbing,omitempty"`

	id int64 // pydevd's frame id, valid while the thread stays stopped
}

// CaptureResult is what a capture through the control socket made.
type CaptureResult struct {
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	Function string `json:"function"`
	Task     string `json:"task"`
	Executor uint64 `json:"executor"`
	Frame    int    `json:"frame"`
	// Summary is the line the Debug Console's !capture shows.
	Summary string `json:"summary"`
}

// stoppedThread is a stopped executor's thread as a snapshot under the Hub's lock.
type stoppedThread struct {
	es                *ExecutorSession
	label, threadName string
	tid               int64
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
		out = append(out, stoppedThread{es: es, label: tx.exec(es).label(), threadName: worker.Clean(tx.exec(es).threads[tid], worker.MaxTextRunes), tid: tid})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].es.id < out[j].es.id })
	return out
}

// stackOf asks the executor's pydevd for the thread's stack, as the Hub's
// own request (the IDE never sees it). Runs on no lock: it waits.
func (h *Hub) stackOf(st stoppedThread) ([]WorkerFrame, error) {
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
	frames := make([]WorkerFrame, 0, len(raw))
	tx := h.lock()
	defer tx.unlock()
	for _, f := range raw {
		fr, _ := f.(map[string]any)
		src, _ := fr["source"].(map[string]any)
		path, _ := src["path"].(string)
		id, _ := toInt(fr["id"])
		line, _ := toInt(fr["line"])
		name, _ := fr["name"].(string)
		wf := WorkerFrame{Name: worker.Clean(name, worker.MaxTextRunes), File: path, Line: line, Plumbing: worker.IsPlumbingFile(path), id: id}
		if h.cfg.Paths != nil && path != "" {
			if r := tx.mapRemote(st.es, path); r.Err == nil {
				wf.File = r.Mapping.Local
			}
		}
		wf.File = worker.Clean(wf.File, 4096)
		frames = append(frames, wf)
	}
	return frames, nil
}

// topUserFrame is the index of the innermost frame of user code, -1 for
// none.
func topUserFrame(frames []WorkerFrame) int {
	for i, f := range frames {
		if !f.Plumbing {
			return i
		}
	}
	return -1
}

// StoppedWorkers lists the executors stopped in the debugger, with the
// stopped thread's stack. It asks each executor's pydevd (concurrently):
// call it on no lock.
func (h *Hub) StoppedWorkers() []StoppedWorker {
	tx := h.lock()
	sts := tx.stoppedThreads()
	tx.unlock()
	out := make([]StoppedWorker, len(sts))
	var wg sync.WaitGroup
	for i, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := StoppedWorker{Executor: st.es.id, Label: st.label, Thread: st.tid, ThreadName: st.threadName, Top: -1}
			frames, err := h.stackOf(st)
			if err != nil {
				w.StackError = err.Error()
			}
			w.Frames = frames
			if w.Frames == nil {
				w.Frames = []WorkerFrame{}
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
// sparkdapCapture; maxBytes > 0 lowers the cap. Call it on no lock: it
// waits for the executor.
func (h *Hub) CaptureStopped(executor uint64, frame *int, maxBytes int64) (CaptureResult, error) {
	if h.cfg.CaptureDir == "" {
		return CaptureResult{}, ErrCaptureDisabled
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
		return CaptureResult{}, fmt.Errorf("executor %d: %w", executor, ErrUnknownExecutor)
	case st == nil:
		return CaptureResult{}, fmt.Errorf("executor %d: %w: stop it at a breakpoint or an exception first", executor, ErrNotStopped)
	}
	frames, err := h.stackOf(*st)
	if err != nil {
		return CaptureResult{}, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	idx := topUserFrame(frames)
	if frame != nil {
		idx = *frame
	}
	if idx < 0 || idx >= len(frames) {
		return CaptureResult{}, fmt.Errorf("executor %d: %w: frame %d of a stack of %d (0 is the innermost)", executor, ErrNoFrame, idx, len(frames))
	}
	limit := h.cfg.CaptureMaxBytes
	if maxBytes > 0 && maxBytes < int64(limit) {
		limit = int(maxBytes)
	}
	path, body, err := h.runCapture(es, frames[idx].id, limit, st.label)
	if err != nil {
		es.logger().Info().Err(err).Msg("capture failed")
		return CaptureResult{}, err
	}
	es.logger().Info().Str("path", path).Msg("captured the stopped function and its arguments")
	n, _ := toInt(body["bytes"])
	fn, _ := body["function"].(string)
	task, _ := body["task"].(string)
	return CaptureResult{Path: path, Bytes: n, Function: worker.Clean(fn, worker.MaxTextRunes), Task: worker.Clean(task, 4*worker.MaxTextRunes), Executor: executor, Frame: idx,
		Summary: captureSummary(body)}, nil
}

// ServeControl answers control requests on l until ctx ends, then closes
// l and returns once every connection's goroutine is done. l must be
// reachable by the proxy's user only: the protocol has no token.
func (h *Hub) ServeControl(ctx context.Context, l net.Listener) error {
	return ServeControlWith(ctx, l, h.log, h.control)
}

// ServeControlWith serves the control protocol on l as ServeControl does,
// answering each request with answer(request, parse error): for a front
// end without a Hub (PyCharm mode answers every capture with why not).
func ServeControlWith(ctx context.Context, l net.Listener, log zerolog.Logger, answer func(ControlRequest, error) ControlAnswer) error {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, runs first) closed the connections
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := acceptretry.Accept(ctx, l, nil, func(err error, wait time.Duration) {
			log.Warn().Err(err).Dur("retry_in", wait).Msg("control socket: accept failed; still serving")
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("control socket: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			serveControlConn(c, answer)
		}()
	}
}

// serveControlConn answers the one request of a control connection.
func serveControlConn(c net.Conn, answer func(ControlRequest, error) ControlAnswer) {
	_ = c.SetReadDeadline(time.Now().Add(controlReadTimeout))
	req, err := readControlRequest(c)
	ans := answer(req, err)
	ans.clean()
	b, _ := json.Marshal(ans)
	_, _ = c.Write(append(b, '\n'))
	if err != nil {
		// Closing with unread input would reset the connection and lose
		// the answer: read a bounded rest first, briefly.
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}
}

// errBadRequest is a control request that is not one.
type errBadRequest struct{ why string }

func (e *errBadRequest) Error() string { return e.why }

// readControlRequest reads and strictly parses one request line.
func readControlRequest(r io.Reader) (ControlRequest, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxControlRequestBytes+1), 512)
	line, err := br.ReadBytes('\n')
	if len(line) > MaxControlRequestBytes {
		return ControlRequest{}, &errBadRequest{fmt.Sprintf("request over %d bytes", MaxControlRequestBytes)}
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return ControlRequest{}, &errBadRequest{fmt.Sprintf("reading the request: %v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var req ControlRequest
	if err := dec.Decode(&req); err != nil {
		return ControlRequest{}, &errBadRequest{fmt.Sprintf("not a control request: %v", err)}
	}
	if dec.More() {
		return ControlRequest{}, &errBadRequest{"more than one JSON value on the request line"}
	}
	return req, nil
}

// control answers one parsed request.
func (h *Hub) control(req ControlRequest, err error) ControlAnswer {
	if err != nil {
		return ControlAnswer{Error: err.Error(), Code: CodeBadRequest}
	}
	switch req.Op {
	case ControlWorkers:
		if req.Executor != 0 || req.Frame != nil || req.MaxBytes != 0 {
			return ControlAnswer{Error: ControlWorkers + " takes no executor, frame or maxBytes", Code: CodeBadRequest}
		}
		return ControlAnswer{Workers: h.StoppedWorkers()}
	case ControlCapture:
		if req.Executor == 0 {
			return ControlAnswer{Error: ControlCapture + " needs an executor", Code: CodeBadRequest}
		}
		res, err := h.CaptureStopped(req.Executor, req.Frame, req.MaxBytes)
		if err != nil {
			return ControlAnswer{Error: err.Error(), Code: controlCode(err)}
		}
		return ControlAnswer{Capture: &res}
	}
	return ControlAnswer{Error: fmt.Sprintf("unknown op %q: want %q or %q", req.Op, ControlWorkers, ControlCapture), Code: CodeBadRequest}
}

func controlCode(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{{ErrCaptureDisabled, CodeCaptureDisabled}, {ErrUnknownExecutor, CodeUnknownExecutor}, {ErrNotStopped, CodeNotStopped}, {ErrNoFrame, CodeNoFrame}} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeFailed
}

// ErrControlAnswer is a control request the proxy answered with an error;
// errors.As gives the *ControlError.
var ErrControlAnswer = errors.New("the proxy refused")

// ControlError is the proxy's error answer to a control request.
type ControlError struct{ Code, Message string }

func (e *ControlError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrControlAnswer) hold.
func (e *ControlError) Unwrap() error { return ErrControlAnswer }

// ControlCall sends req on the control socket at path and returns the
// answer; an error answer is a *ControlError. ctx bounds the whole call
// (a capture takes as long as the executor needs).
func ControlCall(ctx context.Context, path string, req ControlRequest) (ControlAnswer, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return ControlAnswer{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return ControlAnswer{}, err
	}
	if _, err := c.Write(append(b, '\n')); err != nil {
		return ControlAnswer{}, fmt.Errorf("control socket %s: %w", filepath.Base(path), err)
	}
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite() // the request is whole
	}
	raw, err := io.ReadAll(io.LimitReader(c, maxControlAnswerBytes+1))
	if ctx.Err() != nil {
		return ControlAnswer{}, ctx.Err()
	}
	if err != nil {
		return ControlAnswer{}, fmt.Errorf("control socket %s: %w", filepath.Base(path), err)
	}
	if len(raw) > maxControlAnswerBytes {
		return ControlAnswer{}, fmt.Errorf("control socket %s: answer over %d bytes", filepath.Base(path), maxControlAnswerBytes)
	}
	var ans ControlAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return ControlAnswer{}, fmt.Errorf("control socket %s: not an answer (%w): %q", filepath.Base(path), err, truncate(string(raw), 200))
	}
	ans.clean()
	if ans.Error != "" {
		return ans, &ControlError{Code: ans.Code, Message: ans.Error}
	}
	return ans, nil
}
