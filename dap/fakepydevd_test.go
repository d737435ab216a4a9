package dap

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePydevd is an in-memory stand-in for pydevd's side of the wire, for
// fast protocol tests. It hands out the same local ids as every other fake
// (thread 1, frame 1, …), as real pydevd processes do, so collisions show.
// The integration tests use real debugpy.
type fakePydevd struct {
	t     testing.TB
	conn  net.Conn
	token string
	pid   int

	mu sync.Mutex
	// verify decides whether a line breakpoint binds; nil binds all.
	verify func(path string, line int) (bool, string)
	// framePath is the file of the frame it reports stopped in.
	framePath string
	// tamper, if set, edits each response before it is sent (a hostile
	// executor holding the token).
	tamper func(req Message, resp map[string]any)

	// armed is what pydevd would stop at: executor path → lines, and the
	// exception filters; suspended is whether it is stopped. Both follow
	// the proxy's requests as pydevd's state does.
	armed     map[string][]int64
	filters   []any
	suspended bool

	seq      int64
	requests []Message
	bpNext   int64
	changed  chan struct{}
	closed   chan struct{}
}

func dialFake(t testing.TB, addr, token string, pid int) *fakePydevd {
	t.Helper()
	return dialFakeVerify(t, addr, token, pid, nil)
}

// dialFakeVerify is dialFake with a verify function, set before the fake
// answers anything.
func dialFakeVerify(t testing.TB, addr, token string, pid int, verify func(string, int) (bool, string)) *fakePydevd {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("fake pydevd %d: dial %s: %v", pid, addr, err)
	}
	f := newFake(t, c, token, pid, verify)
	t.Cleanup(func() { c.Close() })
	return f
}

// newFake plays pydevd on conn, which the caller closes.
func newFake(t testing.TB, conn net.Conn, token string, pid int, verify func(string, int) (bool, string)) *fakePydevd {
	if derived, ok := helloTokens.LoadAndDelete(helloTokenKey(conn.RemoteAddr().String(), pid)); ok && token == testToken {
		// This process said hello: like the wrapper, its debugger presents
		// the one-time token the hello derived, never the token itself.
		token = derived.(string)
	}
	f := &fakePydevd{t: t, conn: conn, token: token, pid: pid, verify: verify,
		changed: make(chan struct{}), closed: make(chan struct{})}
	go f.serve()
	return f
}

func (f *fakePydevd) send(m map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq += 2 // pydevd counts 2, 4, 6, …
	m["seq"] = f.seq
	b, _ := json.Marshal(m)
	_, _ = f.conn.Write(appendFrame(nil, b))
}

func (f *fakePydevd) event(name string, body map[string]any) {
	f.send(map[string]any{"type": "event", "event": name, "body": body})
}

func (f *fakePydevd) serve() {
	defer close(f.closed)
	fr := NewFrameReader(f.conn, 0)
	for {
		b, err := fr.ReadFrame()
		if err != nil {
			return
		}
		m, err := DecodeMessage(b)
		if err != nil {
			f.t.Errorf("fake pydevd %d: proxy sent malformed message: %v", f.pid, err)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, m)
		f.track(m)
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		body, ok := f.answer(m)
		resp := map[string]any{"type": "response", "request_seq": m.Seq(), "command": m.Command(), "success": ok}
		if ok {
			resp["body"] = body
		} else {
			resp["message"] = fmt.Sprint(body["error"])
		}
		if m.Command() == "attach" {
			f.event("initialized", nil)
		}
		f.mu.Lock()
		tamper := f.tamper
		f.mu.Unlock()
		if tamper != nil {
			tamper(m, resp)
		}
		f.send(resp)
		if m.Command() == "continue" {
			f.event("continued", map[string]any{"threadId": 1, "allThreadsContinued": true})
		}
		if m.Command() == "disconnect" {
			if term, _ := m.Arguments()["terminateDebuggee"].(bool); term {
				// pydevd kills its process: the connection ends.
				f.conn.Close()
				return
			}
		}
	}
}

// track updates the modelled pydevd state for request m. Callers hold f.mu.
func (f *fakePydevd) track(m Message) {
	args := m.Arguments()
	switch m.Command() {
	case "setBreakpoints":
		src, _ := args["source"].(map[string]any)
		path, _ := src["path"].(string)
		bps, _ := args["breakpoints"].([]any)
		var lines []int64
		for _, b := range bps {
			if bm, ok := b.(map[string]any); ok {
				l, _ := toInt(bm["line"])
				lines = append(lines, l)
			}
		}
		if f.armed == nil {
			f.armed = map[string][]int64{}
		}
		if len(lines) == 0 {
			delete(f.armed, path)
		} else {
			f.armed[path] = lines
		}
	case "setExceptionBreakpoints":
		f.filters, _ = args["filters"].([]any)
	case "continue":
		f.suspended = false
	case "disconnect":
		f.armed, f.filters, f.suspended = nil, nil, false
	}
}

