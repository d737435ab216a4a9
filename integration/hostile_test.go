//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// TestHostileClusterAgainstServe plays a hostile cluster against the real
// `sparkdap serve` binary, with an IDE attached in merged mode, and checks
// what the developer would see: the IDE gets nothing from a peer that never
// presented the token, no event that makes it act, no laptop path chosen by
// the executor; serve's terminal gets no control character from a worker's
// hello and a bounded number of lines from a flood of refused hellos.
func TestHostileClusterAgainstServe(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	dev := t.TempDir()
	if err := os.WriteFile(filepath.Join(dev, "job.py"), []byte("def f(x):\n    return x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, ctx, "--merged", "--root", dev, "--live", "off")
	ide := dialIDE(t, ctx, p.IDE)
	defer ide.Close()
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "name": "hostile"}, nil); err != nil {
		t.Fatal(err)
	}

	// A peer without the token speaks first: events before it answers the
	// proxy's pydevdAuthorize. It must be cut off and relay nothing.
	bad, err := fakepydevd.Dial(ctx, p.Executors, fakepydevd.Config{Token: "wrong", PID: 4001})
	if err != nil {
		t.Fatal(err)
	}
	_ = bad.Event("output", map[string]any{"category": "stdout", "output": "UNADMITTED-OUTPUT\n"})
	_ = bad.Event("stopped", map[string]any{"reason": "breakpoint", "threadId": 1})
	select {
	case <-bad.Done():
	case <-ctx.Done():
		t.Fatal("serve kept the connection of a peer that never presented the token")
	}

	// An admitted worker (it holds the token: anyone on the cluster may)
	// sends what would make the IDE act, then a stop in a frame that names
	// a laptop file.
	good, err := fakepydevd.Dial(ctx, p.Executors, fakepydevd.Config{Token: p.Token, PID: 4002, FramePath: "/root/.ssh/id_rsa"})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	select {
	case <-good.Configured():
	case <-ctx.Done():
		t.Fatal("the admitted worker was never configured")
	}
	for _, ev := range []struct {
		name string
		body map[string]any
	}{
		{"debugpyAttach", map[string]any{"name": "x", "type": "node", "request": "launch", "program": "/bin/sh", "args": []any{"-c", "touch /tmp/owned"}}},
		{"capabilities", map[string]any{"capabilities": map[string]any{"supportsRestartRequest": true}}},
		{"exited", map[string]any{"exitCode": 0}},
		{"progressStart", map[string]any{"progressId": "p", "title": "x"}},
		{"output", map[string]any{"category": "telemetry", "output": "TELEMETRY", "data": map[string]any{"k": "v"}}},
		{"output", map[string]any{"category": "stdout", "output": "LEGIT-OUTPUT\n"}},
		{"stopped", map[string]any{"reason": "breakpoint", "threadId": 1}},
	} {
		if err := good.Event(ev.name, ev.body); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ide.WaitEvent(ctx, "output", func(b json.RawMessage) bool { return strings.Contains(string(b), "LEGIT-OUTPUT") }); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.WaitEvent(ctx, "stopped", nil); err != nil {
		t.Fatal(err)
	}
	var threads struct {
		Threads []struct {
			ID int `json:"id"`
		} `json:"threads"`
	}
	if err := ide.Call(ctx, "threads", map[string]any{}, &threads); err != nil || len(threads.Threads) == 0 {
		t.Fatalf("threads: %v %+v", err, threads)
	}
	resp, err := ide.Request(ctx, "stackTrace", map[string]any{"threadId": threads.Threads[0].ID})
	if err != nil || !resp.Success {
		t.Fatalf("stackTrace: %v %+v", err, resp)
	}
	var st struct {
		StackFrames []struct {
			Source struct {
				Path            string `json:"path"`
				SourceReference int    `json:"sourceReference"`
			} `json:"source"`
		} `json:"stackFrames"`
	}
	if err := json.Unmarshal(resp.Body, &st); err != nil || len(st.StackFrames) == 0 {
		t.Fatalf("stackTrace body %s: %v", resp.Body, err)
	}
	// Real pydevd and the fake give such a frame a sourceReference (its text
	// is fetched from the executor); what must not reach the IDE is the path.
	if src := st.StackFrames[0].Source; src.Path != "" || src.SourceReference <= 0 {
		t.Errorf("a frame in a file under no root reached the IDE as path %q, sourceReference %d; want no path and a sourceReference", src.Path, src.SourceReference)
	}
	for _, ev := range ide.Events() {
		body := string(ev.Body)
		switch {
		case ev.Event == "debugpyAttach", ev.Event == "capabilities", ev.Event == "exited", strings.HasPrefix(ev.Event, "progress"):
			t.Errorf("the IDE got a %s event from an executor: %s", ev.Event, body)
		case strings.Contains(body, "UNADMITTED-OUTPUT"):
			t.Errorf("the IDE got an event from a peer that never presented the token: %s", body)
		case strings.Contains(body, "TELEMETRY"):
			t.Errorf("the IDE got an executor's telemetry: %s", body)
		}
	}

	// A worker that proves the token but describes itself with terminal
	// escapes and a forged line.
	evil := "\x1b]0;owned\x07\x1b[2K\r\nsparkdap: forged line\u009b2J"
	conn, err := net.DialTimeout("tcp", p.Executors, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	reply, derived, err := admission.Introduce(conn, p.Token, admission.TaskInfo{PID: 4003, Host: evil, ExecutorID: evil, Label: evil})
	conn.Close()
	if err != nil || reply != "OK" {
		t.Fatalf("hello: %q, %v", reply, err)
	}
	escaped, err := fakepydevd.Dial(ctx, p.Executors, fakepydevd.Config{Token: derived, PID: 4003})
	if err != nil {
		t.Fatal(err)
	}
	defer escaped.Close()
	select {
	case <-escaped.Configured():
	case <-ctx.Done():
		t.Fatal("the worker that said hello was never configured")
	}

	// A flood of hellos with a made-up proof from one address.
	before := 0
	for _, l := range strings.Split(p.Log(), "\n") {
		if strings.Contains(l, "refused") && !strings.HasPrefix(l, "sparkdap:") && !strings.Contains(l, " DBG ") {
			before++
		}
	}
	for i := range 300 {
		if got, err := forgedHello(p.Executors); err != nil || !strings.HasPrefix(got, "REFUSED") {
			t.Fatalf("forged hello %d: %q, %v", i, got, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Log(), "executor") || !strings.Contains(p.Log(), "4003") {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	log := p.Log()
	for _, r := range log {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Errorf("serve's terminal output carries control character %U:\n%s", r, tail(log, 3000))
			break
		}
	}
	if strings.Contains(log, "\nsparkdap: forged line") {
		t.Errorf("a worker forged a line of serve's output:\n%s", tail(log, 3000))
	}
	// What a user running serve sees: the summary lines and the log at
	// info and above (this proxy also logs at debug, one line per hello).
	summaryRefusals, loud := 0, 0
	for _, l := range strings.Split(log, "\n") {
		switch {
		case !strings.Contains(l, "refused"):
		case strings.HasPrefix(l, "sparkdap:"):
			summaryRefusals++
		case !strings.Contains(l, " DBG "):
			loud++
		}
	}
	if summaryRefusals > 6 || loud-before > 20 {
		t.Errorf("300 refused hellos wrote %d summary lines and %d log lines above debug to serve's terminal:\n%s", summaryRefusals, loud-before, tail(log, 3000))
	}

	// When serve ends, the refusals it was still counting are summed up:
	// every forged hello is accounted for on the terminal, none silently.
	p.Stop()
	counted := 0
	for _, m := range moreRefused.FindAllStringSubmatch(p.Log(), -1) {
		n, _ := strconv.Atoi(m[1])
		counted += n
	}
	if counted < 299 {
		t.Errorf("serve's summary accounts for %d of the 300 forged hellos after the first (want at least 299: the count still open at exit must be printed):\n%s", counted, tail(p.Log(), 2000))
	}
}

// moreRefused matches the refusal log's sum line for loopback peers.
var moreRefused = regexp.MustCompile(`… (\d+) more refused from 127\.0\.0\.1 `)

// forgedHello is a SPARKDAP/2 hello from a peer without the token: it
// ignores the proxy's proof and sends its description with a made-up proof.
func forgedHello(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, admission.HelloPrefix+"HELLO "+strings.Repeat("cd", 16)+"\n"); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	next := func() (string, error) {
		for range 100 {
			line, err := br.ReadString('\n')
			if i := strings.Index(line, admission.HelloPrefix); i >= 0 {
				return strings.TrimSpace(line[i+len(admission.HelloPrefix):]), nil
			}
			if err != nil {
				return "", err
			}
		}
		return "", errors.New("no hello reply")
	}
	if line, err := next(); err != nil || !strings.HasPrefix(line, "CHALLENGE ") {
		return line, err
	}
	desc := fmt.Sprintf(`{"proof":%q,"pid":7,"host":"flood"}`, strings.Repeat("0", 64))
	if _, err := io.WriteString(c, admission.HelloPrefix+desc+"\n"); err != nil {
		return "", err
	}
	return next()
}
