package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"
	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

const testToken = "s3cret"

// testProxy is a Hub serving on loopback ports for one test.
type testProxy struct {
	t   *testing.T
	hub *Hub
	srv *Server
	ctx context.Context
}

func startProxy(t *testing.T, mod func(*Config)) *testProxy {
	t.Helper()
	cfg := Config{Token: testToken, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
		FanoutTimeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	hub := NewHub(cfg)
	srv, err := Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Generous: the load tests run minutes under -race on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && err != context.DeadlineExceeded {
			t.Errorf("Serve: %v", err)
		}
		// Its refusal logs' timers would otherwise log through t after
		// the test.
		hub.Close()
	})
	return &testProxy{t: t, hub: hub, srv: srv, ctx: ctx}
}

// ide attaches a DAP client as the root session.
func (p *testProxy) ide(childSessions bool, configure func(ctx context.Context, c *dapclient.Client) error) *dapclient.Client {
	p.t.Helper()
	c, err := dapclient.Dial(p.ctx, p.srv.IDEAddr().String())
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(p.ctx, childSessions); err != nil {
		p.t.Fatal(err)
	}
	var conf func(context.Context) error
	if configure != nil {
		conf = func(ctx context.Context) error { return configure(ctx, c) }
	}
	if err := c.Attach(p.ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false}, conf); err != nil {
		p.t.Fatal(err)
	}
	return c
}

// childRoot attaches a root session that opens a child session per
// executor, as VS Code does (attach arguments: type, request and extra).
// Each child is set up with configure (nil: nothing before
// configurationDone) and arrives on the channel; nextChild takes it.
func (p *testProxy) childRoot(extra map[string]any, configure func(ctx context.Context, child *dapclient.Client) error) (*dapclient.Client, <-chan dapclient.Child) {
	p.t.Helper()
	root, err := dapclient.Dial(p.ctx, p.srv.IDEAddr().String())
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { root.Close() })
	children := root.FollowChildren(p.ctx, configure)
	if _, err := root.Initialize(p.ctx, true); err != nil {
		p.t.Fatal(err)
	}
	args := map[string]any{"type": "debugpy", "request": "attach"}
	for k, v := range extra {
		args[k] = v
	}
	if err := root.Attach(p.ctx, args, nil); err != nil {
		p.t.Fatalf("root attach: %v", err)
	}
	return root, children
}

// nextChild waits for the next child session a childRoot opens; it is
// closed when the test ends.
func (p *testProxy) nextChild(children <-chan dapclient.Child) dapclient.Child {
	p.t.Helper()
	select {
	case child := <-children:
		if child.Err != nil {
			p.t.Fatalf("child session: %v", child.Err)
		}
		p.t.Cleanup(func() { child.Client.Close() })
		return child
	case <-p.ctx.Done():
		p.t.Fatal("no child session was started")
	}
	return dapclient.Child{}
}

// executor connects a fake pydevd and waits until the proxy has put it in
// service.
func (p *testProxy) executor(pid int, verify func(string, int) (bool, string)) *fakePydevd {
	p.t.Helper()
	f := dialFakeVerify(p.t, p.srv.ExecutorAddr().String(), testToken, pid, verify)
	f.waitRequest("configurationDone", nil)
	return f
}

