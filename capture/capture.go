package capture

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	pysrc "github.com/sparkdap/sparkdap/capture/python"
	"github.com/sparkdap/sparkdap/internal/safefile"
)

// Format names the capture file's layout (sparkdap_replay.py checks it).
const Format = "sparkdap-capture/3"

// DefaultMaxBytes is the default cap on a capture: the encoded data and
// the pickled function together, before base64.
const DefaultMaxBytes = 64 << 20

// DefaultTimeout bounds a whole capture (start, every chunk, drop's
// request): an executor that answers slowly, or with more chunks than
// announced, cannot keep the proxy fetching.
const DefaultTimeout = 5 * time.Minute

// ChunkBytes is how much of the capture one evaluate fetches: its base64
// (a third more) stays far below either wire's message limit.
const ChunkBytes = 512 << 10

// MaxHeaderBytes bounds the executor's header (the JSON object that
// describes the call) as it arrives: it names a function and its
// parameters, references and notes, far below this.
const MaxHeaderBytes = 1 << 20

// MaxHeaderDepth bounds how deep the executor's header nests (a scalar is
// 0, the header object 1). The header sparkdap writes nests 3 deep; replay
// reads the file with a recursive parser, which a header nested thousands
// deep would overflow.
const MaxHeaderDepth = 32

// ErrCapture is the class of errors a capture fails with.
var ErrCapture = errors.New("capture failed")

// ErrNoDir refuses a capture on a proxy without a capture directory.
var ErrNoDir = fmt.Errorf("%w: this proxy has no capture directory", ErrCapture)

// Evaluator evaluates a Python expression in the stopped frame being
// captured, on its stopped thread, and returns the value of the str it
// yields: the text itself, or its repr in quotes (DAP's evaluate shows
// that). Implementations bound the wait and fail with an error when the
// executor does not answer.
type Evaluator interface {
	Eval(ctx context.Context, expr string) (string, error)
}

// Request says what to capture and where to write it.
type Request struct {
	// Frame is the frame's id as the executor's pydevd knows it (DAP: its
	// frameId; pydevd's line protocol: id(frame)).
	Frame int64
	// MaxBytes caps the captured call (DefaultMaxBytes when <= 0).
	MaxBytes int
	// Timeout bounds the whole capture (DefaultTimeout when <= 0).
	Timeout time.Duration
	// Dir is the capture directory; empty refuses with ErrNoDir.
	Dir string
	// Executor names the executor in the file (the DAP proxy's executor
	// number, PyCharm mode's worker pid); Label is its task label.
	Executor any
	Label    string
	// LocalFile maps the function's executor file to a local one through
	// path mapping, "" when it has none; nil maps nothing. Never the
	// executor's path as such: a hostile executor would pick which file on
	// this machine replay runs.
	LocalFile func(remote string) string
	// LocalRoots are the local directories the proxy maps executor code
	// to (serve's --root): replay imports the job's other modules (its
	// --py-files) from there, as the executor did from its copies.
	LocalRoots []string
}

// Result is a written capture.
type Result struct {
	Path string
	// Bytes is the size of the file at Path, as ls shows it: the message
	// names the file, so the size given beside it is the file's, not the
	// captured data's alone.
	Bytes    int
	Function string
	Task     string
	// Notes are the executor's notes on the capture (a value replay needs
	// --trust-captured-code for, a global left out), cleaned of control
	// characters and bounded in number and length: the executor wrote them.
	Notes []string
}

// Body is the result as the DAP answer's body (and Summary's input).
func (r Result) Body() map[string]any {
	b := map[string]any{"path": r.Path, "bytes": r.Bytes, "function": r.Function, "task": r.Task}
	if len(r.Notes) > 0 {
		b["notes"] = r.Notes
	}
	return b
}

// module is the name the capture code gets in the worker's sys.modules,
// one per source version so that a worker never runs an old copy.
var module = func() string {
	sum := sha256.Sum256([]byte(pysrc.CaptureSource))
	return "_sparkdap_capture_" + hex.EncodeToString(sum[:6])
}()

// pyStr is s as a Python string literal: a JSON string is one (JSON's
// escapes are Python's too). It holds no tab or newline, which pydevd's
// line protocol could not carry.
func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// StartExpr loads the capture code into the worker (once) and starts a
// capture of frame; pydevd evaluates it in that frame, on the stopped
// thread. Its value is base64 JSON (start()'s answer).
func StartExpr(frame int64, maxBytes int) string {
	mod := pyStr(module)
	return fmt.Sprintf("(__import__('sys').modules.get(%s) or (lambda m: (__import__('sys').modules.__setitem__(%s, m), "+
		"exec(compile(%s, '<sparkdap capture>', 'exec'), m.__dict__), m)[2])(__import__('types').ModuleType(%s))).start(%d, %d, %d)",
		mod, mod, pyStr(pysrc.CaptureSource), mod, frame, maxBytes, ChunkBytes)
}

// CallExpr calls the loaded capture code: "chunk(ID, I)", "drop(ID)".
func CallExpr(call string) string {
	return fmt.Sprintf("__import__('sys').modules[%s].%s", pyStr(module), call)
}

