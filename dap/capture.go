package dap

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/internal/safefile"
	pysrc "github.com/sparkdap/sparkdap/workerwrap/python"
)

// CaptureCommand is sparkdap's own request to capture the user function of
// a stopped frame and the arguments it holds (issue 17), for `sparkdap
// replay`. Arguments: "frameId" (required: the frame whose function is
// captured) and "maxBytes" (optional: a lower size cap than the proxy's).
// The answer's body: "path" (the capture file on this machine), "bytes",
// "function", "task". It runs only when asked: the arguments are the
// user's data.
const CaptureCommand = "sparkdapCapture"

// DefaultCaptureMaxBytes is Config.CaptureMaxBytes's default: the pickled
// data and function together, before base64.
const DefaultCaptureMaxBytes = 64 << 20

// CaptureFormat names the capture file's layout (sparkdap_replay.py checks
// it).
const CaptureFormat = "sparkdap-capture/2"

// captureChunkBytes is how much of the pickle one evaluate fetches: its
// base64 (a third more) stays far below MaxMessageBytes.
const captureChunkBytes = 512 << 10

// captureModule is the name the capture code gets in the worker's
// sys.modules, one per source version so that a worker never runs an old
// copy.
var captureModule = func() string {
	sum := sha256.Sum256([]byte(pysrc.CaptureSource))
	return "_sparkdap_capture_" + hex.EncodeToString(sum[:6])
}()

// ErrCapture is the class of errors a capture fails with.
var ErrCapture = errors.New("capture failed")

// pyStr is s as a Python string literal: a JSON string is one (JSON's
// escapes are Python's too).
func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// captureStartExpr loads the capture code into the worker (once) and
// starts a capture of frame; pydevd evaluates it in that frame, on the
// stopped thread.
func captureStartExpr(frame int64, maxBytes int) string {
	mod := pyStr(captureModule)
	return fmt.Sprintf("(__import__('sys').modules.get(%s) or (lambda m: (__import__('sys').modules.__setitem__(%s, m), "+
		"exec(compile(%s, '<sparkdap capture>', 'exec'), m.__dict__), m)[2])(__import__('types').ModuleType(%s))).start(%d, %d, %d)",
		mod, mod, pyStr(pysrc.CaptureSource), mod, frame, maxBytes, captureChunkBytes)
}

func captureCallExpr(call string) string {
	return fmt.Sprintf("__import__('sys').modules[%s].%s", pyStr(captureModule), call)
}

// captureStart is start()'s answer.
type captureStart struct {
	Error  string         `json:"error"`
	ID     int64          `json:"id"`
	Chunks int            `json:"chunks"`
	Header map[string]any `json:"header"`
}

// evalString reads a base64 str result: pydevd shows a str as its repr,
// which for base64 text is the text in quotes.
func evalString(m Message) ([]byte, error) {
	r, _ := m.Body()["result"].(string)
	if len(r) < 2 || (r[0] != '\'' && r[0] != '"') || r[len(r)-1] != r[0] {
		return nil, fmt.Errorf("%w: the executor answered %q, not base64 text", ErrCapture, truncate(r, 200))
	}
	b, err := base64.StdEncoding.DecodeString(r[1 : len(r)-1])
	if err != nil {
		return nil, fmt.Errorf("%w: the executor's answer is not base64: %v", ErrCapture, err)
	}
	return b, nil
}

// capture serves a sparkdapCapture request: on a goroutine of its own, as
// it takes several round trips to the executor.
func (h *Hub) capture(s *IDESession, req Message) {
	args := deepCopy(req.Arguments())
	am, _ := args.(map[string]any)
	if _, ok := toInt(am["frameId"]); !ok {
		s.fail(req, "%s needs a frameId: the stopped frame whose function to capture", CaptureCommand)
		return
	}
	maxBytes := h.cfg.CaptureMaxBytes
	if v, ok := toInt(am["maxBytes"]); ok && v > 0 && int(v) < maxBytes {
		maxBytes = int(v)
	}
	sid, found, err := h.ids.localize(args)
	if err != nil || !found {
		s.fail(req, "%s: frameId %v is not a frame of a stopped thread (%v)", CaptureCommand, am["frameId"], err)
		return
	}
	frame, _ := toInt(am["frameId"])
	h.mu.Lock()
	es := h.executors[sid]
	if es == nil || !es.ready || (s.executor != nil && s.executor != es) {
		h.mu.Unlock()
		s.fail(req, "%s: frameId %v does not belong to an executor of this session", CaptureCommand, req.Arguments()["frameId"])
		return
	}
	label := es.labelLocked()
	h.mu.Unlock()
	h.goCallback(func() {
		path, body, err := h.runCapture(es, frame, maxBytes, label)
		if err != nil {
			es.logger().Info().Err(err).Msg("capture failed")
			s.fail(req, "%v", err)
			return
		}
		es.logger().Info().Str("path", path).Msg("captured the stopped function and its arguments")
		s.reply(newResponse(req, body))
	})
}

