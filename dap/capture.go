package dap

import (
	"context"
	"fmt"

	"github.com/sparkdap/sparkdap/capture"
)

// CaptureCommand is sparkdap's own request to capture the user function of
// a stopped frame and the arguments it holds, for `sparkdap
// replay`. Arguments: "frameId" (required: the frame whose function is
// captured) and "maxBytes" (optional: a lower size cap than the proxy's).
// The answer's body: "path" (the capture file on this machine), "bytes",
// "function", "task". It runs only when asked: the arguments are the
// user's data.
const CaptureCommand = "sparkdapCapture"

// DefaultCaptureMaxBytes is Config.CaptureMaxBytes's default: the encoded
// data and the pickled function together, before base64.
const DefaultCaptureMaxBytes = capture.DefaultMaxBytes

// CaptureFormat names the capture file's layout (sparkdap_replay.py checks
// it).
const CaptureFormat = capture.Format

// ErrCapture is the class of errors a capture fails with.
var ErrCapture = capture.ErrCapture

// capture serves a sparkdapCapture request: on a goroutine of its own, as
// it takes several round trips to the executor.
func (h *Hub) capture(s *IDESession, req Message) {
	am := req.Arguments()
	maxBytes, _ := toInt(am["maxBytes"])
	h.captureFrame(s, req, CaptureCommand, am["frameId"], maxBytes, func(body map[string]any) Message { return newResponse(req, body) })
}

// captureFrame captures the frame frameID (as session s knows it) for
// req, which it answers with answer(the capture's body) or a failure
// whose message starts with what (the command as the user gave it).
// maxBytes > 0 lowers the proxy's cap. The capture runs on a goroutine of
// its own (goCallback): it takes several round trips to the executor.
func (h *Hub) captureFrame(s *IDESession, req Message, what string, frameID any, maxBytes int64, answer func(map[string]any) Message) {
	if _, ok := toInt(frameID); !ok {
		s.fail(req, "%s needs a frameId: the stopped frame whose function to capture", what)
		return
	}
	limit := h.cfg.CaptureMaxBytes
	if maxBytes > 0 && maxBytes < int64(limit) {
		limit = int(maxBytes)
	}
	args := map[string]any{"frameId": frameID}
	sid, found, err := h.ids.localize(args)
	if err != nil || !found {
		s.fail(req, "%s: frameId %v is not a frame of a stopped thread (%v)", what, frameID, err)
		return
	}
	frame, _ := toInt(args["frameId"])
	tx := h.lock()
	es := tx.executors[sid]
	if es == nil || !tx.exec(es).ready || (s.executor.Load() != nil && s.executor.Load() != es) {
		tx.unlock()
		s.fail(req, "%s: frameId %v does not belong to an executor of this session", what, frameID)
		return
	}
	label := tx.exec(es).label()
	tx.noteAsked(es)
	tx.unlock()
	h.goCallback(func() {
		path, body, err := h.runCapture(es, frame, limit, label)
		if err != nil {
			es.logger().Info().Err(err).Msg("capture failed")
			s.fail(req, "%v", err)
			return
		}
		es.logger().Info().Str("path", path).Msg("captured the stopped function and its arguments")
		s.reply(answer(body))
	})
}

// evaluator evaluates in one frame of one executor over DAP: the shared
// capture code's capture.Evaluator.
type evaluator struct {
	h     *Hub
	es    *ExecutorSession
	frame int64
}

// Eval runs one evaluate in the executor's frame and waits for it (at most
// the proxy's RequestTimeout, and no longer than ctx). Its value is the
// str's repr, in quotes.
func (e evaluator) Eval(ctx context.Context, expr string) (string, error) {
	type result struct {
		m   Message
		err error
	}
	ch := make(chan result, 1)
	// "clipboard": pydevd shows the whole string, not a shortened repr.
	e.es.request("evaluate", map[string]any{"expression": expr, "frameId": e.frame, "context": "clipboard"}, e.h.cfg.RequestTimeout,
		func(m Message, err error) { ch <- result{m, err} })
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		// The answer, when it comes, lands in ch's buffer and is dropped.
		return "", fmt.Errorf("%w: executor %d: %w", ErrCapture, e.es.id, context.Cause(ctx))
	}
	if r.err != nil {
		return "", fmt.Errorf("%w: executor %d: %w", ErrCapture, e.es.id, r.err)
	}
	if !r.m.Success() {
		return "", fmt.Errorf("%w: executor %d: evaluate: %s", ErrCapture, e.es.id, r.m.ErrorMessage())
	}
	v, _ := r.m.Body()["result"].(string)
	return v, nil
}

// runCapture fetches the capture from the executor and writes it to the
// capture directory. Runs on no lock.
func (h *Hub) runCapture(es *ExecutorSession, frame int64, maxBytes int, label string) (string, map[string]any, error) {
	res, err := capture.Run(context.Background(), evaluator{h, es, frame}, capture.Request{Frame: frame, MaxBytes: maxBytes,
		Dir: h.cfg.CaptureDir, Executor: es.id, Label: label, LocalFile: func(remote string) string { return h.captureLocalFile(es, remote) },
		LocalRoots: h.captureLocalRoots()})
	if err != nil {
		return "", nil, err
	}
	return res.Path, res.Body(), nil
}

// captureLocalFile is the capture's localFile, the file replay compiles
// the function from: only what path mapping gives (a file under --root, or
// a --map rule), never the executor's path as such, or a hostile executor
// would pick which file on this machine replay runs. In local mode the
// executor's path is under --root and maps to itself. Takes the Hub's lock.
func (h *Hub) captureLocalFile(es *ExecutorSession, remote string) string {
	tx := h.lock()
	defer tx.unlock()
	if h.cfg.Paths == nil || remote == "" {
		return ""
	}
	if r := tx.mapRemote(es, remote); r.Err == nil {
		return r.Mapping.Local
	}
	return ""
}

// captureLocalRoots is the capture's localRoots: the local project root
// path mapping maps executor code to. cfg is not written after start.
func (h *Hub) captureLocalRoots() []string {
	if h.cfg.Paths == nil {
		return nil
	}
	return []string{h.cfg.Paths.Root()}
}

// splitCapture is capture.Split.
func splitCapture(header map[string]any, payload []byte) (data, code []byte, err error) {
	return capture.Split(header, payload)
}
