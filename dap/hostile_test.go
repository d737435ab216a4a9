package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// The hostile suite plays attackers against a real Hub serving on
// loopback: peers on the executor port that hold no token or a stolen
// one, and other local users on the IDE port. Each test asserts the safe
// outcome a user would check.

// TestChildAttachNeedsOneTimeKey: a second local client cannot take an
// executor from the developer's child-session root by naming its id; only
// the configuration the proxy handed the root opens the child, once.
func TestChildAttachNeedsOneTimeKey(t *testing.T) {
	p := startProxy(t, nil)
	ctx := p.ctx
	asks := make(chan json.RawMessage, 4)
	release := make(chan struct{})
	root, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	defer close(release) // before root.Close, which waits for the handler
	root.OnReverseRequest(func(command string, args json.RawMessage) (bool, any) {
		if command == "startDebugging" {
			asks <- args
		}
		<-release
		return true, nil
	})
	if _, err := root.Initialize(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := root.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach"}, nil); err != nil {
		t.Fatal(err)
	}
	p.executor(320, nil).stop() // listed once it stops
	var req dapclient.StartDebugging
	select {
	case args := <-asks:
		if err := json.Unmarshal(args, &req); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no startDebugging request")
	}
	var cfg map[string]any
	if err := json.Unmarshal(req.Configuration, &cfg); err != nil {
		t.Fatal(err)
	}
	key, _ := cfg[ChildKeyArg].(string)
	if len(key) < 32 {
		t.Fatalf("startDebugging configuration has no one-time %s: %v", ChildKeyArg, cfg)
	}
	attacker := func(args map[string]any) *dapclient.Response {
		t.Helper()
		c, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Initialize(ctx, false); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Request(ctx, "attach", args)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	id := cfg["sparkdapExecutor"]
	for _, args := range []map[string]any{
		{"sparkdapExecutor": id},
		{"sparkdapExecutor": id, ChildKeyArg: ""},
		{"sparkdapExecutor": id, ChildKeyArg: strings.Repeat("0", len(key))},
	} {
		if resp := attacker(args); resp.Success {
			t.Fatalf("a child attach with %v was accepted", args)
		}
	}
	child, err := dapclient.StartChild(ctx, &req, nil)
	if err != nil {
		t.Fatalf("the root's own child session, after the refused attempts: %v", err)
	}
	if err := child.Disconnect(ctx, false); err != nil {
		t.Fatal(err)
	}
	child.Close()
	// Its child gone, the executor's id and the used value open nothing.
	if resp := attacker(map[string]any{"sparkdapExecutor": id, ChildKeyArg: key}); resp.Success {
		t.Fatal("the one-time value opened a second child session")
	}
}

// rawPeer is an attacker speaking raw DAP on a TCP connection.
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	fr   *dapwire.FrameReader
	seq  int
}

func dialRaw(t *testing.T, addr string) *rawPeer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawPeer{t: t, conn: c, fr: dapwire.NewFrameReader(c, 0)}
}

// send writes one message; errors are ignored (the proxy may have hung up).
func (r *rawPeer) send(m map[string]any) {
	r.seq++
	m["seq"] = r.seq
	b, _ := json.Marshal(m)
	_ = r.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = r.conn.Write(dapwire.AppendFrame(nil, b))
}

func (r *rawPeer) event(name string, body map[string]any) {
	r.send(map[string]any{"type": "event", "event": name, "body": body})
}

// read returns the next message, or nil once the connection is closed.
func (r *rawPeer) read() Message {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := r.fr.ReadFrame()
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			r.t.Fatal("the proxy neither spoke nor hung up within 10s")
		}
		return nil
	}
	m, err := dapwire.DecodeMessage(b)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// TestNothingBeforeAdmission: a peer on the executor port that never
