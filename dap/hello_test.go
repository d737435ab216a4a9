package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pathmap"
)

// helloTokens holds, by proxy address and pid, the one-time pydevd token
// of the last hello a test said for that process; newFake presents it in
// place of testToken.
var helloTokens sync.Map

func helloTokenKey(addr string, pid int) string { return fmt.Sprintf("%s/%d", addr, pid) }

// sayHello plays the worker wrapper's hello (with hello["token"] as the
// worker's token, the rest as its TaskInfo) and returns the proxy's
// verdict, or "UNPROVEN" when the proxy could not prove the token.
// hello["undebugged"] says the worker cannot load a debugger.
func sayHello(t testing.TB, addr string, hello map[string]any) string {
	t.Helper()
	token, _ := hello["token"].(string)
	delete(hello, "token")
	b, _ := json.Marshal(hello)
	var h admission.Hello
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	info := h.TaskInfo
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	reply, derived, err := admission.IntroduceHello(c, token, h)
	if errors.Is(err, admission.ErrProxyUnproven) {
		return "UNPROVEN"
	}
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if reply == "OK" {
		helloTokens.Store(helloTokenKey(addr, int(info.PID)), derived)
	}
	return reply
}

// TestWorkerWithoutDebuggerIsToldToIDE: a worker that cannot load a
// debugger says why in its hello; the IDE's console and serve's log and
// live view show it, and it holds no session.
func TestWorkerWithoutDebuggerIsToldToIDE(t *testing.T) {
	var summary syncbuf.Buffer
	p := startProxy(t, func(c *Config) { c.Summary = &summary; c.MaxSessions = 1 })
	c := p.ide(false, nil)
	addr := p.srv.ExecutorAddr().String()
	why := "debugpy is not installed in /usr/bin/python3 (No module named 'debugpy'): pip install 'debugpy>=1.6.7,<1.9'"
	got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 31, "host": "node-3", "undebugged": why})
	if got != "REFUSED "+admission.ErrUndebugged.Error() {
		t.Errorf("reply %q", got)
	}
	want := "sparkdap: worker node-3 pid 31 runs undebugged: " + why + "\n"
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := c.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		var body godap.OutputEventBody
		return json.Unmarshal(b, &body) == nil && body.Output == want && body.Category == "console"
	}); err != nil {
		t.Fatalf("the IDE's console never showed %q: %v", want, err)
	}
	if !strings.Contains(summary.String(), strings.TrimPrefix(want, "sparkdap: ")) {
		t.Errorf("serve's log %q lacks the line", summary.String())
	}
	st := p.hub.Stats()
	if st.Undebugged != 1 || st.LastUndebugged != why {
		t.Errorf("stats: %d undebugged, last %q", st.Undebugged, st.LastUndebugged)
	}
	// It held no session: the one slot is free for a worker that debugs.
	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 32}); got != "OK" {
		t.Errorf("next worker: %q, want OK", got)
	}
}

func TestHelloRefusals(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.MaxSessions = 1 })
	addr := p.srv.ExecutorAddr().String()
	// A worker with another token stops at the proxy's proof.
	if got := sayHello(t, addr, map[string]any{"token": "bad", "pid": 10}); got != "UNPROVEN" {
		t.Errorf("wrong token: %q", got)
	}
	if got := sayHello(t, addr, map[string]any{"pid": 10}); got != "UNPROVEN" {
		t.Errorf("no token: %q", got)
	}
	if got := sayHello(t, addr, map[string]any{"token": testToken}); !strings.HasPrefix(got, "REFUSED") {
		t.Errorf("hello without pid: %q", got)
	}
	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 11}); got != "OK" {
		t.Fatalf("first worker: %q", got)
	}
	// The slot is held for pid 11; a second worker is over the limit
	// before it ever loads a debugger.
	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 12}); !strings.Contains(got, "session limit") {
		t.Errorf("second worker over --max-sessions 1: %q", got)
	}
	// pid 11's pydevd then takes its slot.
	f := dialFake(t, addr, testToken, 11)
	f.waitRequest("configurationDone", nil)
	if cmds := f.commands(); !strings.Contains(cmds, "attach") {
		t.Fatalf("the worker that said hello was refused: %s", cmds)
	}
}

