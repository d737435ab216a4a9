//go:build linux

package integration

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// hostileJob is the developer's copy of the function the hostile executor
// claims to have stopped in.
const hostileJob = `def parse(s, scale=2):
    return int(s) * scale
`

// pickleStr is protocol 4's SHORT_BINUNICODE of s.
func pickleStr(s string) []byte { return append([]byte{0x8c, byte(len(s))}, s...) }

// dtypeScalarPickle is the pickle that read the object at address through
// two globals a pickle allowlist held: numpy.dtype('O8') rebuilt with
// BUILD state flags=0x30, then multiarray's scalar(that dtype, 8 bytes).
// On a PIE Python the address faults (SIGSEGV); on a non-PIE one a crafted
// object there is called.
func dtypeScalarPickle(multiarray string, address uint64) []byte {
	p := []byte{0x80, 0x04}
	p = append(append(append(p, pickleStr(multiarray)...), pickleStr("scalar")...), 0x93)
	p = append(append(append(p, pickleStr("numpy")...), pickleStr("dtype")...), 0x93)
	p = append(append(p, pickleStr("O8")...), 0x89, 0x88, 0x87, 'R')
	p = append(append(append(p, '(', 'K', 3), pickleStr("|")...), 'N', 'N', 'N')
	p = append(p, 'J', 0xff, 0xff, 0xff, 0xff, 'J', 0xff, 0xff, 0xff, 0xff, 'K', 0x30, 't', 'b')
	p = append(p, 'C', 8)
	p = binary.LittleEndian.AppendUint64(p, address)
	return append(p, 0x86, 'R', '.')
}

// systemPickle is a plain __reduce__ pickle: os.system(cmd).
func systemPickle(cmd string) []byte {
	return []byte("cos\nsystem\n(V" + cmd + "\ntR.")
}

// hostileExecutor answers the proxy's capture evaluates as an executor
// holding the token may: with a start answer and chunks of its choosing.
type hostileExecutor struct {
	mu     sync.Mutex
	start  map[string]any
	chunks [][]byte
}

func (h *hostileExecutor) set(start map[string]any, chunks ...[]byte) {
	h.mu.Lock()
	h.start, h.chunks = start, chunks
	h.mu.Unlock()
}

func (h *hostileExecutor) tamper(req fakepydevd.Message, resp map[string]any) {
	if req.Command != "evaluate" {
		return
	}
	expr, _ := req.Arguments["expression"].(string)
	h.mu.Lock()
	defer h.mu.Unlock()
	var b []byte
	switch {
	case strings.Contains(expr, ".start("):
		b, _ = json.Marshal(h.start)
	case strings.Contains(expr, ".chunk("):
		var id, i int
		if _, err := fmt.Sscanf(expr[strings.LastIndex(expr, ".chunk(")+len(".chunk("):], "%d, %d)", &id, &i); err == nil && i < len(h.chunks) {
			b = h.chunks[i]
		}
	case strings.Contains(expr, ".drop("):
	default:
		return
	}
	resp["success"], resp["body"] = true, map[string]any{"result": "'" + base64.StdEncoding.EncodeToString(b) + "'", "variablesReference": 0}
}

// hostileStart is a start answer for data+code in one chunk (or chunks
// chunks), with the function parse of file.
func hostileStart(file, python string, data, code []byte, chunks int) map[string]any {
	return map[string]any{"id": 1, "chunks": chunks, "header": map[string]any{
		"format": "sparkdap-capture/3",
		"function": map[string]any{"name": "parse", "qualname": "parse", "module": "__main__", "file": file, "firstLine": 1,
			"freeVars": []any{}, "isGenerator": false, "importable": nil},
		"parameters": []any{"s", "scale"}, "references": map[string]any{}, "versions": map[string]any{"python": python},
		"notes": []any{"all is well"}, "pickler": "cloudpickle",
		"dataBytes": len(data), "codeBytes": len(code), "payloadBytes": len(data) + len(code)}}
}