// evalIn runs one evaluate in the executor's frame and waits for it.
func (h *Hub) evalIn(es *ExecutorSession, frame int64, expr string) (Message, error) {
	type result struct {
		m   Message
		err error
	}
	ch := make(chan result, 1)
	// "clipboard": pydevd shows the whole string, not a shortened repr.
	es.request("evaluate", map[string]any{"expression": expr, "frameId": frame, "context": "clipboard"}, h.cfg.RequestTimeout,
		func(m Message, err error) { ch <- result{m, err} })
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("%w: executor %d: %w", ErrCapture, es.id, r.err)
	}
	if !r.m.Success() {
		return nil, fmt.Errorf("%w: executor %d: evaluate: %s", ErrCapture, es.id, r.m.ErrorMessage())
	}
	return r.m, nil
}

// runCapture fetches the capture from the executor and writes it to the
// capture directory. Runs on no lock.
func (h *Hub) runCapture(es *ExecutorSession, frame int64, maxBytes int, label string) (string, map[string]any, error) {
	if h.cfg.CaptureDir == "" {
		return "", nil, fmt.Errorf("%w: this proxy has no capture directory", ErrCapture)
	}
	m, err := h.evalIn(es, frame, captureStartExpr(frame, maxBytes))
	if err != nil {
		return "", nil, err
	}
	raw, err := evalString(m)
	if err != nil {
		return "", nil, err
	}
	var st captureStart
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", nil, fmt.Errorf("%w: the executor's answer: %v", ErrCapture, err)
	}
	if st.Error != "" {
		return "", nil, fmt.Errorf("%w: %s", ErrCapture, st.Error)
	}
	defer func() {
		// The executor holds the bytes until told: drop them whatever
		// happened here.
		_, _ = h.evalIn(es, frame, captureCallExpr(fmt.Sprintf("drop(%d)", st.ID)))
	}()
	var payload []byte
	for i := 0; i < st.Chunks; i++ {
		m, err := h.evalIn(es, frame, captureCallExpr(fmt.Sprintf("chunk(%d, %d)", st.ID, i)))
		if err != nil {
			return "", nil, err
		}
		b, err := evalString(m)
		if err != nil {
			return "", nil, err
		}
		payload = append(payload, b...)
		if len(payload) > maxBytes {
			return "", nil, fmt.Errorf("%w: the executor sent more than the cap of %d bytes", ErrCapture, maxBytes)
		}
	}
	if want, _ := toInt(st.Header["payloadBytes"]); int(want) != len(payload) {
		return "", nil, fmt.Errorf("%w: got %d bytes of the %d the executor announced", ErrCapture, len(payload), want)
	}
	doc := st.Header
	data, code, err := splitCapture(doc, payload)
	if err != nil {
		return "", nil, err
	}
	fn, _ := doc["function"].(map[string]any)
	remote, _ := fn["file"].(string)
	local := h.captureLocalFile(es, remote)
	name, _ := fn["name"].(string)
	doc["format"] = CaptureFormat
	doc["contains"] = fmt.Sprintf("the arguments of the function %s as executor %d held them when it stopped in it, with the closure values "+
		"and the plain-data globals it reads (data: %v pickle, base64; your data, as the executor had it); the names of the modules, "+
		"functions and classes it refers to (references); and the function itself pickled by value (code: %v pickle, base64), "+
		"which sparkdap replay unpickles only with --trust-captured-code and otherwise takes from your local source (localFile, importable)",
		name, es.id, doc["pickler"], doc["pickler"])
	doc["task"] = label
	doc["executor"] = es.id
	doc["capturedAt"] = time.Now().UTC().Format(time.RFC3339)
	doc["localFile"] = local
	doc["data"] = base64.StdEncoding.EncodeToString(data)
	doc["code"] = base64.StdEncoding.EncodeToString(code)
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	if err := os.MkdirAll(h.cfg.CaptureDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	path := filepath.Join(h.cfg.CaptureDir, fmt.Sprintf("%s-e%d-%s.json", safeName(name),
		es.id, time.Now().UTC().Format("20060102T150405.000")))
	if err := safefile.WriteFile(path, out, 0o600); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	return path, map[string]any{"path": path, "bytes": len(payload), "function": name, "task": label}, nil
}

// captureLocalFile is the capture's localFile, the file replay compiles
// the function from: only what path mapping gives (a file under --root, or
// a --map rule), never the executor's path as such, or a hostile executor
// would pick which file on this machine replay runs. In local mode the
// executor's path is under --root and maps to itself. Takes h.mu.
func (h *Hub) captureLocalFile(es *ExecutorSession, remote string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfg.Paths == nil || remote == "" {
		return ""
	}
	if r := h.mapRemoteLocked(es, remote); r.Err == nil {
		return r.Mapping.Local
	}
	return ""
}

// splitCapture cuts the executor's bytes into DATA and CODE at the
// header's dataBytes: they are kept apart in the file so that replay can
// unpickle the data without the code.
func splitCapture(header map[string]any, payload []byte) (data, code []byte, err error) {
	n, ok := toInt(header["dataBytes"])
	if !ok || n < 0 || int(n) > len(payload) {
		return nil, nil, fmt.Errorf("%w: the executor's header says the data is %v of %d bytes", ErrCapture, header["dataBytes"], len(payload))
	}
	return payload[:n], payload[n:], nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// safeName makes a function name ("<lambda>") part of a file name.
func safeName(s string) string {
	s = strings.Trim(unsafeName.ReplaceAllString(s, "_"), "_.")
	if s == "" {
		return "capture"
	}
	return truncate(s, 60)
}
