package fakepydevd

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// adapterSide plays a debug adapter on the accepted end of a fake's
// connection.
type adapterSide struct {
	t   *testing.T
	c   net.Conn
	fr  *dapwire.FrameReader
	seq int
}

func (a *adapterSide) send(command string, args any) int {
	a.t.Helper()
	a.seq++
	b, _ := json.Marshal(map[string]any{"seq": a.seq, "type": "request", "command": command, "arguments": args})
	if _, err := a.c.Write(dapwire.AppendFrame(nil, b)); err != nil {
		a.t.Fatal(err)
	}
	return a.seq
}

type msg struct {
	Seq        int            `json:"seq"`
	Type       string         `json:"type"`
	Event      string         `json:"event"`
	Command    string         `json:"command"`
	RequestSeq int            `json:"request_seq"`
	Success    bool           `json:"success"`
	Body       map[string]any `json:"body"`
}

// call sends a request and returns its response, collecting events seen
// on the way.
func (a *adapterSide) call(command string, args any, events *[]string) msg {
	a.t.Helper()
	seq := a.send(command, args)
	for {
		_ = a.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := a.fr.ReadFrame()
		if err != nil {
			a.t.Fatalf("%s: %v", command, err)
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			a.t.Fatal(err)
		}
		if m.Seq%2 != 0 {
			a.t.Errorf("seq %d: pydevd's seq numbers are even", m.Seq)
		}
		if m.Type == "event" {
			*events = append(*events, m.Event)
			continue
		}
		if m.RequestSeq != seq || m.Command != command {
			a.t.Fatalf("got response %+v, want one to %s (seq %d)", m, command, seq)
		}
		return m
	}
}

func TestHandshakeAndRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Dial(ctx, ln.Addr().String(), Config{Token: "tok", PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := &adapterSide{t: t, c: c, fr: dapwire.NewFrameReader(c, 1<<20)}
	var events []string

	if m := a.call("pydevdAuthorize", map[string]any{"debugServerAccessToken": nil}, &events); m.Body["clientAccessToken"] != "tok" {
		t.Errorf("pydevdAuthorize body %v", m.Body)
	}
	m := a.call("pydevdSystemInfo", nil, &events)
	if proc, _ := m.Body["process"].(map[string]any); proc["pid"] != 4242.0 {
		t.Errorf("pydevdSystemInfo body %v", m.Body)
	}
	a.call("initialize", map[string]any{"adapterID": "debugpy"}, &events)
	a.call("attach", map[string]any{}, &events)
	src := map[string]any{"source": map[string]any{"path": "/x.py"}, "breakpoints": []any{map[string]any{"line": 3}, map[string]any{"line": 5}}}
	var ids []float64
	for range 2 {
		m := a.call("setBreakpoints", src, &events)
		for _, b := range m.Body["breakpoints"].([]any) {
			bp := b.(map[string]any)
			if bp["verified"] != true {
				t.Errorf("breakpoint %v not verified", bp)
			}
			ids = append(ids, bp["id"].(float64))
		}
	}
	if want := []float64{0, 1, 2, 3}; len(ids) != 4 || ids[0] != want[0] || ids[3] != want[3] {
		t.Errorf("breakpoint ids %v, want %v (one counter from 0)", ids, want)
	}
	select {
	case <-p.Configured():
		t.Fatal("configured before configurationDone")
	default:
	}
	a.call("configurationDone", nil, &events)
	select {
	case <-p.Configured():
	case <-time.After(5 * time.Second):
		t.Fatal("not configured after configurationDone")
	}
	if m := a.call("threads", map[string]any{}, &events); len(m.Body["threads"].([]any)) != 1 {
		t.Errorf("threads body %v", m.Body)
	}
	if m := a.call("evaluate", map[string]any{"expression": "pid", "frameId": 2}, &events); m.Body["result"] != "4242" {
		t.Errorf("evaluate body %v", m.Body)
	}
	if m := a.call("evaluate", map[string]any{"expression": "pid", "frameId": 9}, &events); m.Success {
		t.Error("evaluate in an unknown frame succeeded")
	}
	if err := p.SendOutput(OutputEvent("stdout", "hello\n")); err != nil {
		t.Fatal(err)
	}
	a.call("threads", map[string]any{}, &events)
	if want := []string{"initialized", "thread", "output"}; len(events) != 3 || events[0] != want[0] || events[1] != want[1] || events[2] != want[2] {
		t.Errorf("events %v, want %v", events, want)
	}
	if got := p.Count("setBreakpoints"); got != 2 {
		t.Errorf("Count(setBreakpoints) = %d, want 2", got)
	}
	c.Close()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("peer did not notice the closed connection")
	}
}