// TestHostileCaptureRunsNothing: an executor holding the token answers
// the proxy's capture with crafted bytes. A pickle as the data (the
// numpy dtype/scalar read of a chosen address, a plain os.system
// __reduce__) is refused by the proxy, and by `sparkdap replay` too when
// such a file reaches it some other way: exit 2 with the reason, no
// signal, no marker file. A JSON call whose argument is a placeholder
// for a pickle, with os.system or the dtype/scalar pickle as the code, is
// written, and replay refuses it without --trust-captured-code, naming
// the argument; valid data with hostile code replays from the local
// source and never touches the code. An executor that announces more
// chunks than the cap allows, or answers empty ones, is refused.
func TestHostileCaptureRunsNothing(t *testing.T) {
	testenv.SkipIfShort(t, "runs replay in Python processes")
	py := python(t)
	ctx := testContext(t, 120*time.Second)
	dir := t.TempDir()
	capDir := filepath.Join(t.TempDir(), "captures")
	script := filepath.Join(dir, "job.py")
	if err := os.WriteFile(script, []byte(hostileJob), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	info, err := exec.CommandContext(ctx, py, "-c",
		"import sys, numpy; print('%d.%d.%d' % sys.version_info[:3], numpy.__version__.split('.')[0])").Output()
	if err != nil {
		t.Skipf("replay's Python has no numpy: %v", err)
	}
	pyVersion, numpyMajor, _ := strings.Cut(strings.TrimSpace(string(info)), " ")
	multiarray := "numpy.core.multiarray"
	if numpyMajor >= "2" {
		multiarray = "numpy._core.multiarray"
	}
	dtypeScalar := dtypeScalarPickle(multiarray, 0x4141414141410000)
	system := systemPickle("touch " + marker)

	p := startProxy(t, ctx, "--root", dir, "--capture-dir", capDir)
	c := dialIDE(t, ctx, p.IDE)
	if _, err := c.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(ctx, map[string]any{}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	peer, err := fakepydevd.Dial(ctx, p.Executors, fakepydevd.Config{Token: p.Token, PID: 4242, FramePath: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	hostile := &hostileExecutor{}
	peer.SetTamper(hostile.tamper)
	select {
	case <-peer.Configured():
	case <-ctx.Done():
		t.Fatal("the proxy never configured the fake executor")
	}
	if err := peer.Stop(); err != nil {
		t.Fatal(err)
	}
	st, err := c.StoppedEvent(ctx)
	if err != nil {
		t.Fatalf("no stop: %v", err)
	}
	frames, err := c.StackTrace(ctx, st.ThreadId)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v %v", frames, err)
	}
	capture := func() (string, error) {
		var got struct{ Path string }
		err := c.Call(ctx, "sparkdapCapture", map[string]any{"frameId": frames[0].Id}, &got)
		return got.Path, err
	}
	noMarker := func(what string) {
		t.Helper()
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the marker file was created: code the executor chose ran", what)
		}
	}

	// The data is a pickle: the proxy refuses it and writes nothing.
	for name, data := range map[string][]byte{"dtype/scalar": dtypeScalar, "os.system": system} {
		hostile.set(hostileStart(script, pyVersion, data, nil, 1), data)
		if path, err := capture(); err == nil || !strings.Contains(err.Error(), "the executor's data is not JSON") {
			t.Errorf("capture with a %s pickle as data: %q, %v; want a refusal", name, path, err)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(capDir, "*")); len(files) != 0 {
		t.Errorf("refused captures left files: %v", files)
	}

	// An executor that would keep the proxy fetching.
	good := []byte(`{"args":["5"],"kwargs":{},"iterator_arg":null,"closure":{},"globals":{}}`)
	hostile.set(hostileStart(script, pyVersion, good, nil, 100000), good)
	if _, err := capture(); err == nil || !strings.Contains(err.Error(), "announced 100000 chunks") {
		t.Errorf("capture announcing 100000 chunks: %v, want a refusal", err)
	}
	hostile.set(hostileStart(script, pyVersion, good, nil, 2), []byte{}, []byte{})
	if _, err := capture(); err == nil || !strings.Contains(err.Error(), "answered chunk 0 of 2 with 0 bytes") {
		t.Errorf("capture answering empty chunks: %v, want a refusal", err)
	}

	// A JSON call whose argument is carried pickled, with hostile code.
	placeholder := []byte(`{"args":[{"$t":"pickled","key":"p0","where":"argument 's'","type":"builtins.str"}],"kwargs":{},"iterator_arg":null,"closure":{},"globals":{}}`)
	replayRefuses := func(what, path, want string) {
		t.Helper()
		rc, out := replay(t, ctx, path)
		if rc != 2 || !strings.Contains(out, want) || strings.Contains(out, "returned") {
			t.Errorf("replay of %s: status %d, want 2 and %q (a refusal, no signal); output:\n%s", what, rc, want, out)
		}
		noMarker(what)
	}
	var written string
	for name, code := range map[string][]byte{"dtype/scalar": dtypeScalar, "os.system": system} {
		hostile.set(hostileStart(script, pyVersion, placeholder, code, 1), append(append([]byte{}, placeholder...), code...))
		path, err := capture()
		if err != nil {
			t.Fatalf("capture of a placeholder argument with %s code: %v", name, err)
		}
		written = path
		replayRefuses(name+" code behind a placeholder", path,
			"argument 's' is a builtins.str, which the capture carries only pickled, and replay unpickles nothing from the cluster unless you pass --trust-captured-code")
	}

	// Valid data, hostile code: the local function runs, the code is
	// never unpickled.
	hostile.set(hostileStart(script, pyVersion, good, system, 1), append(append([]byte{}, good...), system...))
	path, err := capture()
	if err != nil {
		t.Fatalf("capture of valid data with hostile code: %v", err)
	}
	if rc, out := replay(t, ctx, path); rc != 0 || !strings.Contains(out, "returned 10") || !strings.Contains(out, "your local source") {
		t.Errorf("replay of valid data with hostile code: status %d, output:\n%s", rc, out)
	}
	noMarker("hostile code beside local source")
	replayRefuses("hostile code without local source", withoutLocalFile(t, path), "no local source for parse")

	// A file whose data is a pickle (written by hand, or by a proxy that
	// let it through): replay decodes nothing of it.
	for name, data := range map[string][]byte{"dtype/scalar": dtypeScalar, "os.system": system} {
		replayRefuses(name+" data in the file", withData(t, written, data), "is not the JSON this replay reads")
	}

	// A header nested 5000 deep: the proxy refuses it before writing.
	deep := hostileStart(script, pyVersion, good, nil, 1)
	deep["header"].(map[string]any)["x"] = json.RawMessage(strings.Repeat("[", 5000) + strings.Repeat("]", 5000))
	hostile.set(deep, good)
	if path, err := capture(); err == nil || !strings.Contains(err.Error(), "nests 5001 deep") {
		t.Errorf("capture of a header nested 5000 deep: %q, %v; want a refusal", path, err)
	}

	// The header names a driver script under the root as the function's
	// module: replay runs parse from the mapped job.py, and the driver's
	// top level never runs.
	driver := filepath.Join(dir, "driver17.py")
	if err := os.WriteFile(driver, []byte("open("+pyQuote(marker)+", 'w').close()\n\n"+hostileJob), 0o600); err != nil {
		t.Fatal(err)
	}
	named := hostileStart(script, pyVersion, good, nil, 1)
	named["header"].(map[string]any)["function"].(map[string]any)["importable"] = map[string]any{"module": "driver17", "qualname": "parse"}
	hostile.set(named, good)
	if path, err = capture(); err != nil {
		t.Fatalf("capture naming a driver module: %v", err)
	}
	if rc, out := replay(t, ctx, path); rc != 0 || !strings.Contains(out, "returned 10") || !strings.Contains(out, "job.py") {
		t.Errorf("replay of a capture naming a driver module: status %d, output:\n%s", rc, out)
	}
	noMarker("a driver module named by the capture")

	// Escape sequences and a forged line in the header's text reach the
	// terminal as visible escapes.
	forged := "\x1b]0;pwned\x07\x1b[2J\nsparkdap replay: returned 42"
	loud := hostileStart(script, "9.9"+forged, good, nil, 1)
	hostile.set(loud, good)
	if path, err = capture(); err != nil {
		t.Fatalf("capture with escapes in its header: %v", err)
	}
	rc, out := replay(t, ctx, path)
	if rc != 0 || strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nsparkdap replay: returned 42") || !strings.Contains(out, `\x1b]0;pwned`) {
		t.Errorf("replay of a header with escapes: status %d, output %q", rc, out)
	}
}

// pyQuote is s as a Python string literal.
func pyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// withData copies a capture file with its data replaced.
func withData(t testing.TB, path string, data []byte) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["data"] = base64.StdEncoding.EncodeToString(data)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "hostile.json")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
