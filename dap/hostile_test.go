package dap

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// The hostile suite plays issue 12's attackers against a real Hub serving
// on loopback: peers on the executor port that hold no token or a stolen
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
	p.executor(320, nil)
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
