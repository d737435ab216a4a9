package pycharm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
)

// fakeWorker plays one wrapper + pydevd-pycharm process: hello, then a
// pydevd connection that answers the proxy's probe and CMD_VERSION, and
// records everything else it gets.
type fakeWorker struct {
	pid   int64
	conn  net.Conn
	got   chan pycharm.Message
	lists atomic.Int64 // CMD_LIST_THREADS requests answered
}

func startWorker(t *testing.T, ctx context.Context, addr string, pid int64, partition int64, roots pathmap.Roots) *fakeWorker {
	t.Helper()
	nonce, reply := sayHello(t, addr, pid, partition, roots)
	if nonce == "" {
		t.Fatalf("hello refused: %s", reply)
	}
	return connectPydevd(t, addr, pid, nonce)
}

// sayHello says the wrapper's hello and returns the nonce of an "OK
// <nonce>" reply, or "" and the reply.
func sayHello(t *testing.T, addr string, pid, partition int64, roots pathmap.Roots) (nonce, reply string) {
	t.Helper()
	return sayHelloFrom(t, "", addr, pid, partition, roots)
}

// dialFrom connects to addr from loopback address src ("": any), so that
// a test can play several hosts.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sayHelloFrom is sayHello from loopback address src.
func sayHelloFrom(t *testing.T, src, addr string, pid, partition int64, roots pathmap.Roots) (nonce, reply string) {
	t.Helper()
	info := admission.TaskInfo{PID: pid, Host: "node-1", ExecutorID: "1",
		Label: fmt.Sprintf("stage 0 · partition %d · attempt 0", partition), Roots: &roots}
	hc := dialFrom(t, src, addr)
	defer hc.Close()
	_ = hc.SetDeadline(time.Now().Add(10 * time.Second))
	reply, _, err := admission.Introduce(hc, "tok", info)
	if err != nil {
		t.Fatalf("no hello reply: %v", err)
	}
	if n, ok := strings.CutPrefix(reply, "OK "); ok && n != "" {
		return n, reply
	}
	return "", reply
}

// connectPydevd plays pydevd_pycharm.settrace's connection of a worker
// whose connect-guard thread carries nonce ("" = no guard thread).
func connectPydevd(t *testing.T, addr string, pid int64, nonce string) *fakeWorker {
	t.Helper()
	return connectPydevdFrom(t, "", addr, pid, nonce)
}

// connectPydevdFrom is connectPydevd from loopback address src.
func connectPydevdFrom(t *testing.T, src, addr string, pid int64, nonce string) *fakeWorker {
	t.Helper()
	c := dialFrom(t, src, addr)
	w := &fakeWorker{pid: pid, conn: c, got: make(chan pycharm.Message, 100)}
	tid := fmt.Sprintf("pid_%d_id_1", pid)
	threads := `<thread name="MainThread" id="` + tid + `" />`
	if nonce != "" {
		threads += fmt.Sprintf(`<thread name="%s" id="pid_%d_id_2" />`, pycharm.PyQuote("sparkdap-connect-guard "+nonce, "/"), pid)
	}
	go func() {
		br := bufio.NewReader(c)
		for {
			m, err := pycharm.ReadMessage(br, 1<<20)
			if err != nil {
				close(w.got)
				return
			}
			switch m.ID {
			case pycharm.CmdListThreads:
				w.lists.Add(1)
				w.send(pycharm.Message{ID: pycharm.CmdReturn, Seq: m.Seq, Payload: pycharm.PyQuote(
					`<xml>`+threads+`</xml>`, `/<>_=" `)})
			case pycharm.CmdVersion:
				w.send(pycharm.Message{ID: pycharm.CmdVersion, Seq: m.Seq, Payload: fmt.Sprintf("v-%d", pid)})
			case pycharm.CmdGetFrame:
				w.send(pycharm.Message{ID: pycharm.CmdGetFrame, Seq: m.Seq, Payload: pycharm.PyQuote(
					fmt.Sprintf(`<xml><var name="pid" type="int" value="%d" /></xml>`, pid), `/<>_=" `)})
			default:
				w.got <- m
			}
		}
	}()
	t.Cleanup(func() { c.Close() })
	return w
}