// presents the token gets nothing relayed, learns no breakpoint, does not
// become the focused executor, and loses its connection.
func TestNothingBeforeAdmission(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, "/job/secret.py", 7)
		return err
	})
	r := dialRaw(t, p.srv.ExecutorAddr().String())
	first := r.read()
	if first.Command() != "pydevdAuthorize" {
		t.Fatalf("first message to an executor: %v", first)
	}
	r.event("output", map[string]any{"category": "stdout", "output": "attacker was here\n"})
	r.event("stopped", map[string]any{"reason": "breakpoint", "threadId": 1})
	r.event("sparkdapTask", map[string]any{"pid": 1, "roots": map[string]any{"cwd": "/evil"}})
	for {
		m := r.read()
		if m == nil {
			break
		}
		if m.Command() == "setBreakpoints" {
			t.Fatalf("an unadmitted peer was sent a breakpoint: %v", m)
		}
	}
	// A legitimate executor afterwards is served normally, and the IDE
	// heard nothing of the attacker.
	f := p.executor(330, nil)
	f.event("output", map[string]any{"category": "stdout", "output": "legit\n"})
	if _, err := c.WaitEvent(p.ctx, "output", nil); err != nil {
		t.Fatal(err)
	}
	for _, ev := range c.Events() {
		if ev.Event == "stopped" || strings.Contains(string(ev.Body), "attacker") {
			t.Errorf("the IDE got %s %s from an unadmitted peer", ev.Event, ev.Body)
		}
	}
	tx := p.hub.lock()
	focused := tx.focused
	tx.unlock()
	if focused != nil {
		t.Errorf("an unadmitted peer became the focused executor %d", focused.id)
	}
}

