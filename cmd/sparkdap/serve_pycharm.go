package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/capture"
	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/worker"
)

// pycharmFlags are serve's flags for presenting executors to PyCharm's
// "Python Debug Server" instead of a DAP client (see package pycharm).
type pycharmFlags struct {
	ide     string
	pycharm string
}

func addPyCharmFlags(fs *flag.FlagSet) *pycharmFlags {
	p := &pycharmFlags{}
	defKind(fs, &p.ide, "")
	defAddr(fs, &p.pycharm, "pycharm", defaultPyCharmAddr, "the proxy connects there")
	return p
}

func (p *pycharmFlags) enabled() bool { return p.ide == ideKindPyCharm }

// run serves executors to PyCharm until ctx ends. The proxy connects to
// PyCharm when the first selected worker says hello, so start PyCharm's
// debug server first; workers that come while it is not listening run
// undebugged.
func (p *pycharmFlags) listen(executors, token string, maxSessions int, paths *pathmap.Mapper, log zerolog.Logger, stderr io.Writer,
	captureDir string, captureMaxBytes int, maxStop time.Duration) (*pycharm.Proxy, error) {
	if err := warnIfPublic(p.pycharm, log); err != nil {
		return nil, fmt.Errorf("--pycharm: %w", err)
	}
	px, err := pycharm.Listen(pycharm.Config{
		Token: token, PyCharm: p.pycharm, MaxSessions: maxSessions, Paths: paths, Log: log, Summary: stderr,
		CaptureDir: captureDir, CaptureMaxBytes: captureMaxBytes, MaxStop: maxStop,
	}, executors)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "sparkdap: executor port %s; PyCharm's Python Debug Server expected at %s\n", px.Addr(), p.pycharm)
	return px, nil
}

// pycharmControl answers `sparkdap capture` for a PyCharm-mode proxy. Its
// workers are named by pid: the executor number of the control protocol
// is the worker's pid, and the stack is the one PyCharm was shown at the
// stop (the wrapper's frames left out, so frame 0 is user code).
func pycharmControl(px *pycharm.Proxy, captureDir string) func(dap.ControlRequest, error) dap.ControlAnswer {
	return func(req dap.ControlRequest, err error) dap.ControlAnswer {
		if err != nil {
			return dap.ControlAnswer{Error: err.Error(), Code: dap.CodeBadRequest}
		}
		switch req.Op {
		case dap.ControlWorkers:
			if req.Executor != 0 || req.Frame != nil || req.MaxBytes != 0 {
				return dap.ControlAnswer{Error: dap.ControlWorkers + " takes no executor, frame or maxBytes", Code: dap.CodeBadRequest}
			}
			var out []dap.StoppedWorker
			for _, st := range px.Stopped() {
				w := dap.StoppedWorker{Executor: uint64(st.PID), Label: st.Label, Thread: pycharm.ThreadNumber(st.Thread),
					ThreadName: st.Name, Frames: []dap.WorkerFrame{}, Top: -1}
				for _, f := range st.Frames {
					w.Frames = append(w.Frames, dap.WorkerFrame{Name: f.Name, File: f.File, Line: f.Line})
				}
				if len(w.Frames) > 0 {
					w.Top = 0
				}
				out = append(out, w)
			}
			return dap.ControlAnswer{Workers: out}
		case dap.ControlCapture:
			if req.Executor == 0 {
				return dap.ControlAnswer{Error: dap.ControlCapture + " needs an executor", Code: dap.CodeBadRequest}
			}
			if captureDir == "" {
				return dap.ControlAnswer{Error: dap.ErrCaptureDisabled.Error(), Code: dap.CodeCaptureDisabled}
			}
			res, idx, err := px.CaptureStopped(context.Background(), int64(req.Executor), req.Frame, req.MaxBytes)
			if err != nil {
				code := dap.CodeFailed
				switch {
				case errors.Is(err, pycharm.ErrWorkerGone) && !errors.Is(err, capture.ErrCapture):
					code = dap.CodeUnknownExecutor
				case errors.Is(err, pycharm.ErrNotStopped):
					code = dap.CodeNotStopped
				case errors.Is(err, pycharm.ErrNoFrame):
					code = dap.CodeNoFrame
				}
				return dap.ControlAnswer{Error: err.Error(), Code: code}
			}
			return dap.ControlAnswer{Capture: &dap.CaptureResult{Path: res.Path, Bytes: int64(res.Bytes),
				Function: worker.Clean(res.Function, worker.MaxTextRunes), Task: worker.Clean(res.Task, 4*worker.MaxTextRunes),
				Executor: uint64(res.PID), Frame: idx, Summary: res.Summary}}
		}
		return dap.ControlAnswer{Error: fmt.Sprintf("unknown op %q: want %q or %q", req.Op, dap.ControlWorkers, dap.ControlCapture), Code: dap.CodeBadRequest}
	}
}