func (w *fakeWorker) send(m pycharm.Message) { _, _ = w.conn.Write(m.Marshal()) }

func (w *fakeWorker) waitFor(t *testing.T, id int) pycharm.Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-w.got:
			if !ok {
				t.Fatalf("worker %d: connection closed waiting for %d", w.pid, id)
			}
			if m.ID == id {
				return m
			}
		case <-timeout:
			t.Fatalf("worker %d: no command %d", w.pid, id)
		}
	}
}

func TestMultiplexer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "job.py"), []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := pathmap.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ide.Close()
	px, err := pycharm.Listen(pycharm.Config{Token: "tok", PyCharm: ide.Addr(), Paths: paths,
		Log: zerolog.Nop(), VersionTimeout: 5 * time.Second}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go px.Serve(ctx)
	defer px.Close()
	addr := px.Addr().String()

	rootsA := pathmap.Roots{SparkFiles: "/spark/a/userFiles-1"}
	a := startWorker(t, ctx, addr, 101, 0, rootsA)
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(root, "job.py")
	v, err := ide.Start(ctx, pycharmtest.Breakpoint{File: local, Line: 1})
	if err != nil || v != "v-101" {
		t.Fatalf("handshake answered %q, %v; want worker 101's version", v, err)
	}
	// Breakpoint fanned out to worker A's candidate paths, then run.
	files := map[string]bool{}
	for {
		m := a.waitFor(t, pycharm.CmdSetBreak)
		_, f, _ := pycharm.BreakpointKey(m)
		files[f] = true
		if f == "/spark/a/userFiles-1/job.py" {
			break
		}
	}
	a.waitFor(t, pycharm.CmdRun)

	// A late joiner gets version, breakpoint and run replayed.
	b := startWorker(t, ctx, addr, 202, 1, pathmap.Roots{SparkFiles: "/spark/b/userFiles-2"})
	for {
		m := b.waitFor(t, pycharm.CmdSetBreak)
		if _, f, _ := pycharm.BreakpointKey(m); f == "/spark/b/userFiles-2/job.py" {
			break
		}
	}
	b.waitFor(t, pycharm.CmdRun)

	// B announces its thread and suspends in its copy of job.py.
	tidB := "pid_202_id_1"
	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	b.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: q(`<xml><thread name="MainThread" id="` + tidB + `" /></xml>`)})
	b.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 4, Payload: q(`<xml><thread id="` + tidB +
		`" stop_reason="111"><frame id="77" name="f" file="/spark/b/userFiles-2/job.py" line="1"></frame></thread></xml>`)})
	created, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadCreate })
	if err != nil {
		t.Fatal(err)
	}
	ths, _, _ := pycharmtest.ParseXML(created.Payload)
	if len(ths) != 1 || ths[0].Name != "[exec 1 · node-1 · pid 202 · stage 0 · partition 1 · attempt 0] MainThread" {
		t.Errorf("thread create %+v", ths)
	}
	susp, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend })
	if err != nil {
		t.Fatal(err)
	}
	ths, _, _ = pycharmtest.ParseXML(susp.Payload)
	if len(ths) != 1 || ths[0].Frames[0].File != local {
		t.Errorf("suspend frames %+v, want the local file %s", ths, local)
	}
	if susp.Seq == created.Seq || susp.Seq%2 != 0 {
		t.Errorf("event seqs %d, %d: want distinct, even", created.Seq, susp.Seq)
	}

	// A thread command goes to its owner only, with its answer's seq
	// translated back.
	fr, err := ide.Request(ctx, pycharm.CmdGetFrame, tidB, "77", "FRAME", "0")
	if err != nil {
		t.Fatal(err)
	}
	if _, vars, _ := pycharmtest.ParseXML(fr.Payload); len(vars) != 1 || vars[0].Value != "202" {
		t.Errorf("frame of %s answered by %+v", tidB, vars)
	}
	// A thread whose worker is unknown gets an error, not silence.
	if _, err := ide.Request(ctx, pycharm.CmdGetFrame, "pid_999_id_1", "1", "FRAME", "0"); err == nil {
		t.Errorf("GET_FRAME for an unknown worker's thread: want CMD_ERROR")
	}
	// Resume goes to B only.
	if _, err := ide.Send(pycharm.CmdThreadRun, tidB); err != nil {
		t.Fatal(err)
	}
	if m := b.waitFor(t, pycharm.CmdThreadRun); m.Payload != tidB {
		t.Errorf("B got resume %q", m.Payload)
	}
	select {
	case m := <-a.got:
		t.Errorf("A got %v, meant for B", m)
	case <-time.After(200 * time.Millisecond):
	}

	// B leaves: PyCharm hears its thread is gone.
	b.conn.Close()
	kill, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadKill })
	if err != nil || pycharm.PyUnquote(kill.Payload) != tidB {
		t.Errorf("thread kill %v, %v", kill, err)
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
	if st := ide.Strays(); len(st) > 0 {
		t.Errorf("PyCharm would drop: %v", st)
	}
}