// Decode reads a base64 str value, bare or as its repr in quotes.
func Decode(v string) ([]byte, error) {
	s := v
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: the executor answered %q, not base64 text: %v", ErrCapture, truncate(v, 200), err)
	}
	return b, nil
}

// start is start()'s answer.
type start struct {
	Error  string          `json:"error"`
	ID     int64           `json:"id"`
	Chunks int             `json:"chunks"`
	Header json.RawMessage `json:"header"`
}

// CheckHeader refuses an executor's header that is not a JSON object, is
// over MaxHeaderBytes or nests deeper than MaxHeaderDepth, before any of
// it is decoded into memory or written to a file.
func CheckHeader(raw []byte) error {
	if len(raw) > MaxHeaderBytes {
		return fmt.Errorf("%w: the executor's header is %d bytes, over the limit of %d", ErrCapture, len(raw), MaxHeaderBytes)
	}
	if !json.Valid(raw) {
		return fmt.Errorf("%w: the executor's header is not JSON", ErrCapture)
	}
	if d := jsonDepth(raw); d > MaxHeaderDepth {
		return fmt.Errorf("%w: the executor's header nests %d deep, over the limit of %d", ErrCapture, d, MaxHeaderDepth)
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: the executor's header is not a JSON object", ErrCapture)
	}
	return nil
}

// jsonDepth is how deep valid JSON nests: the most arrays and objects open
// at once, counted in one pass outside strings.
func jsonDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// stopped is why ctx ended, as an ErrCapture.
func stopped(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, ErrCapture) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCapture, context.Cause(ctx))
}

// evalBytes evaluates expr and decodes its base64 value. Past Run's time
// bound it fails with the bound's error, whatever the evaluator did.
func evalBytes(ctx context.Context, ev Evaluator, expr string) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, stopped(ctx)
	}
	v, err := ev.Eval(ctx, expr)
	if ctx.Err() != nil {
		return nil, stopped(ctx)
	}
	if err != nil {
		if errors.Is(err, ErrCapture) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	return Decode(v)
}

// MaxChunks is how many chunks a capture of maxBytes takes at most.
func MaxChunks(maxBytes int) int { return (maxBytes + ChunkBytes - 1) / ChunkBytes }

// Run fetches the capture through ev and writes it to req.Dir. It waits
// for the executor (several round trips, bounded in number by the size
// cap and in time by req.Timeout): call it on no lock.
func Run(ctx context.Context, ev Evaluator, req Request) (Result, error) {
	if req.Dir == "" {
		return Result{}, ErrNoDir
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w: the executor did not send the capture within %v", ErrCapture, timeout))
	defer cancel()
	raw, err := evalBytes(ctx, ev, StartExpr(req.Frame, maxBytes))
	if err != nil {
		return Result{}, err
	}
	var st start
	if err := json.Unmarshal(raw, &st); err != nil {
		return Result{}, fmt.Errorf("%w: the executor's answer: %v", ErrCapture, err)
	}
	if st.Error != "" {
		return Result{}, fmt.Errorf("%w: %s", ErrCapture, st.Error)
	}
	defer func() {
		// The executor holds the bytes until told: drop them whatever
		// happened here.
		_, _ = ev.Eval(context.WithoutCancel(ctx), CallExpr(fmt.Sprintf("drop(%d)", st.ID)))
	}()
	header, err := decodeHeader(st.Header)
	if err != nil {
		return Result{}, err
	}
	want, ok := toInt(header["payloadBytes"])
	if !ok || want < 0 || want > int64(maxBytes) {
		return Result{}, fmt.Errorf("%w: the executor announced %v bytes, over the cap of %d bytes", ErrCapture, header["payloadBytes"], maxBytes)
	}
	if st.Chunks < 0 || st.Chunks > MaxChunks(maxBytes) || int64(st.Chunks) > want || (want > 0 && st.Chunks == 0) {
		return Result{}, fmt.Errorf("%w: the executor announced %d chunks for %d bytes (at most %d chunks of %d bytes under the cap)",
			ErrCapture, st.Chunks, want, MaxChunks(maxBytes), ChunkBytes)
	}
	var payload []byte
	for i := 0; i < st.Chunks; i++ {
		b, err := evalBytes(ctx, ev, CallExpr(fmt.Sprintf("chunk(%d, %d)", st.ID, i)))
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("%w (%d of %d chunks fetched)", err, i, st.Chunks)
			}
			return Result{}, err
		}
		if len(b) == 0 || len(b) > ChunkBytes {
			return Result{}, fmt.Errorf("%w: the executor answered chunk %d of %d with %d bytes (want 1 to %d)", ErrCapture, i, st.Chunks, len(b), ChunkBytes)
		}
		payload = append(payload, b...)
		if len(payload) > maxBytes {
			return Result{}, fmt.Errorf("%w: the executor sent more than the cap of %d bytes", ErrCapture, maxBytes)
		}
	}
	if int(want) != len(payload) {
		return Result{}, fmt.Errorf("%w: got %d bytes of the %d the executor announced", ErrCapture, len(payload), want)
	}
	now := time.Now().UTC()
	out, name, err := File(header, payload, req, now)
	if err != nil {
		return Result{}, err
	}
	// The directory must be the user's alone: whoever else may write
	// there could swap the capture replay runs.
	if err := safefile.MkdirPrivate(req.Dir); err != nil {
		return Result{}, fmt.Errorf("%w: capture directory: %w", ErrCapture, err)
	}
	path := filepath.Join(req.Dir, fmt.Sprintf("%s-e%v-%s.json", SafeName(name),
		req.Executor, now.Format("20060102T150405.000")))
	if err := safefile.WriteFile(path, out, 0o600); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	return Result{Path: path, Bytes: len(out), Function: name, Task: req.Label, Notes: notes(header["notes"])}, nil
}