func (p *testProxy) waitExecutors(n int) {
	p.t.Helper()
	for range 500 {
		if len(p.hub.Executors()) == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatalf("want %d executors, have %d", n, len(p.hub.Executors()))
}

func stoppedOn(ctx context.Context, t *testing.T, c *dapclient.Client) int {
	t.Helper()
	ev, err := c.StoppedEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ev.ThreadId
}

func TestIDsFromTwoExecutorsNeverCollide(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	ctx := p.ctx
	a, b := p.executor(101, nil), p.executor(202, nil)
	a.stop()
	tidA := stoppedOn(ctx, t, c)
	b.stop()
	tidB := stoppedOn(ctx, t, c)
	if tidA == tidB {
		t.Fatalf("both executors' thread 1 became global thread %d", tidA)
	}
	threads, err := c.Threads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, th := range threads {
		names[th.Id] = th.Name
	}
	if !strings.Contains(names[tidA], "pid 101") || !strings.Contains(names[tidB], "pid 202") {
		t.Fatalf("thread names do not say which process they belong to: %v", names)
	}
	for _, tc := range []struct {
		tid int
		pid string
	}{{tidA, "101"}, {tidB, "202"}} {
		frames, err := c.StackTrace(ctx, tc.tid)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := c.Evaluate(ctx, frames[0].Id, "pid")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Result != tc.pid {
			t.Errorf("evaluate in thread %d's frame %d = %q, want the value from pid %s", tc.tid, frames[0].Id, ev.Result, tc.pid)
		}
		scopes, err := c.Scopes(ctx, frames[0].Id)
		if err != nil {
			t.Fatal(err)
		}
		vars, err := c.Variables(ctx, scopes[0].VariablesReference)
		if err != nil {
			t.Fatal(err)
		}
		if len(vars) != 1 || vars[0].Value != tc.pid {
			t.Errorf("variables of thread %d = %+v, want pid %s", tc.tid, vars, tc.pid)
		}
	}
	// After continue, that executor's frames are gone; asking for one is a
	// clear error, not a question to the wrong process.
	framesA, _ := c.StackTrace(ctx, tidA)
	if err := c.Continue(ctx, tidA); err != nil {
		t.Fatal(err)
	}
	_, err = c.Evaluate(ctx, framesA[0].Id, "pid")
	if err == nil || !strings.Contains(err.Error(), "unknown or expired") {
		t.Fatalf("evaluate on a resumed executor's frame: err = %v, want an 'unknown or expired' error", err)
	}
	if n := p.hub.ids.Len(kindFrame); n != 1 {
		t.Errorf("%d frame ids in use after one executor resumed, want 1 (the other's)", n)
	}
}

func TestBreakpointsFanOutWithMergedVerification(t *testing.T) {
	tests := []struct {
		name         string
		verifyA      bool
		verifyB      bool
		wantVerified bool
	}{
		{"one of two binds", false, true, true},
		{"both bind", true, true, true},
		{"none binds", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, nil)
			c := p.ide(false, nil)
			verifier := func(ok bool) func(string, int) (bool, string) {
				return func(string, int) (bool, string) {
					if ok {
						return true, ""
					}
					return false, "Breakpoint in file that does not exist."
				}
			}
			a := p.executor(1, verifier(tt.verifyA))
			b := p.executor(2, verifier(tt.verifyB))
			bps, err := c.SetBreakpoints(p.ctx, "/job/udf.py", 5, 9)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []*fakePydevd{a, b} {
				f.waitRequest("setBreakpoints", func(m Message) bool {
					src := m.Arguments()["source"].(map[string]any)
					return src["path"] == "/job/udf.py" && len(m.Arguments()["breakpoints"].([]any)) == 2
				})
			}
			if len(bps) != 2 {
				t.Fatalf("got %d breakpoints, want 2", len(bps))
			}
			if bps[0].Id == bps[1].Id {
				t.Errorf("two breakpoints share id %d", bps[0].Id)
			}
			for _, bp := range bps {
				if bp.Verified != tt.wantVerified {
					t.Errorf("breakpoint line %d verified=%v, want %v (%+v)", bp.Line, bp.Verified, tt.wantVerified, bp)
				}
				if !tt.wantVerified && !strings.Contains(bp.Message, "does not exist") {
					t.Errorf("unverified breakpoint lost the executor's reason: %q", bp.Message)
				}
			}
		})
	}
}

