package dap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// TestMain caps input minimization for the fuzz targets in
// cappedMinimization (see minimizeLimit) unless -fuzzminimizetime is given.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := capMinimization(flag.CommandLine); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// minimizeLimit is the -fuzzminimizetime the targets in cappedMinimization
// run with: at most this many runs to shrink an input (about 2 ms each for
// a Hub target).
//
// Why: the fuzzing engine minimizes every input that reached new coverage,
// and keeps a smaller candidate only if it reaches all of that coverage
// again. A Hub input's coverage is not the same from run to run (how the
// wire queue batches writes, which goroutine gets there first: the same
// seed run six times gave 48 blocks with different bucketed counts), so
// candidates almost never qualify and each minimization ran the whole
// default 60 s, during which `go test -fuzz=FuzzHubIDESide` reported
// 0 execs/sec: about 40 inputs a minute. A few hundred runs keep what a
// deterministic input shrinks to, and a crasher still gets them.
//
// FuzzHello stalled too (0 execs/sec after 3 s), for another reason: the
// engine spent the run minimizing a mutant of its 70000-byte oversized
// seed. Such a mutant keeps its coverage only while over the 64 KiB hello
// limit, so hardly any byte can go, and each try reads some 64 KiB.
const minimizeLimit = "200x"

// cappedMinimization lists the fuzz targets whose inputs the engine cannot
// usefully minimize (see minimizeLimit).
var cappedMinimization = []string{"FuzzHubIDESide", "FuzzHubExecutorSide", "FuzzHello"}

// capMinimization sets test.fuzzminimizetime to minimizeLimit when the
// fuzz target asked for is in cappedMinimization and the flag was not given.
func capMinimization(fs *flag.FlagSet) error {
	target := fs.Lookup("test.fuzz")
	if target == nil || target.Value.String() == "" {
		return nil
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if given {
		return nil
	}
	re, err := regexp.Compile(target.Value.String())
	if err != nil {
		return nil // the testing package reports it
	}
	if !slices.ContainsFunc(cappedMinimization, re.MatchString) {
		return nil
	}
	if err := fs.Set("test.fuzzminimizetime", minimizeLimit); err != nil {
		return fmt.Errorf("dap tests: capping fuzz minimization: %w", err)
	}
	return nil
}

// The fuzz targets below drive a live Hub over in-memory pipes: arbitrary
// bytes from one peer, then a well-behaved IDE and executor that must be
// served as if nothing had happened, and a Hub that shuts down cleanly.

// pipeHub is a Hub serving connections made with net.Pipe.
type pipeHub struct {
	t      *testing.T
	hub    *Hub
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newPipeHub(t *testing.T) *pipeHub {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	p := &pipeHub{t: t, ctx: ctx, cancel: cancel, hub: NewHub(Config{
		Token: testToken, Log: zerolog.Nop(), MaxMessageBytes: 1 << 16,
		HandshakeTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second, FanoutTimeout: 5 * time.Second})}
	t.Cleanup(p.shutdown)
	return p
}

// shutdown ends every session (failing the test if one does not end) and
// stops the Hub's timers.
func (p *pipeHub) shutdown() {
	p.cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Fatal("hub sessions still running 10s after shutdown")
	}
	// A pending hello's TTL timer or the refusal summary firing during a
	// later input would add to that input's coverage.
	p.hub.Close()
}

// executorConn connects an executor; done closes when the Hub is through
// with it.
func (p *pipeHub) executorConn() (c net.Conn, done chan struct{}) {
	return p.conn(p.hub.ServeExecutor)
}

func (p *pipeHub) ideConn() (c net.Conn, done chan struct{}) {
	return p.conn(p.hub.ServeIDE)
}

func (p *pipeHub) conn(serve func(context.Context, net.Conn)) (net.Conn, chan struct{}) {
	ours, theirs := net.Pipe()
	done := make(chan struct{})
	p.wg.Add(1)
	go func() { defer p.wg.Done(); defer close(done); serve(p.ctx, theirs) }()
	p.t.Cleanup(func() { ours.Close() })
	return ours, done
}

// waitDone waits (bounded) until the Hub is through with a connection.
func (p *pipeHub) waitDone(what string, done chan struct{}) {
	p.t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("the hub still serves %s 10s after it closed", what)
	}
}