// TestOnlyAllowedEventsReachIDE: an executor holding the token cannot make
// the IDE act. Events that VS Code acts on (debugpyAttach starts any debug
// configuration), capabilities, exited, memory, progress, invalidated and
// telemetry output stay with the proxy; relayed events and responses carry
// only the fields the IDE needs; executors' reverse requests never reach it.
func TestOnlyAllowedEventsReachIDE(t *testing.T) {
	p := startProxy(t, nil)
	var raw syncbuf.Buffer
	c, err := dapclient.Dial(p.ctx, p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetTrace(func(format string, args ...any) {
		if line := fmt.Sprintf(format, args...); strings.HasPrefix(line, "dapclient <- ") {
			fmt.Fprintln(&raw, line) // what the proxy sent
		}
	})
	reverse := make(chan string, 8)
	c.OnReverseRequest(func(command string, _ json.RawMessage) (bool, any) {
		reverse <- command
		return false, nil
	})
	if _, err := c.Initialize(p.ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(p.ctx, map[string]any{"type": "debugpy", "request": "attach"}, nil); err != nil {
		t.Fatal(err)
	}
	tx := p.hub.lock()
	tx.ide(tx.root).childMode = false // merged: every event of the executor would reach the root
	tx.unlock()
	f := p.executor(340, nil)
	evil := map[string]any{"type": "node", "request": "launch", "name": "x", "program": "/bin/sh", "args": []any{"-c", "touch /tmp/pwned"}}
	for _, ev := range []struct {
		name string
		body map[string]any
	}{
		{"debugpyAttach", evil},
		{"capabilities", map[string]any{"capabilities": map[string]any{"supportsRestartRequest": true}}},
		{"exited", map[string]any{"exitCode": 0}},
		{"memory", map[string]any{"memoryReference": "0", "offset": 0, "count": 1}},
		{"progressStart", map[string]any{"progressId": "p", "title": "attacker"}},
		{"invalidated", map[string]any{"areas": []any{"all"}}},
		{"output", map[string]any{"category": "telemetry", "output": "attacker", "data": evil}},
		{"output", map[string]any{"category": "stdout", "output": "hello\n", "data": evil}},
	} {
		f.event(ev.name, ev.body)
	}
	for _, cmd := range []string{"runInTerminal", "startDebugging"} {
		f.send(map[string]any{"type": "request", "command": cmd, "arguments": map[string]any{"request": "launch", "configuration": evil}})
	}
	f.event("stopped", map[string]any{"reason": "breakpoint", "threadId": 1, "allThreadsStopped": true, "evil": evil})
	tid := stoppedOn(p.ctx, t, c)
	f.SetTamper(func(req fakepydevd.Message, resp map[string]any) {
		if req.Command == "sparkCustomThing" {
			resp["command"] = "startDebugging"
			resp["arguments"] = map[string]any{"request": "launch", "configuration": evil}
			resp["event"] = "debugpyAttach"
		}
	})
	resp, err := c.Request(p.ctx, "sparkCustomThing", map[string]any{"threadId": tid})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Command != "sparkCustomThing" {
		t.Errorf("response command = %q, want the IDE's own request's", resp.Command)
	}
	f.event("output", map[string]any{"category": "stdout", "output": "end\n"})
	if _, err := c.WaitEvent(p.ctx, "output", func(b json.RawMessage) bool { return strings.Contains(string(b), "end") }); err != nil {
		t.Fatal(err)
	}
	for _, ev := range c.Events() {
		switch ev.Event {
		case "initialized", "stopped", "output":
		default:
			t.Errorf("event %s %s reached the IDE", ev.Event, ev.Body)
		}
	}
	for _, bad := range []string{"pwned", "attacker", `"evil"`, `"data"`, `"arguments"`} {
		if strings.Contains(raw.String(), bad) {
			t.Errorf("the IDE was sent %s:\n%s", bad, raw.String())
		}
	}
	select {
	case cmd := <-reverse:
		t.Errorf("an executor's %s request reached the IDE", cmd)
	default:
	}
}

// TestUnmappedPathsNeverReachIDE: an executor cannot make the IDE open a
// laptop file by naming it: a path the mapper does not map to a file under
// the roots reaches the IDE only as a sourceReference, in stack frames and
// in every event that carries a source or a module.
func TestUnmappedPathsNeverReachIDE(t *testing.T) {
	const secret = "/home/me/.ssh/id_rsa"
	p := leaveProxy(t)
	c := p.ide(false, nil)
	f := p.mappedExecutor(350)
	for _, tc := range []struct {
		frame string
		want  string // the path the IDE gets; "" for none
	}{{leaveRemote, leaveLocal}, {secret, ""}, {"../../.ssh/id_rsa", ""}} {
		f.SetFramePath(tc.frame)
		f.stop()
		tid := stoppedOn(p.ctx, t, c)
		frames, err := c.StackTrace(p.ctx, tid)
		if err != nil || len(frames) != 1 || frames[0].Source == nil {
			t.Fatalf("stackTrace = %+v, %v", frames, err)
		}
		src := frames[0].Source
		if src.Path != tc.want {
			t.Errorf("frame in executor file %s reached the IDE with path %q, want %q", tc.frame, src.Path, tc.want)
		}
		if tc.want == "" && src.SourceReference == 0 {
			t.Errorf("unmapped frame %s has no sourceReference to fetch its text: %+v", tc.frame, src)
		}
		if err := c.Continue(p.ctx, tid); err != nil {
			t.Fatal(err)
		}
	}
	f.event("output", map[string]any{"category": "stdout", "output": "o\n", "source": map[string]any{"path": secret}, "line": 1})
	f.event("loadedSource", map[string]any{"reason": "new", "source": map[string]any{"path": secret, "sourceReference": 9,
		"sources": []any{map[string]any{"path": secret}}}})
	f.event("module", map[string]any{"reason": "new", "module": map[string]any{"id": 1, "name": "m", "path": secret}})
	f.event("output", map[string]any{"category": "stdout", "output": "end\n"})
	if _, err := c.WaitEvent(p.ctx, "output", func(b json.RawMessage) bool { return strings.Contains(string(b), "end") }); err != nil {
		t.Fatal(err)
	}
	for _, ev := range c.Events() {
		if strings.Contains(string(ev.Body), ".ssh") && strings.Contains(string(ev.Body), `"path"`) {
			t.Errorf("%s event carries the laptop path: %s", ev.Event, ev.Body)
		}
	}
}

// TestUnadmittedPeersLeaveNothing: peers that never present the token and
// name many ids in their events leave the proxy's memory and id table as
// they found them.
func TestUnadmittedPeersLeaveNothing(t *testing.T) {
	p := startProxy(t, func(c *Config) {
		c.HandshakeTimeout = 500 * time.Millisecond
		c.Log = c.Log.Level(zerolog.InfoLevel)
	})
	p.ide(false, nil)
	vars := make([]any, 5000)
	for i := range vars {
		vars[i] = map[string]any{"variablesReference": i + 1, "threadId": i + 1}
	}
	base := measure()
	const peers = 100
	for i := 0; i < peers; i += 10 {
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := dialRaw(t, p.srv.ExecutorAddr().String())
				r.read() // pydevdAuthorize, left unanswered
				r.event("output", map[string]any{"category": "stdout", "output": "x", "data": vars})
				r.event("thread", map[string]any{"reason": "started", "threadId": 7, "data": vars})
				for r.read() != nil {
				}
				r.conn.Close()
			}()
		}
		wg.Wait()
	}
	waitFor(t, "no executor left", func() (bool, string) {
		tx := p.hub.lock()
		defer tx.unlock()
		return len(tx.executors) == 0, fmt.Sprint(len(tx.executors))
	})
	for k := range nKinds {
		if n := p.hub.ids.Len(k); n != 0 {
			t.Errorf("%d %s ids still held after %d unadmitted peers left", n, k, peers)
		}
	}
	now := settle(base, 20)
	if grown := int64(now.heap) - int64(base.heap); grown > 32<<20 {
		t.Errorf("heap grew by %d MiB after %d unadmitted peers left", grown>>20, peers)
	}
}