func TestBreakpointsReplayedToLateExecutors(t *testing.T) {
	p := startProxy(t, nil)
	var set []godap.Breakpoint
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		var err error
		set, err = c.SetBreakpoints(ctx, "/job/udf.py", 5)
		return err
	})
	if set[0].Verified {
		t.Fatalf("breakpoint verified with no executor connected: %+v", set[0])
	}
	f := p.executor(7, nil)
	// The replay must come before configurationDone, or the worker could run
	// past the line before the breakpoint exists.
	cmds := f.commands()
	if i, j := strings.Index(cmds, "setBreakpoints"), strings.Index(cmds, "configurationDone"); i < 0 || i > j {
		t.Fatalf("executor saw %s: want setBreakpoints before configurationDone", cmds)
	}
	ev, err := c.WaitEvent(p.ctx, "breakpoint", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body godap.BreakpointEventBody
	if err := ev.Decode(&body); err != nil {
		t.Fatal(err)
	}
	if !body.Breakpoint.Verified || body.Breakpoint.Id != set[0].Id {
		t.Fatalf("breakpoint event %+v: want id %d verified", body, set[0].Id)
	}
	// And the hit is reported under the id the IDE knows.
	f.stop()
	st, err := c.StoppedEvent(p.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.HitBreakpointIds) != 1 || st.HitBreakpointIds[0] != set[0].Id {
		t.Fatalf("stopped hitBreakpointIds = %v, want [%d]", st.HitBreakpointIds, set[0].Id)
	}
}

// TestClearedBreakpointsReachExecutorsAsEmptyList: DAP lets a client
// clear a file by leaving the list out (go-dap's clients do), and pydevd
// before debugpy 1.8.8 ends the whole session on a request without one, so
// the executor must get an empty list.
func TestClearedBreakpointsReachExecutorsAsEmptyList(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	f := p.executor(3, nil)
	if _, err := c.SetBreakpoints(p.ctx, "/job/udf.py", 5); err != nil {
		t.Fatal(err)
	}
	f.waitRequest("setBreakpoints", func(m Message) bool {
		bps, _ := m.Arguments()["breakpoints"].([]any)
		return len(bps) == 1
	})
	// No lines: go-dap omits the empty "breakpoints".
	if _, err := c.SetBreakpoints(p.ctx, "/job/udf.py"); err != nil {
		t.Fatal(err)
	}
	m := f.waitRequest("setBreakpoints", func(m Message) bool {
		bps, _ := m.Arguments()["breakpoints"].([]any)
		return len(bps) == 0
	})
	if bps, ok := m.Arguments()["breakpoints"].([]any); !ok || bps == nil {
		t.Fatalf("executor got setBreakpoints %v: want an empty \"breakpoints\" list", m.Arguments())
	}
	if _, err := c.Request(p.ctx, "setFunctionBreakpoints", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	m = f.waitRequest("setFunctionBreakpoints", nil)
	if bps, ok := m.Arguments()["breakpoints"].([]any); !ok || len(bps) != 0 {
		t.Fatalf("executor got setFunctionBreakpoints %v: want an empty \"breakpoints\" list", m.Arguments())
	}
}

// TestUnknownRequestsPassThroughIntact: requests the proxy does not know
// reach pydevd, and their answers the IDE, with only the ids translated.
func TestUnknownRequestsPassThroughIntact(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	f := p.executor(5, nil)
	f.stop()
	tid := stoppedOn(p.ctx, t, c)

	args := map[string]any{"threadId": tid, "nested": map[string]any{"list": []any{1, "two", 3.5}, "flag": true}}
	resp, err := c.Request(p.ctx, "sparkCustomThing", args)
	if err != nil {
		t.Fatal(err)
	}
	got := f.waitRequest("sparkCustomThing", nil).Arguments()
	if tidLocal, _ := toInt(got["threadId"]); tidLocal != 1 {
		t.Errorf("executor got threadId %v, want its own id 1", got["threadId"])
	}
	if b, _ := json.Marshal(got["nested"]); string(b) != `{"flag":true,"list":[1,"two",3.5]}` {
		t.Errorf("unknown argument changed on the way: %s", b)
	}
	var echoed struct {
		Echo struct {
			ThreadID int            `json:"threadId"`
			Nested   map[string]any `json:"nested"`
		} `json:"echo"`
	}
	if err := resp.Decode(&echoed); err != nil {
		t.Fatal(err)
	}
	if echoed.Echo.ThreadID != tid || echoed.Echo.Nested["flag"] != true {
		t.Errorf("response body not relayed intact (with global ids): %+v", echoed)
	}

	// Events are another matter: the IDE may act on them, so unknown ones
	// stay with the proxy (hostile_test.go has the dangerous ones).
	f.event("sparkCustomEvent", map[string]any{"frameId": 2, "payload": map[string]any{"k": "v"}})
	f.event("output", map[string]any{"category": "stdout", "output": "after\n"})
	if _, err := c.WaitEvent(p.ctx, "output", nil); err != nil {
		t.Fatal(err)
	}
	for _, ev := range c.Events() {
		if ev.Event == "sparkCustomEvent" {
			t.Errorf("unknown event relayed to the IDE: %s", ev.Body)
		}
	}
}

func TestRefusedExecutorsAreLetGo(t *testing.T) {
	tests := []struct {
		name  string
		token string
		max   int
		first bool // connect a good executor first
		want  string
	}{
		{"wrong token", "nope", 0, false, "wrong access token"},
		{"no token", "", 0, false, "no access token"},
		{"over the session limit", testToken, 1, true, "session limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var summary syncbuf.Buffer
			p := startProxy(t, func(c *Config) { c.MaxSessions = tt.max; c.Summary = &summary })
			if tt.first {
				p.executor(1, nil)
			}
			f := dialFake(t, p.srv.ExecutorAddr().String(), tt.token, 99)
			// configurationDone is what releases a worker blocked in
			// debugpy.connect; without it a refused worker would hang.
			f.waitRequest("configurationDone", nil)
			f.waitClosed()
			if cmds := f.commands(); strings.Contains(cmds, "attach") || strings.Contains(cmds, "setBreakpoints") {
				t.Errorf("refused executor was debugged anyway: %s", cmds)
			}
			got := summary.String()
			if !strings.Contains(got, tt.want) {
				t.Errorf("summary %q does not give the reason %q", got, tt.want)
			}
		})
	}
}