// spew writes data to c while draining what the hub sends back, then
// closes c.
func spew(c net.Conn, data []byte) {
	go func() { _, _ = io.Copy(io.Discard, c) }()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write(data)
	c.Close()
}

// goodIDE attaches a merged-mode IDE that sets a breakpoint on
// /job/udf.py:5.
func (p *pipeHub) goodIDE() *dapclient.Client {
	p.t.Helper()
	conn, _ := p.ideConn()
	c := dapclient.New(conn)
	p.t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(p.ctx, false); err != nil {
		p.t.Fatalf("good IDE: %v", err)
	}
	if err := c.Attach(p.ctx, map[string]any{"request": "attach"}, func(ctx context.Context) error {
		_, err := c.SetBreakpoints(ctx, "/job/udf.py", 5)
		return err
	}); err != nil {
		p.t.Fatalf("good IDE: %v", err)
	}
	return c
}

// goodExecutor connects a fake pydevd and waits until it is in service.
func (p *pipeHub) goodExecutor(pid int) *fakePydevd {
	p.t.Helper()
	conn, _ := p.executorConn()
	f := newFake(p.t, conn, testToken, pid, nil)
	f.waitRequest("configurationDone", nil)
	return f
}

// check is what a user of the well-behaved pair sees: the executor got the
// breakpoint, its thread is listed, it stops and its stack can be read.
func (p *pipeHub) check(c *dapclient.Client, f *fakePydevd) {
	p.t.Helper()
	f.waitRequest("setBreakpoints", func(m Message) bool {
		src, _ := m.Arguments()["source"].(map[string]any)
		bps, _ := m.Arguments()["breakpoints"].([]any)
		return src["path"] == "/job/udf.py" && len(bps) == 1
	})
	threads, err := c.Threads(p.ctx)
	if err != nil || len(threads) != 1 {
		p.t.Fatalf("good IDE threads = %+v, %v; want the good executor's one", threads, err)
	}
	tid := threads[0].Id
	f.stop()
	if _, err := c.WaitEvent(p.ctx, "stopped", func(b json.RawMessage) bool {
		var body struct{ ThreadID int }
		return json.Unmarshal(b, &body) == nil && body.ThreadID == tid
	}); err != nil {
		p.t.Fatal(err)
	}
	frames, err := c.StackTrace(p.ctx, tid)
	if err != nil || len(frames) != 1 || frames[0].Source == nil || frames[0].Source.Path != "/job/udf.py" {
		p.t.Fatalf("good IDE stackTrace = %+v, %v", frames, err)
	}
}