// hit runs the worker's code at path:line: it stops there, as pydevd
// does, if a breakpoint is armed at that executor path. It reports whether
// it stopped.
func (f *fakePydevd) hit(path string, line int64) bool {
	f.mu.Lock()
	stop := !f.suspended && slices.Contains(f.armed[path], line)
	if stop {
		f.suspended = true
	}
	f.mu.Unlock()
	if stop {
		f.stop()
	}
	return stop
}

// state reports whether the fake is stopped, and a description of what
// is still armed ("" for nothing).
func (f *fakePydevd) state() (suspended bool, armed string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for p, lines := range f.armed {
		parts = append(parts, fmt.Sprintf("%s:%v", p, lines))
	}
	if len(f.filters) > 0 {
		parts = append(parts, fmt.Sprintf("exceptions %v", f.filters))
	}
	sort.Strings(parts)
	return f.suspended, strings.Join(parts, " ")
}

// answer plays pydevd: the same answers, with ids from per-process counters.
func (f *fakePydevd) answer(m Message) (map[string]any, bool) {
	args := m.Arguments()
	f.mu.Lock()
	verify, framePath := f.verify, f.framePath
	f.mu.Unlock()
	switch m.Command() {
	case "pydevdAuthorize":
		return map[string]any{"clientAccessToken": f.token}, true
	case "pydevdSystemInfo":
		return map[string]any{
			"python":   map[string]any{"version": "3.11.7final0"},
			"platform": map[string]any{"name": "linux"},
			"process":  map[string]any{"pid": f.pid, "ppid": 1, "executable": "/usr/bin/python3"}}, true
	case "initialize", "attach", "configurationDone", "setFunctionBreakpoints", "setExceptionBreakpoints", "disconnect":
		return map[string]any{}, true
	case "setBreakpoints":
		src, _ := args["source"].(map[string]any)
		path, _ := src["path"].(string)
		var out []any
		bps, _ := args["breakpoints"].([]any)
		for _, b := range bps {
			line, _ := toInt(b.(map[string]any)["line"])
			ok, msg := true, ""
			if verify != nil {
				ok, msg = verify(path, int(line))
			}
			f.mu.Lock()
			id := f.bpNext
			f.bpNext++
			f.mu.Unlock()
			bp := map[string]any{"id": id, "verified": ok, "line": line, "source": map[string]any{"path": path}}
			if msg != "" {
				bp["message"] = msg
			}
			out = append(out, bp)
		}
		return map[string]any{"breakpoints": out}, true
	case "threads":
		return map[string]any{"threads": []any{map[string]any{"id": 1, "name": "MainThread"}}}, true
	case "stackTrace":
		if tid, _ := toInt(args["threadId"]); tid != 1 {
			return map[string]any{"error": fmt.Sprintf("unknown thread %d", tid)}, false
		}
		path := framePath
		if path == "" {
			path = "/job/udf.py"
		}
		return map[string]any{"stackFrames": []any{map[string]any{"id": 2, "name": "compute", "line": 5,
			"column": 1, "source": map[string]any{"path": path, "sourceReference": 4}}}, "totalFrames": 1}, true
	case "scopes":
		return map[string]any{"scopes": []any{map[string]any{"name": "Locals", "variablesReference": 3}}}, true
	case "variables":
		if ref, _ := toInt(args["variablesReference"]); ref != 3 {
			return map[string]any{"error": fmt.Sprintf("unknown reference %d", ref)}, false
		}
		return map[string]any{"variables": []any{map[string]any{"name": "pid", "value": fmt.Sprint(f.pid), "variablesReference": 0}}}, true
	case "evaluate":
		if fid, _ := toInt(args["frameId"]); fid != 2 {
			return map[string]any{"error": fmt.Sprintf("unknown frame %d", fid)}, false
		}
		return map[string]any{"result": fmt.Sprint(f.pid), "variablesReference": 0}, true
	case "continue":
		return map[string]any{"allThreadsContinued": true}, true
	}
	// Anything else: echo the arguments, so passthrough can be checked.
	return map[string]any{"echo": args}, true
}

// stop reports a breakpoint hit on thread 1, as pydevd does.
func (f *fakePydevd) stop() {
	f.event("stopped", map[string]any{"reason": "breakpoint", "threadId": 1, "allThreadsStopped": true,
		"hitBreakpointIds": []any{0}})
}

// waitRequest waits until the proxy has sent a request matching match.
func (f *fakePydevd) waitRequest(command string, match func(Message) bool) Message {
	f.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		for _, r := range f.requests {
			if r.Command() == command && (match == nil || match(r)) {
				f.mu.Unlock()
				return r
			}
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-f.closed:
			f.t.Fatalf("fake pydevd %d: connection closed while waiting for %s; got %s", f.pid, command, f.commands())
		case <-deadline:
			f.t.Fatalf("fake pydevd %d: no %s request within 5s; got %s", f.pid, command, f.commands())
		}
	}
}

func (f *fakePydevd) commands() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, r := range f.requests {
		names = append(names, r.Command())
	}
	return strings.Join(names, ",")
}

func (f *fakePydevd) waitClosed() {
	f.t.Helper()
	select {
	case <-f.closed:
	case <-time.After(5 * time.Second):
		f.t.Fatalf("fake pydevd %d: proxy did not close the connection", f.pid)
	}
}
