package dap

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/testkit/testfwd"
	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// These tests drive the proxy with testkit/vscodeclient, which behaves as
// the recorded VS Code sessions show (see its package documentation).

// vscodeAttach opens a VS Code window with the leave tests' breakpoint and
// attaches it to addr (the proxy's IDE port or a forwarder to it).
func vscodeAttach(t *testing.T, p *testProxy, addr string) (*vscodeclient.IDE, *vscodeclient.Session) {
	t.Helper()
	ide := vscodeclient.New(vscodeclient.Options{Workspace: "/home/me/proj"})
	t.Cleanup(ide.Close)
	ide.SetBreakpoints(leaveLocal, leaveLine)
	host, port, _ := net.SplitHostPort(addr)
	root, err := ide.Attach(p.ctx, map[string]any{"name": "sparkdap: attach to Spark workers", "type": "debugpy",
		"request": "attach", "connect": map[string]any{"host": host, "port": port}, "justMyCode": false})
	if err != nil {
		t.Fatal(err)
	}
	return ide, root
}

// nextChild waits for the next child session VS Code opened.
func nextChild(t *testing.T, ide *vscodeclient.IDE) *vscodeclient.Session {
	t.Helper()
	select {
	case s := <-ide.Children():
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("VS Code opened no child session")
		return nil
	}
}

// nextVSCodeStop waits for the next stop VS Code showed.
func nextVSCodeStop(t *testing.T, ide *vscodeclient.IDE) *vscodeclient.Stop {
	t.Helper()
	select {
	case st := <-ide.Stops():
		if st.Err != nil {
			t.Fatalf("showing the stop: %v", st.Err)
		}
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("VS Code showed no stop")
		return nil
	}
}

// TestVSCodeStoppingOneSessionStopsTheJob: whichever session the user
// stops from VS Code's toolbar (a child stopped at a breakpoint, or the
// root), every session the proxy owns gets terminated and ends, every
// worker is resumed with nothing armed, and a worker that comes later is
// neither announced nor stopped. Only a child that says
// "terminateDebuggee": false on purpose detaches its executor alone.
func TestVSCodeStoppingOneSessionStopsTheJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leave  func(root, child *vscodeclient.Session) map[string]any
		detach bool // only the child's executor is let go
	}{
		{"Disconnect in the stopped child", func(_, child *vscodeclient.Session) map[string]any { return child.Disconnect() }, false},
		{"Stop in the stopped child", func(_, child *vscodeclient.Session) map[string]any { return child.Stop() }, false},
		{"Disconnect in the root", func(root, _ *vscodeclient.Session) map[string]any { return root.Disconnect() }, false},
		{"a child detaching with terminateDebuggee false", func(_, child *vscodeclient.Session) map[string]any {
			args := map[string]any{"restart": false, "terminateDebuggee": false}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = child.Client.Request(ctx, "disconnect", args)
			child.Client.Close()
			return args
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := leaveProxy(t)
			ide, root := vscodeAttach(t, p, p.srv.IDEAddr().String())
			// Both workers stop, so both are listed; the second runs on
			// in the task it stopped in, and stays listed.
			f2 := p.mappedExecutor(501)
			stopAtLeave(t, f2)
			c2 := nextChild(t, ide)
			st2 := nextVSCodeStop(t, ide)
			if err := c2.Continue(p.ctx, st2.Event.ThreadId); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "executor 501 resumed", func() (bool, string) {
				susp, _ := f2.state()
				return !susp, "still stopped"
			})
			f1 := p.mappedExecutor(500)
			stopAtLeave(t, f1)
			c1 := nextChild(t, ide)
			byPID := map[int]*fakePydevd{500: f1, 501: f2}
			st := nextVSCodeStop(t, ide)
			if st.Session != c1 || st.Top().Source == nil || st.Top().Source.Path != leaveLocal {
				t.Fatalf("stop shown in %q at %+v, want the first child at %s", st.Session.Name, st.Top(), leaveLocal)
			}

			args := tc.leave(root, c1)
			if _, ok := args["terminateDebuggee"]; ok && !tc.detach {
				t.Errorf("VS Code sent disconnect %v: it only sends terminateDebuggee to an adapter that "+
					"advertises supportTerminateDebuggee, and then its Disconnect would detach one executor", args)
			}

			if tc.detach {
				waitFor(t, "executor 500 let go", func() (bool, string) {
					susp, armed := f1.state()
					return !susp && armed == "", fmt.Sprintf("stopped=%v armed=%q", susp, armed)
				})
				if root.Terminated() || c2.Terminated() || root.Ended() || c2.Ended() {
					t.Fatalf("detaching one executor ended other sessions (root ended %v, other child ended %v)", root.Ended(), c2.Ended())
				}
				if !f2.hit(leaveRemote, leaveLine) {
					t.Fatal("the other executor no longer stops at its breakpoint")
				}
				if st := nextVSCodeStop(t, ide); st.Session != c2 {
					t.Errorf("the other executor's stop was shown in %q", st.Session.Name)
				}
				return
			}

			for _, s := range []*vscodeclient.Session{root, c1, c2} {
				select {
				case <-s.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("session %q still open after the user stopped debugging", s.Name)
				}
			}
			left := c1
			if strings.Contains(tc.name, "root") {
				left = root
			}
			for _, s := range []*vscodeclient.Session{root, c1, c2} {
				if s != left && !s.Terminated() {
					t.Errorf("session %q ended without a terminated event", s.Name)
				}
			}
			for pid, f := range byPID {
				waitFor(t, fmt.Sprintf("executor %d resumed with nothing armed", pid), func() (bool, string) {
					susp, armed := f.state()
					return !susp && armed == "", fmt.Sprintf("stopped=%v armed=%q", susp, armed)
				})
				if f.hit(leaveRemote, leaveLine) {
					t.Errorf("executor %d stopped again after the user stopped debugging", pid)
				}
			}
			f3 := p.mappedExecutor(502)
			if f3.hit(leaveRemote, leaveLine) {
				t.Error("a worker arriving after the user stopped debugging stopped at the breakpoint")
			}
			select {
			case s := <-ide.Children():
				t.Errorf("a child session %q was opened after the user stopped debugging", s.Name)
			case <-time.After(300 * time.Millisecond):
			}
		})
	}
}