func TestHelloRootsMapBreakpointsBeforeUserCode(t *testing.T) {
	local := "/home/me/proj/jobs/utils.py"
	shipped := "/tmp/spark-1/userFiles-2/jobs/utils.py"
	pm := pathmap.NewForFiles("/home/me/proj", false, []string{local, "/home/me/proj/app.py"}, nil)
	p := startProxy(t, func(c *Config) { c.Paths = pm })
	var set []godap.Breakpoint
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		var err error
		set, err = c.SetBreakpoints(ctx, local, 5)
		return err
	})
	got := sayHello(t, p.srv.ExecutorAddr().String(), map[string]any{"token": testToken, "pid": 31,
		"executorId": "4", "host": "node-7", "label": "stage 2 · partition 1 · attempt 0",
		"roots": map[string]any{"sparkFiles": "/tmp/spark-1/userFiles-2", "cwd": "/work"}})
	if got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	f := dialFakeVerify(t, p.srv.ExecutorAddr().String(), testToken, 31, func(path string, line int) (bool, string) {
		if path == shipped {
			return true, ""
		}
		return false, "Breakpoint in file that does not exist."
	})
	f.SetFramePath(shipped)
	f.waitRequest("configurationDone", nil)
	cmds := f.commands()
	hit := f.waitRequest("setBreakpoints", func(m Message) bool {
		return m.Arguments()["source"].(map[string]any)["path"] == shipped
	})
	_ = hit
	if i, j := strings.Index(cmds, "setBreakpoints"), strings.Index(cmds, "configurationDone"); i < 0 || i > j {
		t.Fatalf("breakpoints were not in place before configurationDone: %s", cmds)
	}
	ev, err := c.WaitEvent(p.ctx, "breakpoint", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body godap.BreakpointEventBody
	_ = ev.Decode(&body)
	if !body.Breakpoint.Verified || body.Breakpoint.Id != set[0].Id || body.Breakpoint.Source.Path != local {
		t.Fatalf("breakpoint event %+v: want id %d verified at the local path", body.Breakpoint, set[0].Id)
	}
	f.stop()
	tid := stoppedOn(p.ctx, t, c)
	threads, _ := c.Threads(p.ctx)
	if len(threads) != 1 || !strings.Contains(threads[0].Name, "exec 4 · node-7 · pid 31 · stage 2 · partition 1") {
		t.Errorf("thread is not labelled with the hello's task: %+v", threads)
	}
	frames, err := c.StackTrace(p.ctx, tid)
	if err != nil {
		t.Fatal(err)
	}
	if frames[0].Source.Path != local || frames[0].Source.SourceReference != 0 {
		t.Fatalf("frame source %+v: want the local file %s, no sourceReference", frames[0].Source, local)
	}
	rep := p.hub.PathReports()
	if len(rep) != 1 || len(rep[0].Mapped) != 1 || rep[0].Mapped[0].Remote != shipped {
		t.Errorf("path report %+v lacks the mapping", rep)
	}
}

func TestUnmappedSourceKeepsItsReference(t *testing.T) {
	pm := pathmap.NewForFiles("/home/me/proj", false, []string{"/home/me/proj/app.py"}, nil)
	p := startProxy(t, func(c *Config) { c.Paths = pm })
	c := p.ide(false, nil)
	f := p.executor(8, nil)
	f.SetFramePath("/opt/vendor/lib.py")
	f.stop()
	tid := stoppedOn(p.ctx, t, c)
	frames, err := c.StackTrace(p.ctx, tid)
	if err != nil {
		t.Fatal(err)
	}
	ref := frames[0].Source.SourceReference
	if src := frames[0].Source; src.Path != "" || src.Name != "lib.py" || ref == 0 || !strings.Contains(src.Origin, "/opt/vendor/lib.py") {
		t.Fatalf("unmapped frame source %+v: want its name and a sourceReference, no path (hostile_test.go)", src)
	}
	// The IDE fetches the code through the reference, from that executor.
	if _, err := c.Request(p.ctx, "source", map[string]any{"sourceReference": ref}); err != nil {
		t.Fatal(err)
	}
	got := f.waitRequest("source", nil)
	if n, _ := toInt(got.Arguments()["sourceReference"]); n != 4 {
		t.Fatalf("executor got sourceReference %v, want its own 4", got.Arguments()["sourceReference"])
	}
}