func TestExecutorLeavingRemovesOnlyItsThreads(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	a, b := p.executor(1, nil), p.executor(2, nil)
	threads, err := c.Threads(p.ctx)
	if err != nil || len(threads) != 2 {
		t.Fatalf("threads = %v, %v; want 2", threads, err)
	}
	a.Close()
	ev, err := c.WaitEvent(p.ctx, "thread", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body godap.ThreadEventBody
	_ = ev.Decode(&body)
	if body.Reason != "exited" {
		t.Fatalf("thread event %+v, want exited", body)
	}
	p.waitExecutors(1)
	threads, err = c.Threads(p.ctx)
	if err != nil || len(threads) != 1 || !strings.Contains(threads[0].Name, "pid 2") || threads[0].Id == body.ThreadId {
		t.Fatalf("after executor 1 left: threads = %+v, %v", threads, err)
	}
	_ = b
	// The ids go just after the executor leaves the Hub's list (and the
	// threads answer no longer needs a round trip to wait for it).
	stillThere := true
	for i := 0; i < 500 && stillThere; i++ {
		p.hub.ids.mu.Lock()
		_, stillThere = p.hub.ids.sessions[1]
		p.hub.ids.mu.Unlock()
		if stillThere {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if stillThere {
		t.Errorf("ids of the departed executor are still held")
	}
}

func TestIDEDisconnectResumesAndClears(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, "/job/udf.py", 5)
		return err
	})
	f := p.executor(3, nil)
	f.stop()
	stoppedOn(p.ctx, t, c)
	if err := c.Disconnect(p.ctx, false); err != nil {
		t.Fatal(err)
	}
	f.waitRequest("setBreakpoints", func(m Message) bool {
		bps, _ := m.Arguments()["breakpoints"].([]any)
		return len(bps) == 0
	})
	f.waitRequest("continue", nil)
	if cmds := f.commands(); strings.Contains(cmds, "disconnect") || strings.Contains(cmds, "terminate") {
		t.Errorf("IDE leaving ended the executor's debug session: %s", cmds)
	}
	// A new IDE can attach and sees the executor still there.
	c2 := p.ide(false, nil)
	threads, err := c2.Threads(p.ctx)
	if err != nil || len(threads) != 1 {
		t.Fatalf("new IDE: threads = %v, %v", threads, err)
	}
}

