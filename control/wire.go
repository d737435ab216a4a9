package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/selection"
)

// Operations.
const (
	// OpWorkers lists the stopped workers (Answer.Workers).
	OpWorkers = "workers"
	// OpCapture captures one stopped worker's frame (Answer.Capture).
	OpCapture = "capture"
	// OpSelect changes which tasks debug from now on (Request.Selection,
	// or Request.AsSubmitted); Answer.Selection is the new one and
	// Answer.Sent how many workers it went to.
	OpSelect = "select"
	// OpSelection tells the current selection (Answer.Selection).
	OpSelection = "selection"
	// OpKnownWorkers lists every worker that follows the selection, with
	// its task, and where it is stopped, and the last workers that went
	// away (Answer.Known, at most Request.MaxRows of them, stopped
	// first: sortRows), how many each state has (Answer.Counts), the
	// current selection and the exception groups.
	OpKnownWorkers = "known-workers"
	// OpContinue resumes the stopped worker Request.Executor names, all
	// its threads, as the IDE's continue does (a Steerer's).
	OpContinue = "continue"
	// OpPause pauses the worker Request.Executor names, all its threads
	// (a Steerer's).
	OpPause = "pause"
	// OpDetach lets the worker Request.Executor names run on undebugged:
	// its breakpoints removed, resumed, not shown again (a Steerer's).
	OpDetach = "detach"
	// OpContinueAll resumes every stopped worker; Answer.Sent is how many
	// (a Steerer's).
	OpContinueAll = "continue-all"
)

// MaxKnownRows is the most rows Request.MaxRows may ask for.
const MaxKnownRows = 5000

// MaxRequestBytes bounds one request: it names an operation and a few
// numbers.
const MaxRequestBytes = 4 << 10

// maxAnswerBytes bounds what Call reads back: a list of stopped workers
// with their stacks.
const maxAnswerBytes = 8 << 20

// Request is one request on the control socket.
type Request struct {
	Op string `json:"op"`
	// Executor is the worker to capture (OpCapture), continue, pause or
	// detach, as the lists name it (StoppedWorker.Executor,
	// KnownWorker.Executor).
	Executor uint64 `json:"executor,omitempty"`
	// Frame is the index of the frame to capture in the stopped thread's
	// stack, 0 the innermost; nil: the innermost frame of user code.
	Frame *int `json:"frame,omitempty"`
	// MaxBytes, if > 0, lowers the proxy's size cap for this capture.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// Selection is the selection OpSelect makes current.
	Selection *selection.Selection `json:"selection,omitempty"`
	// AsSubmitted, with OpSelect, goes back to the selection the job was
	// submitted with.
	AsSubmitted bool `json:"asSubmitted,omitempty"`
	// Task, with OpSelect instead of a selection, asks for the next stop
	// at an exception of the task of this attempt id to be shown, though
	// its exception group has one shown already.
	Task *int64 `json:"task,omitempty"`
	// MaxRows, with OpKnownWorkers, bounds Answer.Known: 0 for every
	// row, else 1 to MaxKnownRows.
	MaxRows int `json:"maxRows,omitempty"`
}

// Answer is the answer to a Request: Error (and Code) when it failed.
type Answer struct {
	Error string `json:"error,omitempty"`
	// Code classifies Error: one of the Code* constants.
	Code    string          `json:"code,omitempty"`
	Workers []StoppedWorker `json:"workers,omitempty"`
	Capture *CaptureResult  `json:"capture,omitempty"`
	// Selection is the current selection (OpSelect, OpSelection); nil
	// with AsSubmitted: the one the job was submitted with.
	Selection   *selection.Selection `json:"selection,omitempty"`
	AsSubmitted bool                 `json:"asSubmitted,omitempty"`
	// Sent is how many workers a new selection went to (OpSelect), or
	// how many stopped workers were resumed (OpContinueAll).
	Sent  int           `json:"sent,omitempty"`
	Known []KnownWorker `json:"known,omitempty"`
	// More is how many rows Request.MaxRows left out of Known; Counts
	// counts every row, those left out too (OpKnownWorkers).
	More   int     `json:"more,omitempty"`
	Counts *Counts `json:"counts,omitempty"`
	// Exceptions are the exception groups (OpKnownWorkers).
	Exceptions []selection.ExceptionGroup `json:"exceptions,omitempty"`
	// Version is the answering serve's sparkdap release (OpKnownWorkers),
	// for comparing with each worker's (KnownWorker.SparkdapVersion): a
	// job keeps the wrapper it was submitted with across an upgrade.
	Version string `json:"version,omitempty"`
}

// Counts counts the workers OpKnownWorkers lists, by KnownWorker.State.
type Counts struct {
	Workers  int `json:"workers"`
	Running  int `json:"running"`
	Stopped  int `json:"stopped"`
	Idle     int `json:"idle"`
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
}

