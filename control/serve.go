package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/acceptretry"
	"github.com/sparkdap/sparkdap/selection"
)

// Backend is a front end as the control socket serves it. Serve calls its
// methods on a goroutine per connection, holding no lock of its own: they
// may wait for executors.
type Backend interface {
	// StoppedWorkers lists the workers stopped in the debugger, each with
	// its stopped thread's stack, in a stable order.
	StoppedWorkers(ctx context.Context) []StoppedWorker
	// CaptureStopped captures the frame at index frame (nil: the innermost
	// of user code) of stopped worker executor's stack, as the Debug
	// Console's !capture does; maxBytes > 0 lowers the size cap. Its
	// errors are classed by the Err* errors of this package (errors.Is),
	// CodeFailed when none.
	CaptureStopped(ctx context.Context, executor uint64, frame *int, maxBytes int64) (CaptureResult, error)
	// Board is the live selection and the workers that follow it.
	Board() *selection.Board
}

// OutputCounter is a Backend that counts the output of the workers whose
// debugger is connected: `sparkdap workers` lists it.
type OutputCounter interface {
	// OutputBytes is the stdout and stderr text each worker sent the IDE,
	// by host and pid.
	OutputBytes() map[WorkerID]int64
}

// SessionLister is a Backend that says which workers' debuggers are
// connected: `sparkdap workers` and the view name them by their
// Executor, so a running worker can be paused or detached.
type SessionLister interface {
	// Sessions is the Executor of each worker whose debugger is
	// connected, by host and pid.
	Sessions() map[WorkerID]uint64
}

// WorkerID names a worker process: its host and pid, as its hello said.
type WorkerID struct {
	Host string
	PID  int64
}

// Classes of a Backend's errors, each answered with its code.
var (
	ErrCaptureDisabled = errors.New("this proxy takes no captures: it was started with an empty --capture-dir")
	ErrUnknownExecutor = errors.New("no executor session with that id")
	ErrNotStopped      = errors.New("the executor is not stopped")
	ErrNoFrame         = errors.New("no such frame")
	// ErrUnsupported: the front end cannot do that (CodeUnsupported).
	ErrUnsupported = errors.New("not supported by this front end")
)

// WithClass is err answered as class (one of the Err* errors): errors.Is
// holds for both, and its message is err's. For a front end whose own
// errors say it in their own words.
func WithClass(err, class error) error { return &classed{err, class} }

type classed struct{ err, class error }

func (c *classed) Error() string   { return c.err.Error() }
func (c *classed) Unwrap() []error { return []error{c.err, c.class} }

// readTimeout bounds how long a connection may take to send its request.
const readTimeout = 10 * time.Second

// Serve answers control requests on l for b until ctx ends, then closes l
// and returns once every connection's goroutine is done. l must be
// reachable by the proxy's user only (Listen): the protocol has no token.
func Serve(ctx context.Context, l net.Listener, log zerolog.Logger, b Backend) error {
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
			serveConn(ctx, c, b)
		}()
	}
}

// serveConn answers the one request of a connection.
func serveConn(ctx context.Context, c net.Conn, b Backend) {
	_ = c.SetReadDeadline(time.Now().Add(readTimeout))
	req, err := ReadRequest(c)
	var ans Answer
	if err != nil {
		ans = Answer{Error: err.Error(), Code: CodeBadRequest}
	} else {
		ans = answer(ctx, b, req)
	}
	ans.clean()
	raw, _ := json.Marshal(ans)
	_, _ = c.Write(append(raw, '\n'))
	if err != nil {
		// Closing with unread input would reset the connection and lose
		// the answer: read a bounded rest first, briefly.
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}
}

// answer answers one parsed request with b: the operations, their arguments
// checked, b's errors classed into codes. The answer is not yet cleaned
// (Serve cleans it).
func answer(ctx context.Context, b Backend, req Request) Answer {
	if why := checkArgs(req); why != "" {
		return Answer{Error: why, Code: CodeBadRequest}
	}
	switch req.Op {
	case OpWorkers:
		return Answer{Workers: b.StoppedWorkers(ctx)}
	case OpSelect, OpSelection, OpKnownWorkers:
		return answerSelection(ctx, b, req)
	case OpCapture:
		res, err := b.CaptureStopped(ctx, req.Executor, req.Frame, req.MaxBytes)
		if err != nil {
			return Answer{Error: err.Error(), Code: code(err)}
		}
		return Answer{Capture: &res}
	}
	return answerSteer(ctx, b, req)
}

// Ask answers req with b as Serve would, without a socket (for front
// ends' tests and in-process callers). Its error is ErrBadRequest's
// answer as an error, nil otherwise: the answer carries the rest.
func Ask(ctx context.Context, b Backend, req Request) (Answer, error) {
	ans := answer(ctx, b, req)
	ans.clean()
	if ans.Code == CodeBadRequest {
		return ans, &badRequest{ans.Error}
	}
	return ans, nil
}

// code is the answer code of a Backend's error.
func code(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{{ErrCaptureDisabled, CodeCaptureDisabled}, {ErrUnknownExecutor, CodeUnknownExecutor}, {ErrNotStopped, CodeNotStopped}, {ErrNoFrame, CodeNoFrame},
		{ErrUnsupported, CodeUnsupported}} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeFailed
}
