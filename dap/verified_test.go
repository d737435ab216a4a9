package dap

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/pathmap"
)

// bpEvent is a breakpoint event's breakpoint; go-dap's has no reason.
type bpEvent struct {
	ID       int    `json:"id"`
	Verified bool   `json:"verified"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	Source   struct {
		Path string `json:"path"`
	} `json:"source"`
}

// nextBreakpointEvent waits for the next breakpoint event about id.
func nextBreakpointEvent(t *testing.T, ctx context.Context, c *dapclient.Client, id int) bpEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // generous; fail before the proxy's 5 minutes
	defer cancel()
	ev, err := c.WaitEvent(ctx, "breakpoint", func(body json.RawMessage) bool {
		var b struct{ Breakpoint bpEvent }
		return json.Unmarshal(body, &b) == nil && b.Breakpoint.ID == id
	})
	if err != nil {
		t.Fatalf("no breakpoint event for id %d: %v", id, err)
	}
	var b struct{ Breakpoint bpEvent }
	if err := json.Unmarshal(ev.Body, &b); err != nil {
		t.Fatal(err)
	}
	return b.Breakpoint
}

// TestVerifiedOnlyWhereTheExecutorLoadsCode: pydevd verifies a breakpoint in
// any file that exists where it was sent. The IDE sees one verified only
// once an executor that loads code from that path has it: a shipped module
// turns verified; a driver script that merely exists at the developer's path
// on a shared machine stays unverified with what to do, until a task
// unpickles a function from it; a file no executor has says so.
func TestVerifiedOnlyWhereTheExecutorLoadsCode(t *testing.T) {
	const (
		lib     = "/home/me/proj/jobs/utils.py"
		shipped = "/tmp/spark-1/userFiles-2/jobs/utils.py"
		driver  = "/home/me/proj/job.py"
		pickled = "/deploy/job.py" // where the driver ran the script: its functions' co_filename
		ghost   = "/home/me/proj/ghost.py"
	)
	pm := pathmap.NewForFiles("/home/me/proj", false, []string{lib, driver, ghost}, nil)
	p := startProxy(t, func(c *Config) { c.Paths = pm })
	var libBP, driverBP, ghostBP []godap.Breakpoint
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		var err error
		if libBP, err = c.SetBreakpoints(ctx, lib, 5); err != nil {
			return err
		}
		if driverBP, err = c.SetBreakpoints(ctx, driver, 7); err != nil {
			return err
		}
		ghostBP, err = c.SetBreakpoints(ctx, ghost, 3)
		return err
	})
	for _, bp := range [][]godap.Breakpoint{libBP, driverBP, ghostBP} {
		if len(bp) != 1 || bp[0].Verified || !strings.Contains(bp[0].Message, "pending: no executor has loaded") {
			t.Fatalf("before any executor: %+v, want one unverified breakpoint saying it is pending", bp)
		}
	}
	if !strings.Contains(driverBP[0].Message, "job.py") {
		t.Errorf("pending message %q does not name the file", driverBP[0].Message)
	}

	if got := sayHello(t, p.srv.ExecutorAddr().String(), map[string]any{"token": testToken, "pid": 41,
		"roots": map[string]any{"sparkFiles": "/tmp/spark-1/userFiles-2", "cwd": "/work"}}); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	// The machine is shared: the developer's files exist at their own
	// paths, as does the script the driver ran; the shipped module exists
	// in the executor's SparkFiles.
	exists := map[string]bool{lib: true, shipped: true, driver: true, pickled: true}
	f := dialFakeVerify(t, p.srv.ExecutorAddr().String(), testToken, 41, func(path string, line int) (bool, string) {
		if exists[path] {
			return true, ""
		}
		return false, "Breakpoint in file that does not exist."
	})
	f.waitRequest("configurationDone", nil)

	if ev := nextBreakpointEvent(t, p.ctx, c, libBP[0].Id); !ev.Verified || ev.Source.Path != lib {
		t.Errorf("shipped module: %+v, want verified at %s", ev, lib)
	}
	ev := nextBreakpointEvent(t, p.ctx, c, driverBP[0].Id)
	if ev.Verified || ev.Reason != "failed" || !strings.Contains(ev.Message, "loads no code from: "+driver) ||
		!strings.Contains(ev.Message, "sparkdap submit") || !strings.Contains(ev.Message, "SPARKDAP_DRIVER_DIR") {
		t.Errorf("driver script at a path no code runs from: %+v, want unverified saying so and what to do", ev)
	}
	ev = nextBreakpointEvent(t, p.ctx, c, ghostBP[0].Id)
	if ev.Verified || !strings.Contains(ev.Message, "does not exist") || !strings.Contains(ev.Message, "sparkdap paths") ||
		!strings.Contains(ev.Message, "--root") {
		t.Errorf("file the executor lacks: %+v, want unverified with pydevd's reason and what to do", ev)
	}

	// A task unpickles a function defined in the driver's script: its
	// directory becomes a code root, and the breakpoint binds there.
	f.event("sparkdapTask", map[string]any{"pid": 41, "roots": map[string]any{
		"sparkFiles": "/tmp/spark-1/userFiles-2", "cwd": "/work", "codeDirs": []any{"/deploy"}}})
	f.waitRequest("setBreakpoints", func(m Message) bool {
		return m.Arguments()["source"].(map[string]any)["path"] == pickled
	})
	if ev := nextBreakpointEvent(t, p.ctx, c, driverBP[0].Id); !ev.Verified || ev.Source.Path != driver {
		t.Errorf("driver script once a task ran its code: %+v, want verified at %s", ev, driver)
	}

	// `sparkdap paths` lists what stays unbound, and only that, once the
	// breakpoints resent for the new root are all answered.
	var refused []string
	for range 500 {
		refused = refused[:0]
		for _, r := range p.hub.PathReports() {
			for _, b := range r.Refused {
				refused = append(refused, b.Source)
			}
		}
		if len(refused) == 1 && refused[0] == ghost {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(refused) != 1 || refused[0] != ghost {
		t.Errorf("refused breakpoints %v, want only %s", refused, ghost)
	}
}

// TestAHitBreakpointIsVerified: a breakpoint that stopped a task is bound,
// whatever its path said before; the IDE hears so before the stop.
func TestAHitBreakpointIsVerified(t *testing.T) {
	const driver = "/home/me/proj/job.py"
	pm := pathmap.NewForFiles("/home/me/proj", false, []string{driver}, nil)
	p := startProxy(t, func(c *Config) { c.Paths = pm })
	var set []godap.Breakpoint
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		var err error
		set, err = c.SetBreakpoints(ctx, driver, 7)
		return err
	})
	if got := sayHello(t, p.srv.ExecutorAddr().String(), map[string]any{"token": testToken, "pid": 42,
		"roots": map[string]any{"cwd": "/work"}}); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	f := dialFakeVerify(t, p.srv.ExecutorAddr().String(), testToken, 42, func(path string, line int) (bool, string) {
		return path == driver, ""
	})
	f.SetFramePath(driver)
	f.waitRequest("configurationDone", nil)
	if ev := nextBreakpointEvent(t, p.ctx, c, set[0].Id); ev.Verified {
		t.Fatalf("breakpoint at a path the executor loads no code from: %+v, want unverified", ev)
	}
	f.stop()
	if ev := nextBreakpointEvent(t, p.ctx, c, set[0].Id); !ev.Verified || ev.Message != "" {
		t.Errorf("after the hit: %+v, want verified without a message", ev)
	}
	st, err := c.StoppedEvent(p.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.HitBreakpointIds) != 1 || st.HitBreakpointIds[0] != set[0].Id {
		t.Errorf("stopped hitBreakpointIds = %v, want [%d]", st.HitBreakpointIds, set[0].Id)
	}
}

func TestLoadsFrom(t *testing.T) {
	roots := pathmap.Roots{Cwd: "/yarn/container_1", SparkFiles: "/tmp/spark-1/userFiles-2",
		CodeDirs: []string{"/deploy"}, SysPath: []string{"./loanlib.zip", "/usr/lib/python3.11"}}
	tests := []struct {
		name  string
		roots pathmap.Roots
		path  string
		want  bool
	}{
		{"shipped file", roots, "/tmp/spark-1/userFiles-2/jobs/utils.py", true},
		{"in the working directory", roots, "/yarn/container_1/loans.py", true},
		{"in a zip named relative to it", roots, "/yarn/container_1/loanlib.zip/loanlib.py", true},
		{"where a task's functions came from", roots, "/deploy/job.py", true},
		{"library", roots, "/usr/lib/python3.11/json/__init__.py", true},
		{"the developer's checkout on the same machine", roots, "/home/me/proj/job.py", false},
		{"a prefix that is not a directory", roots, "/deployment/job.py", false},
		{"the root directory itself is no file", roots, "/deploy", false},
		{"unknown roots: pydevd's word stands", pathmap.Roots{}, "/home/me/proj/job.py", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadsFrom(tt.roots, tt.path); got != tt.want {
				t.Errorf("loadsFrom(%s) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}
