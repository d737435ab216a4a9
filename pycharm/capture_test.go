package pycharm_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/capture"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
)

// evalAnswer is pydevd-pycharm's answer to CMD_EVALUATE_EXPRESSION whose
// value is the str v: the value attribute URL-quoted and XML-escaped, the
// whole payload URL-quoted again (pydevd_xml.var_to_xml, NetCommand).
func evalAnswer(seq int, v string) pycharm.Message {
	attr := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(pycharm.PyQuote(v, "/"))
	return pycharm.Message{ID: pycharm.CmdEvaluateExpression, Seq: seq, Payload: pycharm.PyQuote(
		`<xml><var name="expr" type="str" qualifier="builtins" value="`+attr+`" />`+"\n</xml>", `/<>_=" `)}
}

// serveCapture plays the worker's side of a capture: start, chunks, drop,
// answering each CMD_EVALUATE_EXPRESSION for frame; it returns the
// expressions it got.
func (w *fakeWorker) serveCapture(t *testing.T, frame string, start map[string]any, chunks []string) []string {
	t.Helper()
	startJSON, _ := json.Marshal(start)
	var got []string
	for i := 0; i < len(chunks)+2; i++ {
		m := w.waitFor(t, pycharm.CmdEvaluateExpression)
		f := strings.Split(m.Payload, "\t")
		if len(f) != 5 || f[1] != frame || f[2] != "FRAME" || f[4] != "0" {
			t.Fatalf("evaluate payload %.200q: want thread, frame %s, FRAME, expression, trim 0", m.Payload, frame)
		}
		got = append(got, f[3])
		switch {
		case i == 0:
			w.send(evalAnswer(m.Seq, base64.StdEncoding.EncodeToString(startJSON)))
		case i <= len(chunks):
			w.send(evalAnswer(m.Seq, base64.StdEncoding.EncodeToString([]byte(chunks[i-1]))))
		default:
			w.send(evalAnswer(m.Seq, ""))
		}
	}
	return got
}