func addFrameSeeds(f *testing.F, withBool bool) {
	seeds := []string{
		frame(`{"seq":1,"type":"request","command":"initialize","arguments":{"supportsStartDebuggingRequest":true}}`) +
			frame(`{"seq":2,"type":"request","command":"attach","arguments":{}}`) +
			frame(`{"seq":3,"type":"request","command":"setBreakpoints","arguments":{"source":{"path":"/x.py"},"breakpoints":[{"line":1}]}}`) +
			frame(`{"seq":4,"type":"request","command":"configurationDone"}`) +
			frame(`{"seq":5,"type":"request","command":"threads"}`),
		frame(`{"seq":1,"type":"event","event":"stopped","body":{"threadId":1,"reason":"breakpoint","hitBreakpointIds":[0,"x"]}}`) +
			frame(`{"seq":2,"type":"event","event":"breakpoint","body":{"reason":"changed","breakpoint":{"id":0,"verified":true}}}`) +
			frame(`{"seq":3,"type":"event","event":"thread","body":{"reason":"exited","threadId":1}}`),
		frame(`{"seq":1,"type":"response","request_seq":1,"command":"pydevdAuthorize","success":true,"body":{"clientAccessToken":"s3cret"}}`) +
			frame(`{"seq":2,"type":"response","request_seq":2,"command":"pydevdSystemInfo","success":true,"body":{"process":{"pid":9}}}`) +
			frame(`{"seq":3,"type":"response","request_seq":3,"command":"initialize","success":true}`) +
			frame(`{"seq":4,"type":"response","request_seq":4,"command":"attach","success":true}`) +
			frame(`{"seq":5,"type":"event","event":"sparkdapTask","body":{"pid":9,"roots":{"cwd":"/w"}}}`),
		"SPARKDAP/2 HELLO " + strings.Repeat("a1", 16) + "\nSPARKDAP/2 {\"proof\":\"x\",\"pid\":7,\"roots\":{\"cwd\":\"/w\"}}\n",
		frame(`{"seq":1,"type":"request","command":"disconnect","arguments":{"terminateDebuggee":true}}`),
		frame(`{"seq":1,"type":"request","command":"attach","arguments":{"sparkdapExecutor":1}}`) +
			frame(`{"seq":2,"type":"request","command":"stackTrace","arguments":{"threadId":"*"}}`),
		"Content-Length: 99999999999\r\n\r\n",
		"Content-Length: 5\r\n\r\n{nope",
	}
	for _, s := range seeds {
		if withBool {
			f.Add([]byte(s), true)
			f.Add([]byte(s), false)
		} else {
			f.Add([]byte(s))
		}
	}
}

// FuzzHubExecutorSide: arbitrary bytes from an executor connection, either
// from its first byte (hello, handshake) or after a proper handshake, while
// an IDE is attached. Afterwards a well-behaved executor is debugged
// normally and the Hub shuts down.
func FuzzHubExecutorSide(f *testing.F) {
	addFrameSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte, afterHandshake bool) {
		p := newPipeHub(t)
		c := p.goodIDE()
		conn, done := p.executorConn()
		if afterHandshake {
			bad := newFake(t, conn, testToken, 666, nil)
			bad.waitRequest("configurationDone", nil)
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_ = bad.WriteRaw(data)
			conn.Close()
		} else {
			spew(conn, data)
		}
		p.waitDone("the bad executor", done)
		tx := p.hub.lock()
		left := len(tx.executors)
		tx.unlock()
		if left != 0 {
			t.Fatalf("%d executors still admitted after the bad one left", left)
		}
		p.check(c, p.goodExecutor(1))
	})
}

// FuzzHubIDESide: arbitrary bytes from an IDE connection while an executor
// is connected. Afterwards a well-behaved IDE attaches and debugs it.
func FuzzHubIDESide(f *testing.F) {
	addFrameSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newPipeHub(t)
		ex := p.goodExecutor(1)
		conn, done := p.ideConn()
		spew(conn, data)
		p.waitDone("the bad IDE", done)
		tx := p.hub.lock()
		root, children := tx.root, len(tx.children)
		tx.unlock()
		if root != nil || children != 0 {
			t.Fatalf("the bad IDE left a session behind: root %v, %d children", root != nil, children)
		}
		p.check(p.goodIDE(), ex)
	})
}

