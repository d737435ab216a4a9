package dap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// laptopPaths are executor paths that name files on the developer's
// machine outside --root: each must never reach the IDE as a path.
var laptopPaths = []string{"~/.ssh/id_rsa", "/opt/job/../../root/.ssh/id_rsa", "/home/me/.ssh/id_rsa", "/home/me/proj/../.ssh/id_rsa"}

// pathValues lists every value of a path-carrying field (pathKeys'
// objects' fields, and any "path" or "symbolFilePath" at all) in a
// decoded body.
func pathValues(v any, out *[]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if s, ok := e.(string); ok && (k == "path" || k == "symbolFilePath") {
				*out = append(*out, s)
			}
			pathValues(e, out)
		}
	case []any:
		for _, e := range t {
			pathValues(e, out)
		}
	}
}

// sourcesWith is a Source for each path, the laptop paths first, then the
// mapped one, with a nested source naming a laptop path.
func sourcesWith(paths ...string) []any {
	var out []any
	for i, p := range paths {
		out = append(out, map[string]any{"name": "f", "path": p, "sourceReference": i + 1,
			"sources": []any{map[string]any{"path": laptopPaths[0]}}})
	}
	return out
}

// TestExecutorPathsConfinedInEveryBody: whatever response or event an
// executor answers with, a path of it outside the roots never reaches the
// IDE, in every DAP field that carries one (Source.path, nested sources,
// Module.path and symbolFilePath, in any position); a path that maps
// reaches it as the developer's file.
func TestExecutorPathsConfinedInEveryBody(t *testing.T) {
	p := leaveProxy(t)
	c := p.ide(false, nil)
	f := p.mappedExecutor(360)
	all := append(append([]string{}, laptopPaths...), leaveRemote)
	source := func(path string) map[string]any {
		return map[string]any{"name": "f", "path": path, "sourceReference": 7}
	}
	modules := func() []any {
		var out []any
		for i, path := range all {
			out = append(out, map[string]any{"id": i + 1, "name": "m", "path": path, "symbolFilePath": path})
		}
		return out
	}
	frames := func() []any {
		var out []any
		for i, path := range all {
			out = append(out, map[string]any{"id": 2 + i, "name": "f", "line": 1, "column": 1, "source": source(path)})
		}
		return out
	}
	bodies := map[string]map[string]any{
		"stackTrace":    {"stackFrames": frames(), "totalFrames": len(all)},
		"scopes":        {"scopes": []any{map[string]any{"name": "Locals", "variablesReference": 0, "expensive": false, "source": source(laptopPaths[1])}}},
		"modules":       {"modules": modules(), "totalModules": len(all)},
		"exceptionInfo": {"exceptionId": "E", "breakMode": "always", "details": map[string]any{"message": "m", "source": source(laptopPaths[2])}},
		"gotoTargets":   {"targets": []any{map[string]any{"id": 1, "label": "l", "line": 1, "source": source(laptopPaths[3])}}},
		"source":        {"content": "x = 1\n", "sources": sourcesWith(all...)},
	}
	f.SetTamper(func(req fakepydevd.Message, resp map[string]any) {
		if b, ok := bodies[req.Command]; ok {
			raw, _ := json.Marshal(b) // a fresh copy per answer
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			resp["success"], resp["body"] = true, body
			delete(resp, "message")
		}
	})
	f.stop()
	tid := stoppedOn(p.ctx, t, c)
	check := func(what string, body json.RawMessage) {
		t.Helper()
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var paths []string
		pathValues(v, &paths)
		for _, got := range paths {
			if got != leaveLocal {
				t.Errorf("%s gave the IDE the path %q: %s", what, got, body)
			}
		}
	}
	var frameID int
	for _, tc := range []struct {
		command string
		args    func() map[string]any
		mapped  bool // the body holds leaveRemote, which must arrive mapped
	}{
		{"stackTrace", func() map[string]any { return map[string]any{"threadId": tid} }, true},
		{"scopes", func() map[string]any { return map[string]any{"frameId": frameID} }, false},
		{"modules", func() map[string]any { return map[string]any{"threadId": tid} }, true},
		{"exceptionInfo", func() map[string]any { return map[string]any{"threadId": tid} }, false},
		{"gotoTargets", func() map[string]any {
			return map[string]any{"source": map[string]any{"path": leaveLocal}, "line": 1, "threadId": tid}
		}, false},
		{"source", func() map[string]any { return map[string]any{"sourceReference": 0, "threadId": tid} }, true},
	} {
		t.Run(tc.command, func(t *testing.T) {
			resp, err := c.Request(p.ctx, tc.command, tc.args())
			if err != nil || !resp.Success {
				t.Fatalf("%s: %+v %v", tc.command, resp, err)
			}
			check(tc.command+" response", resp.Body)
			if tc.mapped && !strings.Contains(string(resp.Body), leaveLocal) {
				t.Errorf("%s: the mapped path did not arrive as %s: %s", tc.command, leaveLocal, resp.Body)
			}
			if tc.command == "stackTrace" {
				var b struct{ StackFrames []struct{ ID int } }
				_ = json.Unmarshal(resp.Body, &b)
				frameID = b.StackFrames[0].ID
			}
		})
	}
	for _, bad := range all {
		f.event("module", map[string]any{"reason": "new", "module": map[string]any{"id": 1, "name": "m", "path": bad, "symbolFilePath": bad}})
		f.event("loadedSource", map[string]any{"reason": "new", "source": map[string]any{"path": bad, "sourceReference": 9,
			"sources": []any{map[string]any{"path": laptopPaths[0]}}}})
		f.event("output", map[string]any{"category": "stdout", "output": "o\n", "source": source(bad), "line": 1})
	}
	f.event("output", map[string]any{"category": "stdout", "output": "end\n"})
	if _, err := c.WaitEvent(p.ctx, "output", func(b json.RawMessage) bool { return strings.Contains(string(b), "end") }); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range c.Events() {
		switch ev.Event {
		case "module", "loadedSource", "output":
			n++
			check(ev.Event+" event", ev.Body)
		}
	}
	if n < 3*len(all) {
		t.Errorf("the IDE got %d of the %d events", n, 3*len(all))
	}
}