// TestConsoleCapture: "!capture" typed in PyCharm's Debug Console never
// reaches pydevd as Python: the proxy evaluates sparkdap's capture code in
// the selected frame with its own requests (whose answers PyCharm never
// sees), writes the capture file with a localFile only from path mapping,
// and prints the summary line to the console before answering the line.
func TestConsoleCapture(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := t.TempDir()
	job := filepath.Join(root, "job.py")
	if err := os.WriteFile(job, []byte("def parse(x):\n    return x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pm, err := pathmap.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	capDir := t.TempDir()
	px, ide := startProxy(t, ctx, pycharm.Config{CaptureDir: capDir, Paths: pm})
	w := startWorker(t, ctx, px.Addr().String(), 77, 3, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	tid := "pid_77_id_1"

	// Bytes whose base64 has "+" and "/": quoted on the wire.
	data, code := `{"~":1}`, "co\xff\xfede"
	start := map[string]any{"id": 4, "chunks": 2, "header": map[string]any{
		"payloadBytes": len(data + code), "dataBytes": len(data), "pickler": "cloudpickle",
		"function": map[string]any{"name": "parse", "file": job}}}
	done := make(chan []string, 1)
	go func() { done <- w.serveCapture(t, "140234", start, []string{data + "co", "\xff\xfede"}) }()
	out, errOut, err := ide.ConsoleExec(ctx, tid, "140234", "!capture")
	if err != nil {
		t.Fatal(err)
	}
	exprs := <-done
	if !strings.Contains(exprs[0], ".start(140234, ") || !strings.Contains(exprs[1], ".chunk(4, 0)") || !strings.Contains(exprs[3], ".drop(4)") {
		t.Errorf("the worker evaluated %.300q", exprs)
	}
	if errOut != "" || !strings.HasPrefix(out, "captured parse (exec 1 · node-1 · pid 77 · stage 0 · partition 3 · attempt 0) to "+capDir) ||
		!strings.Contains(out, "replay: sparkdap replay ") {
		t.Fatalf("console shows %q, stderr %q", out, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(capDir, "parse-e77-*.json"))
	if len(files) != 1 {
		t.Fatalf("capture files %v", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	if doc["data"] != b64([]byte(data)) || doc["code"] != b64([]byte(code)) || doc["localFile"] != job ||
		doc["format"] != capture.Format || doc["executor"] != float64(77) {
		t.Errorf("capture file %s", raw)
	}
	if s := ide.Strays(); len(s) != 0 {
		t.Errorf("PyCharm got messages it waits for from no one: %v", s)
	}

	// !help and a typo: answered by the proxy, nothing reaches pydevd.
	out, _, err = ide.ConsoleExec(ctx, tid, "140234", "  !help")
	if err != nil || !strings.Contains(out, "!capture maxBytes=N") {
		t.Errorf("!help: %q %v", out, err)
	}
	_, errOut, err = ide.ConsoleExec(ctx, tid, "140234", "!captur")
	if err != nil || !strings.Contains(errOut, "!captur is not a sparkdap command") {
		t.Errorf("!captur: stderr %q %v", errOut, err)
	}
	// Python lines still go to pydevd.
	if _, err := ide.Send(pycharm.CmdConsoleExec, tid, "140234", "FRAME", "x + 1"); err != nil {
		t.Fatal(err)
	}
	if m := w.waitFor(t, pycharm.CmdConsoleExec); !strings.HasSuffix(m.Payload, "\tx + 1") {
		t.Errorf("pydevd got %q", m.Payload)
	}
}

// TestConsoleCaptureFailures: a capture that cannot be made says why in
// the console's stderr, and the line is answered all the same.
func TestConsoleCaptureFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noDir  bool
		line   string
		answer func(w *fakeWorker, m pycharm.Message)
		want   string
	}{
		{name: "no capture dir", noDir: true, line: "!capture", want: "no capture directory"},
		{name: "bad argument", line: "!capture max=3", want: `unknown argument "max=3"`},
		{name: "worker refuses", line: "!capture", want: "capture failed: frame 5 is not a frame",
			answer: func(w *fakeWorker, m pycharm.Message) {
				j, _ := json.Marshal(map[string]any{"error": "frame 5 is not a frame of this stopped thread"})
				w.send(evalAnswer(m.Seq, base64.StdEncoding.EncodeToString(j)))
			}},
		{name: "evaluation fails", line: "!capture", want: "the expression failed in the worker: NameError",
			answer: func(w *fakeWorker, m pycharm.Message) {
				w.send(pycharm.Message{ID: pycharm.CmdEvaluateExpression, Seq: m.Seq, Payload: pycharm.PyQuote(
					`<xml><var name="e" type="NameError" value="NameError%3A%20x" isErrorOnEval="True" /></xml>`, `/<>_=" `)})
			}},
		{name: "pydevd error", line: "!capture", want: "pydevd: Error evaluating expression",
			answer: func(w *fakeWorker, m pycharm.Message) {
				w.send(pycharm.ErrorMessage(m.Seq, "Error evaluating expression boom"))
			}},
		{name: "worker leaves", line: "!capture", want: "the worker is not connected",
			answer: func(w *fakeWorker, _ pycharm.Message) { w.conn.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := pycharm.Config{CaptureDir: t.TempDir(), EvalTimeout: 30 * time.Second}
			if tc.noDir {
				cfg.CaptureDir = ""
			}
			px, ide := startProxy(t, ctx, cfg)
			w := startWorker(t, ctx, px.Addr().String(), 78, 0, pathmap.Roots{})
			if err := ide.Accept(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := ide.Start(ctx); err != nil {
				t.Fatal(err)
			}
			w.waitFor(t, pycharm.CmdRun)
			if tc.answer != nil {
				go func() { tc.answer(w, w.waitFor(t, pycharm.CmdEvaluateExpression)) }()
			}
			out, errOut, err := ide.ConsoleExec(ctx, "pid_78_id_1", "5", tc.line)
			if err != nil || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("console: stdout %q stderr %q err %v; want stderr with %q", out, errOut, err, tc.want)
			}
			if files, _ := filepath.Glob(filepath.Join(cfg.CaptureDir, "*")); cfg.CaptureDir != "" && len(files) != 0 {
				t.Errorf("files written: %v", files)
			}
		})
	}
}

// TestCaptureStopped: the proxy knows which worker threads are stopped,
// with the stack PyCharm was shown, and captures one of their frames for
// `sparkdap capture`; a resumed thread is no longer listed.
func TestCaptureStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	capDir := t.TempDir()
	px, ide := startProxy(t, ctx, pycharm.Config{CaptureDir: capDir})
	w := startWorker(t, ctx, px.Addr().String(), 79, 2, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	tid := "pid_79_id_1"
	if _, err := px.CaptureStopped(ctx, 79, nil, 0); !errors.Is(err, pycharm.ErrNotStopped) || !errors.Is(err, control.ErrNotStopped) {
		t.Fatalf("capture of a running worker: %v, want ErrNotStopped", err)
	}
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: pycharm.ThreadCreatePayload(tid, "MainThread")})
	w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 4, Payload: pycharm.PyQuote(`<xml><thread id="`+tid+`" name="MainThread" stop_reason="111" message="">`+
		`<frame id="5001" name="parse" file="/x/job.py" line="3"></frame><frame id="5002" name="main" file="/x/job.py" line="9"></frame></thread></xml>`, `/<>_=" `)})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend }); err != nil {
		t.Fatal(err)
	}
	st := px.Stopped()
	if len(st) != 1 || st[0].PID != 79 || st[0].Thread != tid || len(st[0].Frames) != 2 || st[0].Frames[1].ID != "5002" ||
		st[0].Frames[0].File != "/x/job.py" || st[0].Frames[0].Line != 3 || !strings.Contains(st[0].Label, "partition 2") {
		t.Fatalf("stopped: %+v", st)
	}
	// `sparkdap capture` lists it by pid, frame 0 the user's.
	ws := px.StoppedWorkers(ctx)
	if len(ws) != 1 || ws[0].Executor != 79 || ws[0].Thread != 1 || ws[0].ThreadName != "MainThread" || ws[0].Top != 0 ||
		len(ws[0].Frames) != 2 || ws[0].Frames[1] != (control.WorkerFrame{Name: "main", File: "/x/job.py", Line: 9}) {
		t.Fatalf("stopped workers: %+v", ws)
	}
	if _, err := px.CaptureStopped(ctx, 80, nil, 0); !errors.Is(err, control.ErrUnknownExecutor) || !strings.Contains(err.Error(), "worker pid 80: the worker is not connected") {
		t.Fatalf("capture of an unknown pid: %v, want ErrUnknownExecutor", err)
	}
	if _, err := px.CaptureStopped(ctx, 79, ptr(2), 0); !errors.Is(err, control.ErrNoFrame) {
		t.Fatalf("frame 2 of 2: %v, want ErrNoFrame", err)
	}
	start := map[string]any{"id": 1, "chunks": 1, "header": map[string]any{
		"payloadBytes": 4, "dataBytes": 2, "function": map[string]any{"name": "main", "file": "/x/job.py"}}}
	// data "{}", code "cc"
	done := make(chan []string, 1)
	go func() { done <- w.serveCapture(t, "5002", start, []string{"{}cc"}) }()
	res, err := px.CaptureStopped(ctx, 79, ptr(1), 0)
	if err != nil || res.Frame != 1 || res.Executor != 79 || res.Function != "main" || filepath.Dir(res.Path) != capDir || !strings.HasPrefix(res.Summary, "captured main (") {
		t.Fatalf("capture: %+v %v", res, err)
	}
	// The size the answer gives is the file's, which the message names.
	if fi, err := os.Stat(res.Path); err != nil || res.Bytes != fi.Size() {
		t.Fatalf("capture says %d bytes; the file: %v %v", res.Bytes, fi, err)
	}
	<-done
	w.send(pycharm.Message{ID: pycharm.CmdThreadRun, Seq: 6, Payload: tid + "\t108"})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadRun }); err != nil {
		t.Fatal(err)
	}
	if st := px.Stopped(); len(st) != 0 {
		t.Errorf("after the resume: %+v", st)
	}
}

func ptr(i int) *int { return &i }