// failingListener fails its first n Accepts as a process out of file
// descriptors does.
type failingListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (f *failingListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

// TestServeSurvivesAcceptErrors: running out of file descriptors fails
// accepts for a while; the proxy keeps its sessions and serves again after.
func TestServeSurvivesAcceptErrors(t *testing.T) {
	hub := NewHub(Config{Token: testToken, Log: zerolog.New(zerolog.NewTestWriter(t))})
	defer hub.Close()
	srv, err := Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.exe = &failingListener{Listener: srv.exe, n: 8}
	srv.ide = &failingListener{Listener: srv.ide, n: 8}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	p := &testProxy{t: t, hub: hub, srv: srv, ctx: ctx}
	c := p.ide(false, nil)
	f := p.executor(360, nil)
	f.stop()
	stoppedOn(ctx, t, c)
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v after accept errors", err)
	default:
	}
	cancel()
	<-done
}

// TestHandshakeLimits: connections that never present a token or never
// attach are bounded in number (the oldest silent one makes room for a
// newcomer) and in time.
func TestHandshakeLimits(t *testing.T) {
	p := startProxy(t, func(c *Config) {
		c.MaxUnadmitted = 4
		c.AttachTimeout = 300 * time.Millisecond
	})
	var idle []*rawPeer
	for range 4 {
		r := dialRaw(t, p.srv.ExecutorAddr().String())
		if m := r.read(); m.Command() != "pydevdAuthorize" {
			t.Fatalf("first message: %v", m)
		}
		idle = append(idle, r)
	}
	// A newcomer to the full budget is served: the oldest connection that
	// sent nothing makes room.
	fifth := dialRaw(t, p.srv.ExecutorAddr().String())
	if m := fifth.read(); m.Command() != "pydevdAuthorize" {
		t.Fatalf("a newcomer to a full budget was not served: %v", m)
	}
	if m := idle[0].read(); m != nil {
		t.Fatalf("the oldest silent connection was not closed to make room: %v", m)
	}
	idle = append(idle[1:], fifth)
	for _, r := range idle {
		r.conn.Close()
	}
	waitFor(t, "places given back", func() (bool, string) {
		n, _ := p.hub.exeBudget.InUse()
		return n == 0, fmt.Sprint(n)
	})
	p.executor(370, nil)
	// An IDE connection that never attaches is closed.
	r := dialRaw(t, p.srv.IDEAddr().String())
	if m := r.read(); m != nil {
		t.Fatalf("the proxy spoke first to an IDE: %v", m)
	}
}

