package capture

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeWorker answers the capture code's calls as a worker's pydevd would
// (values as bare text, or as DAP's quoted repr), recording them.
type fakeWorker struct {
	start  map[string]any
	chunks []string
	quote  bool
	calls  []string
	// stall makes every chunk wait for the capture's time bound.
	stall bool
}

func (f *fakeWorker) Eval(ctx context.Context, expr string) (string, error) {
	f.calls = append(f.calls, expr)
	enc := func(b []byte) string {
		s := base64.StdEncoding.EncodeToString(b)
		if f.quote {
			return "'" + s + "'"
		}
		return s
	}
	switch {
	case strings.Contains(expr, ".start("):
		b, _ := json.Marshal(f.start)
		return enc(b), nil
	case strings.Contains(expr, ".chunk("):
		if f.stall {
			<-ctx.Done()
			return "", ctx.Err()
		}
		i := len(f.calls) - 2
		if i >= len(f.chunks) {
			return "", errors.New("no such chunk")
		}
		return enc([]byte(f.chunks[i])), nil
	case strings.Contains(expr, ".drop("):
		return "''", nil
	}
	return "", errors.New("unexpected expression")
}

func TestRun(t *testing.T) {
	header := func(payload, data int) map[string]any {
		return map[string]any{"payloadBytes": payload, "dataBytes": data, "pickler": "cloudpickle", "notes": []any{"x\x1b]0;t\x07y", 3},
			"function": map[string]any{"name": "<lambda>", "file": "/exec/job.py"}}
	}
	empty := make([]string, 200)
	for _, tc := range []struct {
		name     string
		start    map[string]any
		chunks   []string
		maxBytes int
		noDir    bool
		quote    bool
		stall    bool
		want     string // error text; "" = success
		dropped  bool
	}{
		{name: "bare values", start: map[string]any{"id": 3, "chunks": 2, "header": header(6, 2)}, chunks: []string{"{}c", "ode"}, dropped: true},
		{name: "quoted values", quote: true, start: map[string]any{"id": 3, "chunks": 1, "header": header(6, 2)}, chunks: []string{"{}code"}, dropped: true},
		{name: "no dir", noDir: true, want: "no capture directory"},
		{name: "worker refuses", start: map[string]any{"error": "the capture is over the cap of 5 bytes"}, want: "capture failed: the capture is over the cap of 5 bytes"},
		{name: "over the cap", maxBytes: 4, start: map[string]any{"id": 1, "chunks": 1, "header": header(3, 2)}, chunks: []string{"{}code"},
			want: "more than the cap of 4 bytes", dropped: true},
		{name: "short", start: map[string]any{"id": 1, "chunks": 1, "header": header(9, 2)}, chunks: []string{"{}code"},
			want: "got 6 bytes of the 9", dropped: true},
		{name: "chunk fails", start: map[string]any{"id": 1, "chunks": 2, "header": header(6, 2)}, chunks: []string{"{}c"},
			want: "no such chunk", dropped: true},
		{name: "bad split", start: map[string]any{"id": 1, "chunks": 1, "header": header(6, 7)}, chunks: []string{"{}code"},
			want: "the data is 7 of 6 bytes", dropped: true},
		// An executor that answers empty chunks until the client gives up.
		{name: "more chunks than the cap allows", maxBytes: 2 * ChunkBytes, start: map[string]any{"id": 1, "chunks": 3, "header": header(6, 2)},
			chunks: empty, want: "announced 3 chunks for 6 bytes (at most 2 chunks", dropped: true},
		{name: "more chunks than bytes", start: map[string]any{"id": 1, "chunks": 7, "header": header(6, 2)},
			chunks: empty, want: "announced 7 chunks for 6 bytes", dropped: true},
		{name: "empty chunk", start: map[string]any{"id": 1, "chunks": 2, "header": header(6, 2)},
			chunks: empty, want: "answered chunk 0 of 2 with 0 bytes", dropped: true},
		{name: "announced over the cap", maxBytes: 4, start: map[string]any{"id": 1, "chunks": 1, "header": header(6, 2)},
			chunks: []string{"{}code"}, want: "announced 6 bytes, over the cap of 4 bytes", dropped: true},
		{name: "stalls past the time bound", stall: true, start: map[string]any{"id": 1, "chunks": 2, "header": header(6, 2)},
			want: "did not send the capture within 1s (0 of 2 chunks fetched)", dropped: true},
		// A header an executor built to overflow replay's parser, or to
		// fill memory, is refused before the file is written.
		{name: "header nested 5000 deep", start: map[string]any{"id": 1, "chunks": 1, "header": json.RawMessage(deepHeader(5000))},
			chunks: []string{"{}code"}, want: "the executor's header nests 5001 deep, over the limit of 32", dropped: true},
		{name: "header too large", start: map[string]any{"id": 1, "chunks": 1, "header": map[string]any{"payloadBytes": 6, "dataBytes": 2,
			"notes": []any{strings.Repeat("n", MaxHeaderBytes)}}}, chunks: []string{"{}code"}, want: "over the limit of 1048576", dropped: true},
		{name: "header no object", start: map[string]any{"id": 1, "chunks": 1, "header": []any{6, 2}},
			chunks: []string{"{}code"}, want: "the executor's header is not a JSON object", dropped: true},
		{name: "data is a pickle", start: map[string]any{"id": 1, "chunks": 1, "header": header(6, 2)}, chunks: []string{"\x80\x04code"},
			want: "the executor's data is not JSON", dropped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			req := Request{Frame: 12, MaxBytes: tc.maxBytes, Dir: dir, Executor: 3, Label: "stage 1",
				LocalFile: func(remote string) string { return "/local/job.py" }, LocalRoots: []string{"/local", "relative", ""}}
			if tc.noDir {
				req.Dir = ""
			}
			if tc.stall {
				req.Timeout = time.Second
			}
			w := &fakeWorker{start: tc.start, chunks: tc.chunks, quote: tc.quote, stall: tc.stall}
			res, err := Run(context.Background(), w, req)
			if dropped := len(w.calls) > 0 && strings.Contains(w.calls[len(w.calls)-1], ".drop("); dropped != tc.dropped {
				t.Errorf("calls %q: dropped %v, want %v", w.calls, dropped, tc.dropped)
			}
			if tc.want != "" {
				if err == nil || !errors.Is(err, ErrCapture) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want ErrCapture with %q", err, tc.want)
				}
				if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
					t.Errorf("files written: %v", files)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(w.calls[0], ".start(12, ") {
				t.Errorf("start call %.200q", w.calls[0])
			}
			b, err := os.ReadFile(res.Path)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["data"] != base64.StdEncoding.EncodeToString([]byte("{}")) || doc["code"] != base64.StdEncoding.EncodeToString([]byte("code")) ||
				doc["localFile"] != "/local/job.py" || doc["format"] != Format || doc["task"] != "stage 1" || res.Bytes != len(b) ||
				!strings.HasPrefix(filepath.Base(res.Path), "lambda-e3-") || fmt.Sprint(doc["localRoots"]) != "[/local]" {
				t.Errorf("capture %s: %s", res.Path, b)
			}
			// The executor's notes, cleaned of control characters; a note
			// that is no string is dropped.
			if len(res.Notes) != 1 || strings.ContainsAny(res.Notes[0], "\x1b\x07") || !strings.HasPrefix(res.Notes[0], "x") {
				t.Errorf("notes %q", res.Notes)
			}
		})
	}
}