// TestVSCodeChildConnectsWhereTheRootDid: VS Code reaches the proxy
// through a forwarded port (an ssh -L, a container's port mapping); the
// child sessions must connect there too, not to the proxy's own listen
// address, which the IDE's machine may not reach.
func TestVSCodeChildConnectsWhereTheRootDid(t *testing.T) {
	p := leaveProxy(t)
	fwd := testfwd.Start(t, p.srv.IDEAddr().String())
	ide, _ := vscodeAttach(t, p, fwd)
	stopAtLeave(t, p.mappedExecutor(510))
	child := nextChild(t, ide)
	if child.Addr != fwd {
		t.Errorf("the child session connected to %s, want %s, where VS Code attached (the proxy listens on %s)",
			child.Addr, fwd, p.srv.IDEAddr())
	}
}

// TestChildConnectAddress: what the root's attach configuration says
// decides where the children connect; the listen address is the fallback.
func TestChildConnectAddress(t *testing.T) {
	listen := &net.TCPAddr{IP: net.IPv4zero, Port: 4711}
	for _, tc := range []struct {
		name       string
		attach     map[string]any
		host       string
		port       int64
		usedListen bool
	}{
		{"connect", map[string]any{"connect": map[string]any{"host": "localhost", "port": float64(14711)}}, "localhost", 14711, false},
		{"connect port as a string", map[string]any{"connect": map[string]any{"host": "127.0.0.2", "port": "14712"}}, "127.0.0.2", 14712, false},
		{"connect without host", map[string]any{"connect": map[string]any{"port": float64(14713)}}, "127.0.0.1", 14713, false},
		{"top-level host and port", map[string]any{"host": "127.0.0.3", "port": float64(14714)}, "127.0.0.3", 14714, false},
		{"nothing", map[string]any{}, "127.0.0.1", 4711, true},
		{"a port out of range", map[string]any{"connect": map[string]any{"port": float64(70000)}}, "127.0.0.1", 4711, true},
		{"a port that is no number", map[string]any{"connect": map[string]any{"port": "${port}"}}, "127.0.0.1", 4711, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := NewHub(Config{}).lock()
			tx.ideAddr, tx.attachArgs = listen, tc.attach
			got := tx.childConnect()
			tx.unlock()
			if got["host"] != tc.host || fmt.Sprint(got["port"]) != fmt.Sprint(tc.port) {
				t.Errorf("connect = %v, want %s:%d", got, tc.host, tc.port)
			}
		})
	}
}

// TestPlumbingFramesAreSubtle: the frames of the wrapper and of PySpark's
// daemon, under every stop, reach the IDE as library frames; the user's
// and PySpark's worker frames keep what pydevd said.
func TestPlumbingFramesAreSubtle(t *testing.T) {
	frame := func(path string) map[string]any {
		return map[string]any{"id": 1, "name": "f", "line": 1, "source": map[string]any{"path": path, "sourceReference": 3}}
	}
	body := map[string]any{"stackFrames": []any{
		frame("/spark/work/app-1/jobs/udf.py"),
		frame("/opt/spark/python/lib/pyspark.zip/pyspark/worker.py"),
		frame("/tmp/sparkdap-submit-1/remote_debug.py"),
		frame("/opt/spark/python/lib/pyspark.zip/pyspark/daemon.py"),
		map[string]any{"id": 5, "name": "no source", "line": 0},
	}}
	markPlumbingFrames(body)
	frames := body["stackFrames"].([]any)
	for i, want := range []bool{false, false, true, true, false} {
		f := frames[i].(map[string]any)
		src, _ := f["source"].(map[string]any)
		subtle := f["presentationHint"] == "subtle" && src["presentationHint"] == "deemphasize"
		if subtle != want || (!want && (f["presentationHint"] != nil || src["presentationHint"] != nil)) {
			t.Errorf("frame %d (%v): presentationHint %v, source's %v; want subtle/deemphasize: %v",
				i, src["path"], f["presentationHint"], src["presentationHint"], want)
		}
	}
}