// FuzzHello: arbitrary hello lines never panic and never pass the
// challenge–response: the proof is bound to a nonce the proxy draws after
// the worker's first line, so no fixed input can carry it.
func FuzzHello(f *testing.F) {
	wn := strings.Repeat("a1", 16)
	f.Add([]byte("SPARKDAP/2 HELLO " + wn + "\nSPARKDAP/2 {\"proof\":\"" + strings.Repeat("0", 64) + "\",\"pid\":7,\"host\":\"h\",\"stageId\":1,\"roots\":{\"cwd\":\"/w\",\"sysPath\":[\"/a\"]}}\n"))
	f.Add([]byte("SPARKDAP/2 HELLO " + wn + "\nSPARKDAP/2 {\"pid\":7}\n"))
	f.Add([]byte("SPARKDAP/1 {\"token\":\"s3cret\",\"pid\":7}\n"))
	f.Add([]byte("SPARKDAP/2 HELLO " + wn + "\nSPARKDAP/2 {\"pid\":-1}\n"))
	f.Add([]byte("SPARKDAP/2 " + strings.Repeat("x", 70000)))
	f.Add([]byte("SPARKDAP/2 HELLO " + wn + "\nSPARKDAP/2 {\"proof\":\"x\",\"pid\":1e3,\"roots\":7}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		if !admission.IsHello(br) {
			return
		}
		h := NewHub(Config{Token: testToken, MaxSessions: 2, Log: zerolog.Nop()})
		// A pending hello's TTL timer must not fire into a later input.
		defer h.Close()
		hello, err := h.admission.Handshake(br, func([]byte) {})
		if err == nil {
			t.Fatalf("a fixed input passed the challenge: %+v", hello)
		}
		if _, err := h.acceptHello("127.0.0.1", hello); err == nil {
			t.Fatal("an unverified hello accepted")
		}
		if n := len(h.admission.Pending()); n != 0 {
			t.Fatalf("%d hellos pending after a failed challenge", n)
		}
	})
}

// TestHubClose: after Close no timer of the Hub's is left to fire (the
// pipeHub of every fuzz input relies on it): a pending hello is dropped with
// its TTL timer and refused workers are no longer counted for a summary.
func TestHubClose(t *testing.T) {
	var summary bytes.Buffer
	h := NewHub(Config{Token: testToken, Log: zerolog.Nop(), HelloTTL: time.Hour, Summary: &summary})
	if _, err := h.acceptHello("127.0.0.1", verifiedHello(t, h, 7)); err != nil {
		t.Fatal(err)
	}
	if n := len(h.admission.Pending()); n != 1 {
		t.Fatalf("%d pending hellos before Close, want 1", n)
	}
	h.Close()
	if n := len(h.admission.Pending()); n != 0 {
		t.Fatalf("%d pending hellos after Close, want 0", n)
	}
	if h.refusedLine("127.0.0.1:1234", "refused") {
		t.Fatal("a refusal after Close was printed: the refusal log still runs")
	}
	h.Close() // a second Close is harmless
}

// TestCapMinimization: the targets in cappedMinimization get the cap
// unless the flag was given; other targets keep the engine's default.
func TestCapMinimization(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ide side", []string{"-test.fuzz=^FuzzHubIDESide$"}, minimizeLimit},
		{"executor side", []string{"-test.fuzz=FuzzHubExecutorSide"}, minimizeLimit},
		{"given", []string{"-test.fuzz=^FuzzHubIDESide$", "-test.fuzzminimizetime=5s"}, "5s"},
		{"hello", []string{"-test.fuzz=^FuzzHello$"}, minimizeLimit},
		{"other target", []string{"-test.fuzz=^FuzzTranslate$"}, "60s"},
		{"not fuzzing", nil, "60s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.String("test.fuzz", "", "")
			// The testing package's flag also takes counts ("200x").
			fs.String("test.fuzzminimizetime", "60s", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := capMinimization(fs); err != nil {
				t.Fatal(err)
			}
			if got := fs.Lookup("test.fuzzminimizetime").Value.String(); got != tc.want {
				t.Fatalf("-fuzzminimizetime = %s, want %s", got, tc.want)
			}
		})
	}
}

// verifiedHello runs the real SPARKDAP/2 exchange between the wrapper's side
// (admission.Introduce) and h's registry over a pipe, and returns the hello h
// verified.
func verifiedHello(t *testing.T, h *Hub, pid int64) admission.Hello {
	t.Helper()
	proxySide, workerSide := net.Pipe()
	defer proxySide.Close()
	defer workerSide.Close()
	_ = proxySide.SetDeadline(time.Now().Add(10 * time.Second))
	_ = workerSide.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		_, _, _ = admission.Introduce(workerSide, testToken, admission.TaskInfo{PID: pid})
	}()
	hello, err := h.admission.Handshake(bufio.NewReader(proxySide), func(b []byte) { _, _ = proxySide.Write(b) })
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	return hello
}