// TestRecording checks what the proxy's protocol tests script the fake with:
// recorded messages, breakpoint verification, the modelled stop state,
// echoed unknown requests, tampered responses and terminateDebuggee.
func TestRecording(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Dial(ctx, ln.Addr().String(), Config{Token: "tok", PID: 7, Record: true, EchoUnknown: true,
		NoThreadEvent: true, Verify: func(path string, line int) (bool, string) {
			if line == 4 {
				return false, "no code on line 4"
			}
			return true, ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := &adapterSide{t: t, c: c, fr: dapwire.NewFrameReader(c, 1<<20)}
	var events []string

	a.call("attach", map[string]any{}, &events)
	m := a.call("setBreakpoints", map[string]any{"source": map[string]any{"path": "/x.py"},
		"breakpoints": []any{map[string]any{"line": 3}, map[string]any{"line": 4}}}, &events)
	bps := m.Body["breakpoints"].([]any)
	if b := bps[0].(map[string]any); b["verified"] != true {
		t.Errorf("line 3: %v, want verified", b)
	}
	if b := bps[1].(map[string]any); b["verified"] != false || b["message"] != "no code on line 4" {
		t.Errorf("line 4: %v, want unverified with Verify's message", b)
	}
	a.call("configurationDone", nil, &events)
	got, err := p.WaitRequest(ctx, "setBreakpoints", func(m Message) bool { return m.Arguments["source"] != nil })
	if err != nil || got.Seq != 2 || !strings.Contains(string(got.Raw), `"/x.py"`) {
		t.Errorf("WaitRequest(setBreakpoints) = %+v, %v", got, err)
	}
	if cmds := p.Commands(); cmds != "attach,setBreakpoints,configurationDone" {
		t.Errorf("Commands() = %q", cmds)
	}
	if want := []string{"initialized"}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v (no thread event with NoThreadEvent)", events, want)
	}

	if stopped, _ := p.Hit("/x.py", 9); stopped {
		t.Error("stopped at a line with no breakpoint")
	}
	if stopped, err := p.Hit("/x.py", 3); !stopped || err != nil {
		t.Errorf("Hit at an armed line = %v, %v; want a stop", stopped, err)
	}
	if susp, armed := p.State(); !susp || armed != "/x.py:[3 4]" {
		t.Errorf("State() = %v, %q", susp, armed)
	}
	if id, ok := p.ArmedID("/x.py", 4); !ok || id != 1 {
		t.Errorf("ArmedID(/x.py, 4) = %d, %v; want 1, the id the setBreakpoints answer gave it", id, ok)
	}
	if m := a.call("sparkCustom", map[string]any{"k": "v"}, &events); !m.Success || m.Body["echo"].(map[string]any)["k"] != "v" {
		t.Errorf("unknown request answered %+v, want its arguments echoed", m)
	}
	p.SetTamper(func(req Message, resp map[string]any) {
		if req.Command == "threads" {
			resp["success"] = false
		}
	})
	if m := a.call("threads", nil, &events); m.Success {
		t.Error("tampered response sent untampered")
	}
	p.SetTamper(nil)
	p.SetFramePath("/elsewhere.py")
	m = a.call("stackTrace", map[string]any{"threadId": 1}, &events)
	if src := m.Body["stackFrames"].([]any)[0].(map[string]any)["source"].(map[string]any); src["path"] != "/elsewhere.py" {
		t.Errorf("frame source %v, want SetFramePath's", src)
	}
	a.call("continue", map[string]any{"threadId": 1}, &events)
	if susp, _ := p.State(); susp {
		t.Error("still stopped after continue")
	}
	short, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel()
	if _, err := p.WaitRequest(short, "never", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitRequest for a request never sent = %v, want its context's deadline", err)
	}

	a.call("disconnect", map[string]any{"terminateDebuggee": true}, &events)
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("terminateDebuggee did not end the connection")
	}
	if susp, armed := p.State(); susp || armed != "" {
		t.Errorf("State() after disconnect = %v, %q; want nothing armed", susp, armed)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if _, err := p.WaitRequest(wctx, "never", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitRequest after the end = %v, want ErrClosed", err)
	}
}