// startProxy starts a proxy in front of the PyCharm double.
func startProxy(t *testing.T, ctx context.Context, cfg pycharm.Config) (*pycharm.Proxy, *pycharmtest.Server) {
	t.Helper()
	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	cfg.PyCharm = ide.Addr()
	if cfg.Token == "" {
		cfg.Token = "tok"
	}
	cfg.Log = zerolog.Nop()
	px, err := pycharm.Listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go px.Serve(ctx)
	t.Cleanup(px.Close)
	return px, ide
}

// TestHostileExecutor: a worker that sends PyCharm what pydevd may send
// (CMD_EXIT when it exits, process-created, answers to nothing) or what it
// must not (events about another worker's threads) never gets it through:
// PyCharm keeps its session, the other worker's thread, and drops nothing.
func TestHostileExecutor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	addr := px.Addr().String()
	a := startWorker(t, ctx, addr, 101, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a.waitFor(t, pycharm.CmdRun)
	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	tidA := "pid_101_id_1"
	a.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: q(`<xml><thread name="MainThread" id="` + tidA + `" /></xml>`)})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadCreate }); err != nil {
		t.Fatal(err)
	}
	nameA := ide.ThreadName(tidA)

	h := startWorker(t, ctx, addr, 202, 1, pathmap.Roots{})
	h.waitFor(t, pycharm.CmdRun)
	hostile := []pycharm.Message{
		{ID: pycharm.CmdExit, Seq: 2},
		{ID: pycharm.CmdProcessCreated, Seq: 4, Payload: q(`<process/>`)},
		{ID: pycharm.CmdInputRequested, Seq: 6, Payload: "True"},
		{ID: pycharm.CmdReturn, Seq: 7, Payload: "an answer to nothing"},
		{ID: pycharm.CmdGetFrame, Seq: 8, Payload: "an event PyCharm does not know"},
		{ID: pycharm.CmdThreadCreate, Seq: 10, Payload: q(`<xml><thread name="evil" id="` + tidA + `" /></xml>`)},
		{ID: pycharm.CmdThreadSuspend, Seq: 12, Payload: q(`<xml><thread id="` + tidA + `" stop_reason="111"><frame id="1" name="f" file="/x.py" line="1"></frame></thread></xml>`)},
		{ID: pycharm.CmdThreadSuspend, Seq: 14, Payload: q(`<xml><thread id="pid_202_id_1" stop_reason="111"></thread><thread id="` + tidA + `" stop_reason="111"></thread></xml>`)},
		{ID: pycharm.CmdThreadRun, Seq: 16, Payload: tidA + "\t-1"},
		{ID: pycharm.CmdThreadKill, Seq: 18, Payload: tidA},
		{ID: pycharm.CmdThreadCreate, Seq: 20, Payload: q(`<xml><thread name="no id" /></xml>`)},
	}
	for _, m := range hostile {
		h.send(m)
	}
	// Then one honest event: everything before it has been dealt with.
	tidH := "pid_202_id_1"
	h.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 22, Payload: q(`<xml><thread name="MainThread" id="` + tidH + `" /></xml>`)})
	m, err := ide.WaitFor(ctx, func(m pycharm.Message) bool {
		return m.ID == pycharm.CmdThreadCreate && strings.Contains(pycharm.PyUnquote(m.Payload), tidH)
	})
	if err != nil {
		t.Fatalf("the honest event after the hostile ones: %v (session dropped: %v)", err, ide.Dropped())
	}
	if ide.Dropped() {
		t.Errorf("PyCharm dropped the session")
	}
	if got := ide.ThreadName(tidA); got != nameA {
		t.Errorf("worker 101's thread is now %q, was %q", got, nameA)
	}
	if st := ide.Strays(); len(st) > 0 {
		t.Errorf("PyCharm got messages it would drop: %v", st)
	}
	if an := ide.Anomalies(); len(an) > 0 {
		t.Errorf("PyCharm would log: %q", an)
	}
	// Nothing else of the hostile worker's reached PyCharm.
	ctxShort, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if got, err := ide.WaitFor(ctxShort, func(pycharm.Message) bool { return true }); err == nil {
		t.Errorf("PyCharm got %v %q (after %v)", got, pycharm.PyUnquote(got.Payload), m)
	}
}