func TestPostMortemWorkerGetsUserUnhandled(t *testing.T) {
	p := startProxy(t, nil)
	p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.Request(ctx, "setExceptionBreakpoints", map[string]any{"filters": []any{"raised"}})
		return err
	})
	addr := p.srv.ExecutorAddr().String()
	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 51, "postMortem": true}); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	f := dialFake(t, addr, testToken, 51)
	f.waitRequest("configurationDone", nil)
	attach := f.waitRequest("attach", nil)
	rules, _ := json.Marshal(attach.Arguments()["rules"])
	if !strings.Contains(string(rules), `"module":"pyspark"`) || !strings.Contains(string(rules), `"path":"**/remote_debug.py"`) {
		t.Errorf("attach rules %s do not mark PySpark and the worker wrapper as library code", rules)
	}
	exc := f.waitRequest("setExceptionBreakpoints", nil)
	filters, _ := json.Marshal(exc.Arguments()["filters"])
	if string(filters) != `["raised","userUnhandled"]` {
		t.Errorf("exception filters %s: want the IDE's plus userUnhandled", filters)
	}
	// A worker without --post-mortem gets the IDE's filters only.
	g := p.executor(52, nil)
	plain, _ := json.Marshal(g.waitRequest("setExceptionBreakpoints", nil).Arguments()["filters"])
	if string(plain) != `["raised"]` {
		t.Errorf("plain worker's filters %s, want the IDE's", plain)
	}
}

// TestHelloPydevdTokenIsOneTime: a worker that said hello is admitted only
// with the token its hello derived, once: not with the real token (which
// the wrapper never sends, so whoever presents it did not say this
// hello), and not again on a second connection.
func TestHelloPydevdTokenIsOneTime(t *testing.T) {
	p := startProxy(t, nil)
	addr := p.srv.ExecutorAddr().String()
	attached := func(f *fakePydevd) bool {
		f.waitRequest("configurationDone", nil)
		return strings.Contains(f.commands(), "attach")
	}

	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 61}); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	helloTokens.Delete(helloTokenKey(addr, 61)) // present the real token instead
	if attached(dialFake(t, addr, testToken, 61)) {
		t.Error("a worker that said hello was admitted with the real token")
	}

	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 62}); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	derived, _ := helloTokens.Load(helloTokenKey(addr, 62))
	if !attached(dialFake(t, addr, testToken, 62)) {
		t.Fatal("the hello's own pydevd token was refused")
	}
	if attached(dialFake(t, addr, derived.(string), 62)) {
		t.Error("a hello's pydevd token admitted a second connection")
	}
}

// TestPendingHelloNotDisplaced: a second hello naming a pending worker's
// address and pid (through an SSH tunnel every worker has the agent's
// address, so a token holder need only name a pid) is refused, with a
// summary line saying why; neither it nor a debugger that names the pid
// with the token itself uses up the real worker's hello, whose debugger is
// then admitted with its task.
func TestPendingHelloNotDisplaced(t *testing.T) {
	var summary syncbuf.Buffer
	p := startProxy(t, func(c *Config) { c.Summary = &summary })
	addr := p.srv.ExecutorAddr().String()
	key := helloTokenKey(addr, 71)
	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 71, "host": "real-node"}); got != "OK" {
		t.Fatalf("the real worker's hello: %q", got)
	}
	real, _ := helloTokens.LoadAndDelete(key)

	got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 71, "host": "posing"})
	helloTokens.Delete(key)
	if !strings.HasPrefix(got, "REFUSED") || !strings.Contains(got, "already waiting") {
		t.Errorf("a second hello for a pending pid: %q, want REFUSED, already waiting", got)
	}
	if s := summary.String(); !strings.Contains(s, "pid 71 refused: a hello from this address and pid is already waiting") {
		t.Errorf("summary %q does not say why the second hello was refused", s)
	}
	posing := dialFake(t, addr, testToken, 71)
	posing.waitRequest("configurationDone", nil)
	posing.waitClosed()
	if strings.Contains(posing.commands(), "attach") {
		t.Error("a debugger naming a pending pid with the token itself was admitted")
	}

	f := dialFake(t, addr, real.(string), 71)
	f.waitRequest("configurationDone", nil)
	if !strings.Contains(f.commands(), "attach") {
		t.Fatalf("the real worker's debugger was refused: %s", f.commands())
	}
	if ex := p.hub.Executors(); len(ex) != 1 || ex[0].Task.Host != "real-node" {
		t.Errorf("executors %+v, want the real worker's with its hello's task", ex)
	}
}
