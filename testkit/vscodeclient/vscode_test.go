package vscodeclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// recorded is an excerpt of a transcript of real VS Code against
// sparkdap (testdata/vscode-1.139.1-s4.json).
type recorded struct {
	Workspace       string            `json:"workspaceFolder"`
	Capabilities    map[string]any    `json:"capabilities"`
	Root            []recordedRequest `json:"root"`
	StartDebugging  map[string]any    `json:"startDebugging"`
	Child           []recordedRequest `json:"child"`
	ChildDisconnect recordedRequest   `json:"childDisconnect"`
}

type recordedRequest struct {
	Command   string         `json:"command"`
	Arguments map[string]any `json:"arguments"`
}

// recordedPort is the IDE port of the recording, replaced by the fake
// adapter's.
const recordedPort = 34711

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// fakeAdapter plays the adapter's side of one connection, one message at
// a time, for the test's goroutine.
type fakeAdapter struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	seq  int
}

func accept(t *testing.T, ln net.Listener) *fakeAdapter {
	t.Helper()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("VS Code opened no connection: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &fakeAdapter{t: t, conn: c, r: bufio.NewReader(c)}
}

func (a *fakeAdapter) read() map[string]any {
	a.t.Helper()
	_ = a.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := dap.ReadBaseMessage(a.r)
	if err != nil {
		a.t.Fatalf("reading from VS Code: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		a.t.Fatal(err)
	}
	return m
}

func (a *fakeAdapter) write(m map[string]any) {
	a.t.Helper()
	a.seq++
	m["seq"] = a.seq
	b, _ := json.Marshal(m)
	if err := dap.WriteBaseMessage(a.conn, b); err != nil {
		a.t.Fatal(err)
	}
}

// expect reads the next request and checks it is want, recorded from
// real VS Code (the port and session ids aside).
func (a *fakeAdapter) expect(want recordedRequest, port int, sessionID *string) map[string]any {
	a.t.Helper()
	m := a.read()
	if m["type"] != "request" || m["command"] != want.Command {
		a.t.Fatalf("VS Code sent %v here, the client sent %s %v", want.Command, m["command"], m["arguments"])
	}
	got, _ := m["arguments"].(map[string]any)
	exp := normalize(want.Arguments, port)
	if id, ok := got["__sessionId"].(string); ok {
		if !uuidRE.MatchString(id) {
			a.t.Errorf("%s: __sessionId %q is not a UUID", want.Command, id)
		}
		if sessionID != nil {
			*sessionID = id
		}
		if _, rec := exp["__sessionId"]; rec {
			exp["__sessionId"] = id
		}
	}
	if !reflect.DeepEqual(normalize(got, port), exp) {
		a.t.Errorf("%s arguments differ from VS Code's:\n got %v\nwant %v", want.Command, got, exp)
	}
	return m
}

func (a *fakeAdapter) reply(req map[string]any, body any) {
	a.write(map[string]any{"type": "response", "request_seq": req["seq"], "command": req["command"], "success": true, "body": body})
}

func (a *fakeAdapter) event(name string, body any) {
	a.write(map[string]any{"type": "event", "event": name, "body": body})
}

// normalize is v as JSON decodes it (nil arguments as an empty object),
// with the recording's IDE port replaced by port.
func normalize(v map[string]any, port int) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	b, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if c, ok := out["connect"].(map[string]any); ok && c["port"] == float64(recordedPort) {
		c["port"] = float64(port)
	}
	if c, ok := out["configuration"].(map[string]any); ok {
		out["configuration"] = normalize(c, port)
	}
	return out
}

// TestMatchesRecordedVSCode plays the adapter's side of a recorded VS Code
// session and checks that the client sends what real VS Code sent, in the
// same order: the root's initialize, attach and configuration; the child
// session VS Code opened on a new connection for the adapter's
// startDebugging; its requests after a stop; its toolbar Disconnect.
func TestMatchesRecordedVSCode(t *testing.T) {
	raw, err := os.ReadFile("testdata/vscode-1.139.1-s4.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec recorded
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	ide := New(Options{Workspace: rec.Workspace})
	defer ide.Close()
	ide.SetBreakpoints("/tmp/vscode-check/repo/examples/loans/loans.py", 36)
	ide.SetBreakpoints("/tmp/vscode-check/repo/examples/loans/loanlib.py", 12)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attached := make(chan error, 1)
	go func() {
		_, err := ide.Attach(ctx, map[string]any{"name": "sparkdap: attach to Spark workers", "type": "debugpy",
			"request": "attach", "connect": map[string]any{"host": "127.0.0.1", "port": port}, "justMyCode": false})
		attached <- err
	}()

	// The root session.
	root := accept(t, ln)
	root.reply(root.expect(rec.Root[0], port, nil), rec.Capabilities)
	var rootID string
	root.reply(root.expect(rec.Root[1], port, &rootID), nil)
	root.event("initialized", nil)
	for _, want := range rec.Root[2:6] {
		req := root.expect(want, port, nil)
		var body any
		if want.Command == "setBreakpoints" || want.Command == "setFunctionBreakpoints" {
			body = map[string]any{"breakpoints": []any{}}
		}
		root.reply(req, body)
	}
	root.reply(root.expect(rec.Root[6], port, nil), nil)
	root.reply(root.expect(rec.Root[7], port, nil), map[string]any{"threads": []any{}})
	if err := <-attached; err != nil {
		t.Fatal(err)
	}

	// startDebugging: a child session on a new connection.
	root.write(map[string]any{"type": "request", "command": "startDebugging", "arguments": normalize(rec.StartDebugging, port)})
	child := accept(t, ln)
	child.reply(child.expect(rec.Child[0], port, nil), rec.Capabilities)
	var childID string
	child.reply(child.expect(rec.Child[1], port, &childID), nil)
	if childID == rootID {
		t.Error("the child session has the root's session id")
	}
	child.event("initialized", nil)
	if m := root.read(); m["type"] != "response" || m["command"] != "startDebugging" || m["success"] != true {
		t.Errorf("startDebugging answered %v", m)
	}
	for _, want := range rec.Child[2:6] {
		req := child.expect(want, port, nil)
		var body any
		if want.Command == "setBreakpoints" || want.Command == "setFunctionBreakpoints" {
			body = map[string]any{"breakpoints": []any{}}
		}
		child.reply(req, body)
	}
	child.reply(child.expect(rec.Child[6], port, nil), nil)
	threads := map[string]any{"threads": []any{map[string]any{"id": 1, "name": "MainThread"}}}
	child.reply(child.expect(rec.Child[7], port, nil), threads)

	// A stop, as VS Code shows it.
	child.event("stopped", map[string]any{"reason": "breakpoint", "threadId": 1, "allThreadsStopped": true, "hitBreakpointIds": []any{3}})
	child.reply(child.expect(rec.Child[8], port, nil), threads)
	frame := func(id, line int, name string) map[string]any {
		return map[string]any{"id": id, "name": name, "line": line, "column": 1,
			"source": map[string]any{"path": "/tmp/vscode-check/repo/examples/loans/loanlib.py"}}
	}
	child.reply(child.expect(rec.Child[9], port, nil), map[string]any{"stackFrames": []any{frame(1, 12, "monthly_payment")}, "totalFrames": 14})
	rest := child.expect(rec.Child[10], port, nil)
	scopes := child.expect(rec.Child[11], port, nil)
	child.reply(scopes, map[string]any{"scopes": []any{map[string]any{"name": "Locals", "variablesReference": 1, "expensive": false}}})
	child.reply(rest, map[string]any{"stackFrames": []any{frame(2, 69, "<lambda>")}, "totalFrames": 14})
	child.reply(child.expect(rec.Child[12], port, nil), map[string]any{"variables": []any{
		map[string]any{"name": "n", "value": "60", "variablesReference": 0}}})
	var st *Stop
	select {
	case st = <-ide.Stops():
	case <-time.After(10 * time.Second):
		t.Fatal("the client showed no stop")
	}
	if st.Err != nil || len(st.Frames) != 2 || st.Locals["n"] != "60" || st.Thread != "MainThread" || st.Session.Parent == nil {
		t.Errorf("stop = %+v, err %v", st, st.Err)
	}

	// The toolbar's Disconnect in the child.
	done := make(chan map[string]any, 1)
	go func() { done <- st.Session.Disconnect() }()
	child.reply(child.expect(rec.ChildDisconnect, port, nil), nil)
	if got := <-done; !reflect.DeepEqual(got, map[string]any{"restart": false}) {
		t.Errorf("Disconnect sent %v", got)
	}
}

// TestDisconnectArgumentsFollowCapabilities: VS Code sends
// terminateDebuggee (and suspendDebuggee) only to an adapter that
// advertises supportTerminateDebuggee (and supportSuspendDebuggee).
func TestDisconnectArgumentsFollowCapabilities(t *testing.T) {
	f, tr := false, true
	for _, tc := range []struct {
		name       string
		caps       map[string]any
		disconnect map[string]any
		stop       map[string]any
	}{
		{"nothing advertised (sparkdap, as recorded)", map[string]any{"supportsTerminateDebuggee": true},
			map[string]any{"restart": false}, map[string]any{"restart": false}},
		{"supportTerminateDebuggee", map[string]any{"supportTerminateDebuggee": true},
			map[string]any{"restart": false, "terminateDebuggee": f}, map[string]any{"restart": false, "terminateDebuggee": tr}},
		{"and supportSuspendDebuggee", map[string]any{"supportTerminateDebuggee": true, "supportSuspendDebuggee": true},
			map[string]any{"restart": false, "terminateDebuggee": f, "suspendDebuggee": f}, map[string]any{"restart": false, "terminateDebuggee": tr}},
	} {
		for _, button := range []string{"Disconnect", "Stop"} {
			t.Run(fmt.Sprintf("%s/%s", tc.name, button), func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				a := accept(t, ln)
				s := &Session{caps: tc.caps, ended: make(chan struct{})}
				s.Client = dapclient.New(c)
				done := make(chan map[string]any, 1)
				go func() {
					if button == "Stop" {
						done <- s.Stop()
					} else {
						done <- s.Disconnect()
					}
				}()
				m := a.read()
				a.reply(m, nil)
				want := tc.disconnect
				if button == "Stop" {
					want = tc.stop
				}
				if !reflect.DeepEqual(m["arguments"], normalize(want, 0)) {
					t.Errorf("%s sent %v, want %v", button, m["arguments"], want)
				}
				<-done
			})
		}
	}
}