// TestBreakpointEditWhileExecutorLeaves: a breakpoint edit that reaches an
// executor whose connection has just closed (its session not yet cleaned
// up) is answered, and the Hub stays usable: the failed send's callback
// must not run under the Hub lock the edit holds.
func TestBreakpointEditWhileExecutorLeaves(t *testing.T) {
	h := NewHub(Config{Token: testToken, Log: zerolog.New(zerolog.NewTestWriter(t))})
	defer h.Close()
	exConn, exPeer := net.Pipe()
	defer exPeer.Close()
	es := newExecutorSession(h, h.nextID.Add(1), exConn, exConn)
	ideConn, idePeer := net.Pipe()
	defer idePeer.Close()
	ide := newIDESession(h, h.nextID.Add(1), ideConn, ideConn)
	tx := h.lock()
	tx.exec(es).ready = true
	tx.executors[es.id] = es
	tx.children[es.id] = ide // child-session mode: the one target
	ide.executor.Store(es)
	tx.ide(ide).attached = true
	tx.unlock()
	es.w.close(errors.New("worker left")) // every send fails from now on

	replies := make(chan Message, 1)
	go func() {
		fr := dapwire.NewFrameReader(idePeer, 0)
		if b, err := fr.ReadFrame(); err == nil {
			if m, err := dapwire.DecodeMessage(b); err == nil {
				replies <- m
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ide.handle(Message{"seq": json.Number("1"), "type": "request", "command": "setBreakpoints",
			"arguments": map[string]any{"source": map[string]any{"path": "/job/udf.py"}, "breakpoints": []any{map[string]any{"line": 5}}}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("setBreakpoints did not return: the Hub is deadlocked")
	}
	select {
	case m := <-replies:
		if m.Command() != "setBreakpoints" {
			t.Fatalf("the IDE got %v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the breakpoint edit was never answered")
	}
	locked := make(chan struct{})
	go func() {
		h.lock().unlock() // only probing that the lock can be taken
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("the Hub lock is held forever")
	}
}

// TestThreadFloodIsBounded: an admitted executor that announces thread
// after thread cannot grow the proxy's memory without end. Past
// maxThreadsPerExecutor its thread events are dropped (nothing reaches
// the IDE, no id is allocated), and a stop on such a thread is resumed
// rather than left holding the task.
func TestThreadFloodIsBounded(t *testing.T) {
	p := startProxy(t, nil)
	p.ide(false, nil) // merged root: events are forwarded, so ids would be allocated
	f := p.executor(330, nil)
	const flood = maxThreadsPerExecutor + 500
	for i := range flood {
		f.event("thread", map[string]any{"reason": "started", "threadId": 1000 + i})
	}
	over := int64(1000 + flood + 1)
	f.event("stopped", map[string]any{"reason": "breakpoint", "threadId": over, "allThreadsStopped": false})
	if _, err := f.awaitRequest("continue", func(m Message) bool {
		id, _ := toInt(m.Arguments()["threadId"])
		return id == over
	}, 20*time.Second); err != nil {
		t.Fatalf("a stop on a thread over the limit was not resumed: %v", err)
	}
	tx := p.hub.lock()
	var held int
	for _, es := range tx.executors {
		held += len(tx.exec(es).threads)
	}
	tx.unlock()
	if held > maxThreadsPerExecutor+1 { // +1: the fake's own MainThread may come first
		t.Errorf("the proxy holds %d threads of one executor, limit %d", held, maxThreadsPerExecutor)
	}
	if n := p.hub.ids.Len(kindThread); n > maxThreadsPerExecutor+1 {
		t.Errorf("%d global thread ids allocated for one executor, limit %d", n, maxThreadsPerExecutor)
	}
}