// refused reports whether the proxy closed a pydevd connection without
// sending it anything but its probe.
func (w *fakeWorker) refused(t *testing.T) bool {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-w.got:
			if !ok {
				return true
			}
			t.Logf("worker %d got %v", w.pid, m)
			return false
		case <-timeout:
			t.Fatalf("worker %d: neither closed nor served", w.pid)
		}
	}
}

// TestPydevdBoundToHello: a pydevd connection joins only with the nonce
// the hello's reply handed out, once, before the hello expires; the same
// pid from the same address (a co-tenant on the host has it) is not enough.
func TestPydevdBoundToHello(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{HelloTTL: 300 * time.Millisecond})
	addr := px.Addr().String()
	first := startWorker(t, ctx, addr, 100, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first.waitFor(t, pycharm.CmdRun)

	nonce, reply := sayHello(t, addr, 303, 1, pathmap.Roots{})
	if nonce == "" || len(nonce) < 32 {
		t.Fatalf("hello reply %q: want OK and a 128-bit nonce", reply)
	}
	// Co-tenants who know the pid: no guard thread, a guessed nonce.
	if !connectPydevd(t, addr, 303, "").refused(t) {
		t.Errorf("a pydevd connection with the pid alone joined")
	}
	if !connectPydevd(t, addr, 303, strings.Repeat("0", 32)).refused(t) {
		t.Errorf("a pydevd connection with a guessed nonce joined")
	}
	// The nonce with another pid.
	if !connectPydevd(t, addr, 304, nonce).refused(t) {
		t.Errorf("the nonce joined another pid")
	}
	// The worker itself.
	w := connectPydevd(t, addr, 303, nonce)
	w.waitFor(t, pycharm.CmdRun)
	// Once only.
	if !connectPydevd(t, addr, 303, nonce).refused(t) {
		t.Errorf("a nonce joined twice")
	}
	// Expired.
	late, _ := sayHello(t, addr, 505, 2, pathmap.Roots{})
	time.Sleep(1500 * time.Millisecond)
	if !connectPydevd(t, addr, 505, late).refused(t) {
		t.Errorf("a hello joined after its TTL")
	}
}