func TestChildSessionPerExecutor(t *testing.T) {
	p := startProxy(t, nil)
	root, children := p.childRoot(nil, func(ctx context.Context, child *dapclient.Client) error {
		_, err := child.SetBreakpoints(ctx, "/job/udf.py", 5)
		return err
	})
	f := p.executor(42, nil)
	f.event("sparkdapTask", map[string]any{"executorId": "3", "host": "worker-1", "pid": 42, "stageId": 3,
		"partitionId": 7, "attemptNumber": 0, "taskAttemptId": 11, "label": "stage 3 · partition 7 · attempt 0"})
	f.stop() // a worker is listed once it stops
	child := p.nextChild(children)
	var cfg map[string]any
	_ = json.Unmarshal(child.Config.Configuration, &cfg)
	if name, _ := cfg["name"].(string); !strings.HasPrefix(name, "stage 3 · partition 7") || !strings.Contains(name, "exec 3") || !strings.Contains(name, "pid 42") {
		t.Errorf("child session name %q lacks the task, the executor or the worker", cfg["name"])
	}
	if cfg["type"] != "debugpy" {
		t.Errorf("child configuration lost the parent's type: %v", cfg)
	}
	tid := stoppedOn(p.ctx, t, child.Client)
	frames, err := child.Client.StackTrace(p.ctx, tid)
	if err != nil || len(frames) != 1 || frames[0].Source.Path != "/job/udf.py" {
		t.Fatalf("child stackTrace = %+v, %v", frames, err)
	}
	for _, ev := range root.Events() {
		if ev.Event == "stopped" {
			t.Errorf("stop reached the root session too: %s", ev.Body)
		}
	}
	threads, err := root.Threads(p.ctx)
	if err != nil || len(threads) != 0 {
		t.Errorf("root threads in child-session mode = %v, %v; want none", threads, err)
	}
}

func TestMalformedExecutorClosesOnlyItself(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.MaxMessageBytes = 1 << 20 })
	c := p.ide(false, nil)
	good := p.executor(1, nil)
	tests := []struct{ name, raw string }{
		{"invalid JSON", "Content-Length: 5\r\n\r\n{nope"},
		{"oversized", fmt.Sprintf("Content-Length: %d\r\n\r\n", 100<<20)},
		{"no content length", "Content-Type: x\r\n\r\n{}"},
		{"not an object", "Content-Length: 2\r\n\r\n[]"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := p.executor(100+i, nil)
			if err := bad.WriteRaw([]byte(tt.raw)); err != nil {
				t.Fatal(err)
			}
			bad.waitClosed()
		})
	}
	p.waitExecutors(1)
	good.stop()
	tid := stoppedOn(p.ctx, t, c)
	if _, err := c.StackTrace(p.ctx, tid); err != nil {
		t.Fatalf("the well-behaved executor suffered: %v", err)
	}
}