// TestWindowsIDEPathsBind: an IDE on Windows names a file in its own
// spelling (PyCharm-style lower case and /, VS Code's lower-case drive and
// \); the breakpoint still binds on a Linux executor, whose path has the
// file's real case.
func TestWindowsIDEPathsBind(t *testing.T) {
	const remote = "/opt/run/Jobs/LoanCalc.py"
	files := []string{`C:\Users\Me\Proj\Jobs\LoanCalc.py`, `C:\Users\Me\Proj\app.py`}
	for i, local := range []string{
		`C:\Users\Me\Proj\Jobs\LoanCalc.py`, // the file system's spelling
		`c:\Users\Me\Proj\Jobs\LoanCalc.py`, // VS Code on Windows
		`c:/users/me/proj/jobs/loancalc.py`, // PyCharm on Windows, in a DAP client
	} {
		t.Run(local, func(t *testing.T) {
			p := startProxy(t, func(c *Config) { c.Paths = pathmap.NewForFiles(`C:\Users\Me\Proj`, true, files, nil) })
			pid := 600 + i
			if got := sayHello(t, p.srv.ExecutorAddr().String(), map[string]any{"token": testToken, "pid": pid,
				"label": "win", "roots": map[string]any{"cwd": "/opt/run"}}); got != "OK" {
				t.Fatalf("hello: %q", got)
			}
			p.executor(pid, func(path string, _ int) (bool, string) {
				if path == remote {
					return true, ""
				}
				return false, "Breakpoint in file that does not exist."
			})
			c := p.ide(false, nil)
			bps, err := c.SetBreakpoints(p.ctx, local, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(bps) != 1 || !bps[0].Verified {
				t.Errorf("breakpoint at %s: %+v; want it bound at the executor's %s", local, bps, remote)
			}
		})
	}
}

// TestVSCodeRestart: VS Code's Restart in the root session ends it
// (disconnect {restart: true}) and attaches again: the old child sessions
// get terminated, the executor is announced to the new root in a new
// child session, and it stops there at the breakpoint.
//
// The user presses Restart once the stop is shown in the old child (the
// child session appears only at the stop). Pressed while the old child is
// still configuring, the restart races that child's own stop, which is
// then either shown before the restart reaches the child or refused
// ("this debug session has ended") once the proxy ended it: neither says
// anything about the new child's stop, which is what this test is about.
func TestVSCodeRestart(t *testing.T) {
	p := leaveProxy(t)
	ide, root := vscodeAttach(t, p, p.srv.IDEAddr().String())
	f := p.mappedExecutor(520)
	stopAtLeave(t, f)
	old := nextChild(t, ide)
	if st := nextVSCodeStop(t, ide); st.Session != old {
		t.Fatalf("the stop was shown in %q, not in the child session opened for it", st.Session.Name)
	}
	again, err := root.Restart(p.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := root.Disconnects(); len(d) != 1 || d[0]["restart"] != true {
		t.Errorf("restart disconnected with %v, want restart: true", d)
	}
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the old child session is still open after the restart")
	}
	if !old.Terminated() {
		t.Error("the old child session ended without terminated")
	}
	// The restart let the worker go; it is listed again at its next stop.
	waitFor(t, "executor armed again", func() (bool, string) {
		_, armed := f.state()
		return strings.Contains(armed, leaveRemote), armed
	})
	if !f.hit(leaveRemote, leaveLine) {
		t.Fatal("the executor did not stop at its breakpoint after the restart")
	}
	child := nextChild(t, ide)
	if child.Parent != again {
		t.Fatalf("child session %q does not belong to the restarted root", child.Name)
	}
	if st := nextVSCodeStop(t, ide); st.Session != child {
		t.Errorf("the stop was shown in %q, not in the new child session", st.Session.Name)
	}
}

// stopAtLeave makes f stop at the leave tests' breakpoint once the root
// has armed it: a worker is listed (gets a child session) at its stop.
func stopAtLeave(t *testing.T, f *fakePydevd) {
	t.Helper()
	waitFor(t, "breakpoint armed at the executor's path", func() (bool, string) {
		_, armed := f.state()
		return strings.Contains(armed, leaveRemote), armed
	})
	if !f.hit(leaveRemote, leaveLine) {
		t.Fatal("the executor did not stop at its armed breakpoint")
	}
}