// deepHeader is a header whose "x" nests n arrays deep.
func deepHeader(n int) string {
	return `{"payloadBytes": 6, "dataBytes": 2, "x": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
}

func TestCheckHeader(t *testing.T) {
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`{"a": {"b": [1, "[[[[", "\\\"[{"]}}`, true},
		{deepHeader(MaxHeaderDepth - 1), true},
		{deepHeader(MaxHeaderDepth), false},
		{`{"a": 1`, false},
		{` "s"`, false},
		{`null`, false},
	} {
		if err := CheckHeader([]byte(tc.raw)); (err == nil) != tc.ok {
			t.Errorf("CheckHeader(%.60s): %v, want ok %v", tc.raw, err, tc.ok)
		}
	}
}

// FuzzFile: whatever header and payload an executor sends, the proxy
// either refuses them with an ErrCapture or writes a file that is JSON,
// nests at most MaxHeaderDepth deep, and carries the proxy's own
// localFile, localRoots and format over the executor's. It never panics.
func FuzzFile(f *testing.F) {
	f.Add([]byte(`{"payloadBytes": 6, "dataBytes": 2, "function": {"name": "f", "file": "/x.py"}}`), []byte("{}code"))
	f.Add([]byte(deepHeader(40)), []byte("[]"))
	f.Add([]byte(`{"dataBytes": 1, "localFile": "/etc/passwd", "format": 1, "localRoots": ["/"]}`), []byte("1"))
	f.Add([]byte(`{"dataBytes": 1.5}`), []byte("1"))
	req := Request{Executor: 1, Label: "t", LocalFile: func(string) string { return "/local/job.py" }, LocalRoots: []string{"/local"}}
	f.Fuzz(func(t *testing.T, raw, payload []byte) {
		header, err := decodeHeader(raw)
		if err != nil {
			if !errors.Is(err, ErrCapture) {
				t.Fatalf("decodeHeader: %v is no ErrCapture", err)
			}
			return
		}
		out, _, err := File(header, payload, req, time.Unix(0, 0))
		if err != nil {
			if !errors.Is(err, ErrCapture) {
				t.Fatalf("File: %v is no ErrCapture", err)
			}
			return
		}
		if jsonDepth(out) > MaxHeaderDepth {
			t.Fatalf("file nests %d deep", jsonDepth(out))
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("file is no JSON object: %v", err)
		}
		if (doc["localFile"] != "/local/job.py" && doc["localFile"] != "") || fmt.Sprint(doc["localRoots"]) != "[/local]" || doc["format"] != Format {
			t.Fatalf("the executor's fields survived: %v %v %v", doc["localFile"], doc["localRoots"], doc["format"])
		}
	})
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"YWI=", "ab", false},
		{"'YWI='", "ab", false},
		{`"YWI="`, "ab", false},
		{"'YWI=\"", "", true},
		{"NameError: x", "", true},
	} {
		got, err := Decode(tc.in)
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("Decode(%q) = %q, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrCapture) {
			t.Errorf("Decode(%q): %v is no ErrCapture", tc.in, err)
		}
	}
}

// TestStartExprOneLine: the expression travels in one line of pydevd's
// protocol, whose fields are tab-separated.
func TestStartExprOneLine(t *testing.T) {
	if e := StartExpr(1, 2); strings.ContainsAny(e, "\t\n\r") {
		t.Errorf("StartExpr holds a tab or line break")
	}
}