func TestStatsShowWhereExecutorsStopped(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	f := p.executor(61, nil)
	p.executor(62, nil)
	f.event("output", map[string]any{"category": "stdout", "output": "hello from the task\n"})
	if _, err := c.WaitEvent(p.ctx, "output", nil); err != nil {
		t.Fatal(err)
	}
	f.stop()
	stoppedOn(p.ctx, t, c)
	var st Stats
	for range 500 {
		if st = p.hub.Stats(); len(st.Executors) == 2 && st.Executors[0].StoppedAt != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !st.IDEAttached || len(st.Executors) != 2 {
		t.Fatalf("stats %+v: want the IDE and two executors", st)
	}
	a, b := st.Executors[0], st.Executors[1]
	if !a.Stopped || a.StoppedAt != "udf.py:5" || a.OutputBytes != int64(len("hello from the task\n")) {
		t.Errorf("stopped executor: %+v; want stopped at udf.py:5 with its output counted", a)
	}
	if b.Stopped || b.StoppedAt != "" || b.OutputBytes != 0 {
		t.Errorf("running executor: %+v", b)
	}
}

// fakePydevd is the project's one fake pydevd (testkit/fakepydevd) as the
// proxy's fast protocol tests use it: it records what the proxy sends,
// echoes requests it does not know (so passthrough can be checked) and
// fails the test if the proxy sends a malformed message. Like real pydevd
// processes, every fake hands out the same local ids (thread 1, frame 2, …),
// so collisions show. The integration tests use real debugpy.
type fakePydevd struct {
	*fakepydevd.Peer
	t   testing.TB
	pid int
}

func dialFake(t testing.TB, addr, token string, pid int) *fakePydevd {
	t.Helper()
	return dialFakeVerify(t, addr, token, pid, nil)
}

// dialFakeVerify is dialFake with a verify function deciding whether a line
// breakpoint binds (nil binds all).
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
	peer := fakepydevd.New(conn, fakepydevd.Config{Token: token, PID: pid, MaxFrameBytes: DefaultMaxMessageBytes,
		Record: true, Verify: verify, EchoUnknown: true, NoThreadEvent: true,
		OnMalformed: func(body []byte, err error) {
			t.Errorf("fake pydevd %d: proxy sent malformed message %q: %v", pid, body, err)
		}})
	return &fakePydevd{Peer: peer, t: t, pid: pid}
}

func (f *fakePydevd) event(name string, body map[string]any) { _ = f.Event(name, body) }
func (f *fakePydevd) send(m map[string]any)                  { _ = f.Send(m) }
func (f *fakePydevd) stop()                                  { _ = f.Stop() }
func (f *fakePydevd) commands() string                       { return f.Commands() }

// hit runs the worker's code at path:line and reports whether the fake
// stopped there (see fakepydevd.Peer.Hit).
func (f *fakePydevd) hit(path string, line int64) bool {
	stopped, _ := f.Hit(path, line)
	return stopped
}

func (f *fakePydevd) state() (suspended bool, armed string) { return f.State() }

// waitRequest waits until the proxy has sent a message for command that
// match (nil: any) accepts.
func (f *fakePydevd) waitRequest(command string, match func(Message) bool) Message {
	f.t.Helper()
	m, err := f.awaitRequest(command, match, 5*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// awaitRequest is waitRequest for goroutines other than the test's: it
// returns an error instead of failing the test.
func (f *fakePydevd) awaitRequest(command string, match func(Message) bool, d time.Duration) (Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := f.WaitRequest(ctx, command, func(r fakepydevd.Message) bool {
		m, err := dapwire.DecodeMessage(r.Raw)
		return err == nil && (match == nil || match(m))
	})
	if err != nil {
		return nil, fmt.Errorf("fake pydevd %d: %w", f.pid, err)
	}
	return dapwire.DecodeMessage(r.Raw)
}

func (f *fakePydevd) waitClosed() {
	f.t.Helper()
	select {
	case <-f.Done():
	case <-time.After(5 * time.Second):
		f.t.Fatalf("fake pydevd %d: proxy did not close the connection", f.pid)
	}
}

// TestHeldIsVoidAfterUnlock: a held kept past its unlock cannot reach the
// state the Hub's lock guards, whether the Hub's own or a session's.
func TestHeldIsVoidAfterUnlock(t *testing.T) {
	h := NewHub(Config{Log: zerolog.Nop()})
	conn, peer := net.Pipe()
	defer peer.Close()
	es := newExecutorSession(h, 1, conn, conn)
	tx := h.lock()
	tx.exec(es).ready = true
	tx.unlock()
	for name, use := range map[string]func(){
		"the Hub's state": func() { _ = len(tx.executors) },
		"a session's":     func() { _ = tx.exec(es).ready },
		"unlock again":    func() { tx.unlock() },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("a held used after its unlock did not panic")
				}
			}()
			use()
		})
	}
	// The lock itself was released.
	tx = h.lock()
	if !tx.exec(es).ready {
		t.Fatal("the state written under the lock is lost")
	}
	tx.unlock()
}