func TestPendingHelloCap(t *testing.T) {
	defer pycharm.SetMaxPendingHellos(2)()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	addr := px.Addr().String()
	go func() { _ = ide.Accept(ctx) }()
	for pid := int64(1); pid <= 2; pid++ {
		if n, reply := sayHello(t, addr, pid, 0, pathmap.Roots{}); n == "" {
			t.Fatalf("hello %d: %s", pid, reply)
		}
	}
	if n, reply := sayHello(t, addr, 3, 0, pathmap.Roots{}); n != "" || !strings.Contains(reply, "too many") {
		t.Errorf("third pending hello: %q, want refused (too many workers connecting at once)", reply)
	}
}

// TestTaskChangeRenamesThreads: PyCharm names threads only from thread
// create, so when a reused worker starts another task the proxy announces
// its threads again under the new task's label.
func TestTaskChangeRenamesThreads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	w := startWorker(t, ctx, px.Addr().String(), 77, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	tid := "pid_77_id_1"
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: pycharm.ThreadCreatePayload(tid, "MainThread")})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadCreate }); err != nil {
		t.Fatal(err)
	}
	if n := ide.ThreadName(tid); !strings.Contains(n, "partition 0") {
		t.Fatalf("first task's thread name %q", n)
	}
	task, _ := json.Marshal(map[string]any{"executorId": "1", "host": "node-1", "pid": 77, "label": "stage 0 · partition 5 · attempt 0"})
	w.send(pycharm.Message{ID: pycharm.CmdSparkdapTask, Payload: pycharm.PyQuote(string(task), `/<>_=" `)})
	ctx10, cancel10 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel10()
	if _, err := ide.WaitFor(ctx10, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadCreate }); err != nil {
		t.Fatalf("no new thread create after the task changed: %v", err)
	}
	if n := ide.ThreadName(tid); n != "[exec 1 · node-1 · pid 77 · stage 0 · partition 5 · attempt 0] MainThread" {
		t.Errorf("after the task changed PyCharm shows %q", n)
	}
}

// TestWrapperThreadsHidden: the wrapper's own threads never reach PyCharm,
// and one that a suspend-all stopped is resumed at once.
func TestWrapperThreadsHidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	w := startWorker(t, ctx, px.Addr().String(), 88, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	guard, main := "pid_88_id_2", "pid_88_id_1"
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: pycharm.ThreadCreatePayload(guard, "sparkdap-connect-guard 0123")})
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 4, Payload: pycharm.ThreadCreatePayload(main, "MainThread")})
	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 6, Payload: q(`<xml><thread id="` + main + `" stop_reason="111"><frame id="1" name="f" file="/x.py" line="1"></frame></thread></xml>`)})
	w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 8, Payload: q(`<xml><thread id="` + guard + `" stop_reason="105"><frame id="2" name="watchdog" file="/w/remote_debug.py" line="480"></frame></thread></xml>`)})
	if m := w.waitFor(t, pycharm.CmdThreadRun); m.Payload != guard {
		t.Errorf("resumed %q, want the guard %s", m.Payload, guard)
	}
	w.send(pycharm.Message{ID: pycharm.CmdThreadRun, Seq: 10, Payload: guard + "\t-1"})
	w.send(pycharm.Message{ID: pycharm.CmdThreadKill, Seq: 12, Payload: guard})
	w.send(pycharm.Message{ID: pycharm.CmdThreadKill, Seq: 14, Payload: main})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadKill }); err != nil {
		t.Fatal(err)
	}
	for {
		ctxShort, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		m, err := ide.WaitFor(ctxShort, func(pycharm.Message) bool { return true })
		cancelShort()
		if err != nil {
			break
		}
		if strings.Contains(pycharm.PyUnquote(m.Payload), guard) {
			t.Errorf("PyCharm got %v about the guard thread", m)
		}
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log %q", a)
	}
}

