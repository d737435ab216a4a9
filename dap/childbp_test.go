package dap

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// TestVSCodeRootLearnsChildBinding: breakpoints in two files, one
// executor shown in a child session that bound them. When the user
// removes one line's breakpoint, VS Code sends the file's remaining
// breakpoints to the root and the child; the root must not call pending a
// breakpoint the child's worker has bound and stops at: it ends verified,
// in its answer or by a breakpoint event.
func TestVSCodeRootLearnsChildBinding(t *testing.T) {
	const (
		lib  = "/home/me/proj/loanlib.py"
		main = "/home/me/proj/loans.py"
	)
	p := startProxy(t, nil)
	ide := vscodeclient.New(vscodeclient.Options{Workspace: "/home/me/proj"})
	t.Cleanup(ide.Close)
	ide.SetBreakpoints(lib, 12, 14)
	ide.SetBreakpoints(main, 63)
	host, port, _ := net.SplitHostPort(p.srv.IDEAddr().String())
	root, err := ide.Attach(p.ctx, map[string]any{"name": "sparkdap", "type": "debugpy", "request": "attach",
		"connect": map[string]any{"host": host, "port": port}, "justMyCode": false})
	if err != nil {
		t.Fatal(err)
	}
	f := p.executor(800, nil)
	if err := p.ctx.Err(); err != nil {
		t.Fatal(err)
	}
	// The worker stops once, so that its child session is there whenever
	// the proxy opens one.
	waitFor(t, "breakpoint armed", func() (bool, string) {
		_, armed := f.state()
		return f.hit(lib, 12), armed
	})
	child := nextChild(t, ide)
	st := nextVSCodeStop(t, ide)
	if st.Session != child {
		t.Fatalf("stop shown in %q, want the child session", st.Session.Name)
	}
	waitFor(t, "child bound loanlib.py", func() (bool, string) {
		ids := child.BreakpointIDs(lib)
		return len(ids) == 2, "ids " + jsonText(ids)
	})

	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	bps, err := ide.EditBreakpoints(ctx, lib, 14)
	if err != nil || len(bps) != 1 {
		t.Fatalf("root's setBreakpoints [14]: %v %+v", err, bps)
	}
	id := bps[0].Id
	if bps[0].Verified {
		return
	}
	_, err = root.Client.WaitEvent(ctx, "breakpoint", func(body json.RawMessage) bool {
		var b struct {
			Breakpoint struct {
				ID       int  `json:"id"`
				Verified bool `json:"verified"`
			} `json:"breakpoint"`
		}
		return json.Unmarshal(body, &b) == nil && b.Breakpoint.ID == id && b.Breakpoint.Verified
	})
	if err != nil {
		t.Fatalf("the root's breakpoint at line 14 stayed %q although the child's worker bound it: %v", bps[0].Message, err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