// States of KnownWorker.State.
const (
	// StateStopped: stopped in the debugger (KnownWorker.Stopped is set).
	StateStopped = "stopped"
	// StateRunning: a task runs.
	StateRunning = "running"
	// StateIdle: the worker is between tasks.
	StateIdle = "idle"
	// StateFailed: neither stopped nor running, and its last task raised
	// (KnownWorker.Exception): the task is in an exception group. PySpark
	// ends a worker whose task raised, so it is usually gone too.
	StateFailed = "failed"
	// StateFinished: the worker process is gone (its watch connection
	// closed), and its last task did not raise as far as the proxy saw.
	StateFinished = "finished"
)

// KnownWorker is one worker as `sparkdap workers` lists it: what it
// reported on its watch connection, and where it is stopped.
type KnownWorker struct {
	selection.Worker
	// Stopped, for a worker stopped in the debugger: the innermost frame
	// of user code (or the innermost frame). Executor, for a worker whose
	// debugger is connected (and a stopped one's always), names it in an
	// OpCapture, OpContinue, OpPause or OpDetach request.
	Stopped  *WorkerFrame `json:"stopped,omitempty"`
	Executor uint64       `json:"executor,omitempty"`
	// OutputBytes, for a worker whose debugger is connected, counts the
	// stdout and stderr text it sent the IDE (nil: not counted).
	OutputBytes *int64 `json:"outputBytes,omitempty"`
	// State is one of the State* constants.
	State string `json:"state"`
	// Exception is the type of the exception it is stopped at, or that
	// its last task raised; "" for none known.
	Exception string `json:"exception,omitempty"`
	// Unwatched marks a stopped worker that follows no selection watch (a
	// wrapper without live selection, or one the Board refused): the
	// proxy knows only what its debugger says, so its task and its
	// SparkdapVersion are unknown, not empty.
	Unwatched bool `json:"unwatched,omitempty"`
}

// Codes of Answer.Code, one per error class a client tells apart.
const (
	CodeBadRequest      = "bad-request"
	CodeCaptureDisabled = "capture-disabled"
	CodeUnknownExecutor = "unknown-executor"
	CodeNotStopped      = "not-stopped"
	CodeNoFrame         = "no-frame"
	// CodeUnsupported: the front end cannot do that operation.
	CodeUnsupported = "unsupported"
	CodeFailed      = "failed"
)

// StoppedWorker is one worker stopped in the debugger, as `sparkdap
// capture` lists it.
type StoppedWorker struct {
	// Executor names the worker in an OpCapture request: the DAP front
	// end's executor session id, the PyCharm front end's worker pid.
	Executor uint64 `json:"executor"`
	// Host and PID are the worker's, as its hello said.
	Host       string `json:"host,omitempty"`
	PID        int64  `json:"pid,omitempty"`
	Label      string `json:"label"`
	Thread     int64  `json:"thread"` // pydevd's id of the stopped thread
	ThreadName string `json:"threadName,omitempty"`
	// Frames is the stopped thread's stack, innermost first; Top indexes
	// its innermost frame of user code (-1: none).
	Frames []WorkerFrame `json:"frames"`
	Top    int           `json:"top"`
	// StackError says why Frames is empty.
	StackError string `json:"stackError,omitempty"`
	// Exception is the type of the exception it stopped at, if it did.
	Exception string `json:"exception,omitempty"`
}

// WorkerFrame is one frame of a stopped worker's stack.
type WorkerFrame struct {
	Name string `json:"name"`
	// File is the local file when the path maps to one, else the
	// executor's path.
	File     string `json:"file"`
	Line     int64  `json:"line"`
	Plumbing bool   `json:"plumbing,omitempty"`
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

// clean cleans every string of a (see the package doc), each capped at
// admission.MaxMessageRunes: a path, or an error message with the executor's
// words in it.
func (a *Answer) clean() { admission.CleanAll(a, admission.MaxMessageRunes) }

// ErrBadRequest is a request that is not one: not a line of JSON, too
// long, a field Request lacks, an unknown operation or arguments it does
// not take.
var ErrBadRequest = errors.New("bad control request")

// badRequest is an ErrBadRequest saying why.
type badRequest struct{ why string }

func (e *badRequest) Error() string        { return e.why }
func (e *badRequest) Is(target error) bool { return target == ErrBadRequest }

// ReadRequest reads and strictly parses one request line from r, reading
// no more than MaxRequestBytes and a newline. Its errors are ErrBadRequest
// (errors.Is).
func ReadRequest(r io.Reader) (Request, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxRequestBytes+1), 512)
	line, err := br.ReadBytes('\n')
	if len(line) > MaxRequestBytes {
		return Request{}, &badRequest{fmt.Sprintf("request over %d bytes", MaxRequestBytes)}
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return Request{}, &badRequest{fmt.Sprintf("reading the request: %v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Request{}, &badRequest{fmt.Sprintf("not a control request: %v", err)}
	}
	if dec.More() {
		return Request{}, &badRequest{"more than one JSON value on the request line"}
	}
	return req, nil
}