// TestWindowsIDEPaths: PyCharm on Windows sends a breakpoint's file
// lower-cased with / (and other clients in other spellings); the worker,
// on Linux, gets it at the path with the file's real case, and a suspend
// there comes back as the local file.
func TestWindowsIDEPaths(t *testing.T) {
	const remote = "/opt/run/Jobs/LoanCalc.py"
	const real = `C:\Users\Me\Proj\Jobs\LoanCalc.py`
	for i, local := range []string{
		"c:/users/me/proj/jobs/loancalc.py", // PyCharm on Windows
		`c:\Users\Me\Proj\Jobs\LoanCalc.py`, // VS Code's spelling
		real,                                // the file system's
	} {
		t.Run(local, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			paths := pathmap.NewForFiles(`C:\Users\Me\Proj`, true, []string{real, `C:\Users\Me\Proj\app.py`}, nil)
			ide, err := pycharmtest.Listen()
			if err != nil {
				t.Fatal(err)
			}
			defer ide.Close()
			px, err := pycharm.Listen(pycharm.Config{Token: "tok", PyCharm: ide.Addr(), Paths: paths,
				Log: zerolog.Nop(), VersionTimeout: 5 * time.Second}, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go px.Serve(ctx)
			defer px.Close()
			pid := int64(700 + i)
			w := startWorker(t, ctx, px.Addr().String(), pid, 0, pathmap.Roots{Cwd: "/opt/run"})
			if err := ide.Accept(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := ide.Start(ctx, pycharmtest.Breakpoint{File: local, Line: 3}); err != nil {
				t.Fatal(err)
			}
			var sent []string
			for {
				m := w.waitFor(t, pycharm.CmdSetBreak)
				_, f, _ := pycharm.BreakpointKey(m)
				sent = append(sent, f)
				if f == remote {
					break
				}
				if strings.EqualFold(f, remote) {
					t.Fatalf("the breakpoint went to %s, not to the executor's %s (sent so far: %v)", f, remote, sent)
				}
			}
			tid := fmt.Sprintf("pid_%d_id_1", pid)
			q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
			w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: q(`<xml><thread name="MainThread" id="` + tid + `" /></xml>`)})
			w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 4, Payload: q(`<xml><thread id="` + tid +
				`" stop_reason="111"><frame id="7" name="f" file="` + remote + `" line="3"></frame></thread></xml>`)})
			susp, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend })
			if err != nil {
				t.Fatal(err)
			}
			ths, _, _ := pycharmtest.ParseXML(susp.Payload)
			if len(ths) != 1 || len(ths[0].Frames) != 1 || !strings.EqualFold(strings.ReplaceAll(ths[0].Frames[0].File, "/", `\`), real) {
				t.Errorf("suspend frames %+v, want the local file %s", ths, real)
			}
		})
	}
}

// TestStoppedWorkerHearsFromTheProxy: while a worker has a thread stopped,
// the proxy sends it CMD_LIST_THREADS at a steady interval, however idle
// PyCharm is, renewing the lease the wrapper holds the stop on; PyCharm
// never sees those requests or their answers.
func TestStoppedWorkerHearsFromTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{LeasePing: 20 * time.Millisecond})
	w := startWorker(t, ctx, px.Addr().String(), 91, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	probes := w.lists.Load() // the connection's probe
	main := "pid_91_id_1"
	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: pycharm.ThreadCreatePayload(main, "MainThread")})
	w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 4, Payload: q(`<xml><thread id="` + main + `" stop_reason="111"><frame id="1" name="f" file="/x.py" line="1"></frame></thread></xml>`)})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend }); err != nil {
		t.Fatal(err)
	}
	for i := 0; w.lists.Load() < probes+3; i++ {
		if i == 1000 {
			t.Fatalf("a stopped worker got %d CMD_LIST_THREADS after the probe; want 3", w.lists.Load()-probes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log %q", a)
	}
	ctxShort, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if m, err := ide.WaitFor(ctxShort, func(m pycharm.Message) bool { return m.ID == pycharm.CmdReturn }); err == nil {
		t.Errorf("PyCharm got an answer it never asked for: %v", m)
	}
}
