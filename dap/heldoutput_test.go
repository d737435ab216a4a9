package dap

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestOutputOfUnlistedWorkers: in child-session mode a worker gets a child
// session only once it stops. What it prints before (and while it has no
// session) reaches the root, each line after its label, as in the merged
// view; once its child session is there, what it prints goes to that.
func TestOutputOfUnlistedWorkers(t *testing.T) {
	p := startProxy(t, nil)
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	root, children := p.childRoot(nil, nil)
	const pid = 770
	f := p.executor(pid, nil)
	for _, s := range []string{"reading partition 1\n", "row 7 looks odd\n"} {
		f.event("output", map[string]any{"category": "stdout", "output": s})
	}
	if _, err := root.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		var body struct{ Output string }
		return json.Unmarshal(b, &body) == nil && strings.Contains(body.Output, "pid 770") &&
			strings.HasSuffix(body.Output, "] row 7 looks odd\n")
	}); err != nil {
		t.Fatalf("a worker with no session printed, and the root did not show it: %v", err)
	}
	f.stop()
	child := p.nextChild(children)
	stoppedOn(ctx, t, child.Client)
	f.event("output", map[string]any{"category": "stdout", "output": "late\n"})
	if _, err := child.Client.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		return strings.Contains(string(b), `"late\n"`)
	}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range root.Events() {
		if ev.Event == "output" && strings.Contains(string(ev.Body), "late") {
			t.Errorf("the root got a listed worker's output too: %s", ev.Body)
		}
	}
}