// decodeHeader is the executor's header, checked (CheckHeader), as a map.
func decodeHeader(raw json.RawMessage) (map[string]any, error) {
	if err := CheckHeader(raw); err != nil {
		return nil, err
	}
	var header map[string]any
	if err := json.Unmarshal(raw, &header); err != nil || header == nil {
		return nil, fmt.Errorf("%w: the executor's header is not a JSON object", ErrCapture)
	}
	return header, nil
}

// File is the capture file's text for the executor's header (decoded by
// decodeHeader) and the payload it announced, and the function's name: the
// header with the proxy's own fields set over the executor's (format,
// task, executor, time, localFile and localRoots from req) and the payload
// split into data and code. It refuses data that is not JSON and a file
// that would nest deeper than MaxHeaderDepth.
func File(header map[string]any, payload []byte, req Request, now time.Time) ([]byte, string, error) {
	doc := header
	data, code, err := Split(doc, payload)
	if err != nil {
		return nil, "", err
	}
	if !json.Valid(data) {
		// Replay would refuse it too; refusing here says so at capture
		// time, and keeps a pickle (an older sparkdap's, or a hostile
		// executor's) out of the file.
		return nil, "", fmt.Errorf("%w: the executor's data is not JSON (a capture by another sparkdap version, or not by sparkdap)", ErrCapture)
	}
	fn, _ := doc["function"].(map[string]any)
	remote, _ := fn["file"].(string)
	local := ""
	if req.LocalFile != nil && remote != "" {
		local = req.LocalFile(remote)
	}
	name, _ := fn["name"].(string)
	doc["format"] = Format
	doc["contains"] = fmt.Sprintf("the arguments of the function %s as executor %v held them when it stopped in it, with the closure values "+
		"and the plain-data globals it reads (data: tagged JSON, base64; your data, as the executor had it); the names of the modules, "+
		"functions and classes it refers to (references); and, pickled (code: %v pickle, base64), the function itself and any value "+
		"the data could not hold (notes name them): sparkdap replay unpickles code only with --trust-captured-code and otherwise "+
		"takes the function from your local source (localFile, under localRoots), importing what it imports from localFile's "+
		"directory and localRoots",
		name, req.Executor, doc["pickler"])
	doc["task"] = req.Label
	doc["executor"] = req.Executor
	doc["capturedAt"] = now.Format(time.RFC3339)
	doc["localFile"] = local
	roots := []string{}
	for _, r := range req.LocalRoots {
		if r != "" && filepath.IsAbs(r) {
			roots = append(roots, r)
		}
	}
	doc["localRoots"] = roots
	doc["data"] = base64.StdEncoding.EncodeToString(data)
	doc["code"] = base64.StdEncoding.EncodeToString(code)
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrCapture, err)
	}
	if d := jsonDepth(out); d > MaxHeaderDepth {
		return nil, "", fmt.Errorf("%w: the capture file would nest %d deep, over the limit of %d", ErrCapture, d, MaxHeaderDepth)
	}
	return out, name, nil
}

// notes reads the header's notes: the strings of a JSON array, at most
// maxNotes of them, cleaned.
func notes(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, n := range list {
		if s, ok := n.(string); ok && len(out) < maxNotes {
			out = append(out, admission.Clean(s, maxNoteRunes))
		}
	}
	return out
}

// Split cuts the executor's bytes into DATA and CODE at the header's
// dataBytes: they are kept apart in the file so that replay can decode
// the data without touching the code.
func Split(header map[string]any, payload []byte) (data, code []byte, err error) {
	n, ok := toInt(header["dataBytes"])
	if !ok || n < 0 || int(n) > len(payload) {
		return nil, nil, fmt.Errorf("%w: the executor's header says the data is %v of %d bytes", ErrCapture, header["dataBytes"], len(payload))
	}
	return payload[:n], payload[n:], nil
}

// maxNotes bounds how many of the executor's notes a capture's answer
// carries.
const maxNotes = 20

// maxNoteRunes bounds one note as shown.
const maxNoteRunes = 4 * admission.MaxTextRunes

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// SafeName makes a function name ("<lambda>") part of a file name.
func SafeName(s string) string {
	s = strings.Trim(unsafeName.ReplaceAllString(s, "_"), "_.")
	if s == "" {
		return "capture"
	}
	return truncate(s, 60)
}

// toInt reads a JSON number that is an integer.
func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n != float64(int64(n)) {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
