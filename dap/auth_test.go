package dap

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

const testIDEToken = "ide-t0ken-9f2c"

// waitClosedByProxy waits until the proxy has hung up on c.
func waitClosedByProxy(t *testing.T, c *dapclient.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not close the refused connection")
	}
}

// TestIDETokenRefusals: with an IDE token set, attach and the status request
// without it or with a wrong one get an error that says what to do, and the
// connection is closed; the right token attaches, is not passed on to
// pydevd, and never shows up in the log.
func TestIDETokenRefusals(t *testing.T) {
	logs := &syncbuf.Buffer{}
	p := startProxy(t, func(c *Config) {
		c.IDEToken = testIDEToken
		c.Log = zerolog.New(logs).Level(zerolog.DebugLevel)
	})
	tests := []struct {
		name    string
		command string
		args    map[string]any
		want    string // in the error message; "" = accepted
	}{
		{"attach without token", "attach", map[string]any{"request": "attach"}, `add "sparkdapToken"`},
		{"attach with empty token", "attach", map[string]any{IDETokenArg: ""}, `add "sparkdapToken"`},
		{"attach with wrong token", "attach", map[string]any{IDETokenArg: "guess"}, `wrong "sparkdapToken"`},
		{"attach with a token of another type", "attach", map[string]any{IDETokenArg: 42}, `add "sparkdapToken"`},
		{"paths without token", PathsCommand, nil, `add "sparkdapToken"`},
		{"paths with wrong token", PathsCommand, map[string]any{IDETokenArg: testIDEToken + "x"}, `wrong "sparkdapToken"`},
		{"paths with token", PathsCommand, map[string]any{IDETokenArg: testIDEToken}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := dapclient.Dial(p.ctx, p.srv.IDEAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Initialize(p.ctx, false); err != nil {
				t.Fatalf("initialize needs no token, got %v", err)
			}
			var args any
			if tt.args != nil {
				args = tt.args
			}
			resp, err := c.Request(p.ctx, tt.command, args)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if !resp.Success {
					t.Fatalf("%s with the right token refused: %s", tt.command, resp.Message)
				}
				return
			}
			if resp.Success || !strings.Contains(resp.Message, tt.want) {
				t.Fatalf("%s: success=%v message %q; want a refusal saying %q", tt.command, resp.Success, resp.Message, tt.want)
			}
			waitClosedByProxy(t, c)
		})
	}

	// The right token: a root session attaches, and an executor's child
	// session, opened from the proxy's startDebugging, carries the token
	// without the user doing anything.
	_, children := p.childRoot(map[string]any{IDETokenArg: testIDEToken}, nil)
	f := p.executor(7, nil)
	f.stop()                       // listed once it stops
	child := p.nextChild(children) // its attach carries the token it inherited
	var cfg map[string]any
	_ = json.Unmarshal(child.Config.Configuration, &cfg)
	if cfg[IDETokenArg] != testIDEToken {
		t.Errorf("startDebugging configuration lacks the IDE token: %v", cfg)
	}
	attach := f.waitRequest("attach", nil)
	if _, leaked := attach.Arguments()[IDETokenArg]; leaked {
		t.Errorf("the IDE token was passed on to pydevd: %v", attach.Arguments())
	}
	if strings.Contains(logs.String(), testIDEToken) {
		t.Errorf("the IDE token appears in the proxy's log")
	}
}

// TestIDETokenRefusedChildSession: a child session that names an executor
// but has no token is refused like a root one.
func TestIDETokenRefusedChildSession(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.IDEToken = testIDEToken })
	p.executor(8, nil)
	ids := p.hub.Executors()
	c, err := dapclient.Dial(p.ctx, p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(p.ctx, false); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Request(p.ctx, "attach", map[string]any{"sparkdapExecutor": ids[0].ID})
	if err != nil || resp.Success || !strings.Contains(resp.Message, "requires an IDE token") {
		t.Fatalf("child attach without token: %+v, %v; want a refusal", resp, err)
	}
	waitClosedByProxy(t, c)
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	// The token alone does not open a child session either: that takes
	// the one-time value of a startDebugging request (hostile_test.go).
	c2, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	resp, err = c2.Request(ctx, "attach", map[string]any{"sparkdapExecutor": ids[0].ID, IDETokenArg: testIDEToken})
	if err != nil || resp.Success || !strings.Contains(resp.Message, ChildKeyArg) {
		t.Fatalf("child attach with the token but no child key: %+v, %v; want a refusal", resp, err)
	}
}
