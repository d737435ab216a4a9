package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// readmeNvimBlocks returns the Lua blocks of the README's nvim-dap
// section, in order.
func readmeNvimBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n### nvim-dap\n")
	if i < 0 {
		t.Fatal("README.md has no nvim-dap section")
	}
	s = s[i+1:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```lua\n(.*?)```").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// nvimDapStub stands in for nvim-dap's module as the README's
// configuration uses it: adapters, configurations, and defaults whose
// per-adapter tables fall back to defaults.fallback.
const nvimDapStub = `
local fallback = {}
local defaults = setmetatable({ fallback = fallback }, { __index = function(t, k)
  local v = setmetatable({}, { __index = fallback })
  rawset(t, k, v)
  return v
end })
package.loaded['dap'] = { adapters = {}, configurations = {}, defaults = defaults }
`

// nvimDapResolve runs the README's Lua and then does what nvim-dap does
// to start a session: it takes the configuration the user picks (the last
// python one) or, for a child session, the configuration of the proxy's
// startDebugging request, and resolves its type's adapter (calling it with
// the configuration if it is a function). It prints the adapter and the
// configuration's top-level values, and what auto_continue_if_many_stopped
// is for the adapter.
const nvimDapResolve = `
local dap = require('dap')
local config = dap.configurations.python[#dap.configurations.python]
if child then
  child.type = child.type or config.type
  child.request = 'attach'
  config = child
end
local adapter = dap.adapters[config.type]
if type(adapter) == 'function' then
  local resolved
  adapter(function(a) resolved = a end, config)
  adapter = resolved
end
for k, v in pairs(adapter) do print('adapter.' .. k .. '=' .. tostring(v)) end
for k, v in pairs(config) do
  if type(v) == 'table' then
    for kk, vv in pairs(v) do print('config.' .. k .. '.' .. kk .. '=' .. tostring(vv)) end
  else
    print('config.' .. k .. '=' .. tostring(v))
  end
end
print('auto_continue_if_many_stopped=' .. tostring(dap.defaults[config.type].auto_continue_if_many_stopped))
`

// luaLiteral writes a JSON value as a Lua literal.
func luaLiteral(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var sb strings.Builder
		sb.WriteString("{")
		for _, k := range keys {
			fmt.Fprintf(&sb, "[%q] = %s, ", k, luaLiteral(x[k]))
		}
		sb.WriteString("}")
		return sb.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = luaLiteral(e)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return "nil"
}

// runNvimConfig runs lua code (README blocks) with the stub and resolves a
// session's adapter and configuration; child, if not nil, is the
// configuration of a startDebugging request.
func runNvimConfig(lua, code string, child map[string]any, env ...string) (map[string]string, error) {
	script := nvimDapStub + "\n" + code + "\nlocal child = nil\n"
	if child != nil {
		script += "child = " + luaLiteral(child) + "\n"
	}
	script += nvimDapResolve
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, lua, "-")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("the README's nvim-dap Lua does not run: %w\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	return got, nil
}

// nvimAttachArgs rebuilds the attach arguments nvim-dap sends (the
// configuration table) from what runNvimConfig printed.
func nvimAttachArgs(got map[string]string) map[string]any {
	value := func(v string) any {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		return v
	}
	args := map[string]any{}
	for k, v := range got {
		name, ok := strings.CutPrefix(k, "config.")
		if !ok {
			continue
		}
		if outer, inner, nested := strings.Cut(name, "."); nested {
			m, _ := args[outer].(map[string]any)
			if m == nil {
				m = map[string]any{}
				args[outer] = m
			}
			m[inner] = value(v)
			continue
		}
		args[name] = value(v)
	}
	return args
}

// readmeIDEPort is the IDE port the README's configurations name: serve's
// default. The test's proxy listens elsewhere; the client goes there
// instead.
const readmeIDEPort = "4711"

// TestNvimDapREADMEConfiguration runs the README's nvim-dap configuration
// (both the adapter table and the adapter function) the way nvim-dap
// uses it: the root session attaches with the configuration as its
// arguments, each child session resolves its adapter from the
// startDebugging configuration and attaches with it, a stop shows in the
// child, and both sessions disconnect as nvim-dap does (close once the
// answer is read).
func TestNvimDapREADMEConfiguration(t *testing.T) {
	lua := testenv.Tool(t, "lua5.4", "apt-get install lua5.4; scripts/setup installs it")
	blocks := readmeNvimBlocks(t)
	if len(blocks) != 3 {
		t.Fatalf("README's nvim-dap section has %d Lua blocks, want 3 (adapter table, adapter function, merged-mode default)", len(blocks))
	}
	const ideToken = "nvim-t0ken"
	env := "SPARKDAP_IDE_TOKEN=" + ideToken
	for i, tt := range []struct {
		name        string
		code        string
		childFollow bool // the child's adapter goes where startDebugging says
	}{
		{"adapter table", blocks[0], false},
		{"adapter function", blocks[1], true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, func(c *Config) { c.IDEToken = ideToken })
			ideAddr := p.srv.IDEAddr().String()
			// dialAdapter connects where nvim-dap would for a resolved
			// adapter: serve's default port stands for this test's proxy.
			dialAdapter := func(got map[string]string) (*dapclient.Client, error) {
				if got["adapter.type"] != "server" {
					return nil, fmt.Errorf("adapter %v: want type server", got)
				}
				addr := got["adapter.host"] + ":" + got["adapter.port"]
				if got["adapter.port"] == readmeIDEPort && got["adapter.host"] == "127.0.0.1" {
					addr = ideAddr
				}
				c, err := dapclient.Dial(p.ctx, addr)
				if err != nil {
					return nil, fmt.Errorf("nvim-dap would connect to %s: %w", addr, err)
				}
				t.Cleanup(func() { c.Close() })
				return c, nil
			}
			rootCfg, err := runNvimConfig(lua, tt.code, nil, env)
			if err != nil {
				t.Fatal(err)
			}
			if rootCfg["adapter.host"] != "127.0.0.1" || rootCfg["adapter.port"] != readmeIDEPort {
				t.Fatalf("root session's adapter %v: want 127.0.0.1:%s, serve's IDE port", rootCfg, readmeIDEPort)
			}
			args := nvimAttachArgs(rootCfg)
			root, err := dialAdapter(rootCfg)
			if err != nil {
				t.Fatal(err)
			}
			children := make(chan *dapclient.Client, 1)
			childErr := make(chan error, 1)
			root.OnReverseRequest(func(command string, raw json.RawMessage) (bool, any) {
				if command != "startDebugging" {
					return false, nil
				}
				c, err := func() (*dapclient.Client, error) {
					var req struct {
						Request       string         `json:"request"`
						Configuration map[string]any `json:"configuration"`
					}
					if err := json.Unmarshal(raw, &req); err != nil {
						return nil, err
					}
					got, err := runNvimConfig(lua, tt.code, req.Configuration, env)
					if err != nil {
						return nil, err
					}
					want := readmeIDEPort
					if tt.childFollow {
						conn, _ := req.Configuration["connect"].(map[string]any)
						want = fmt.Sprint(conn["port"])
					}
					if got["adapter.port"] != want {
						return nil, fmt.Errorf("child adapter %v: want port %s", got, want)
					}
					c, err := dialAdapter(got)
					if err != nil {
						return nil, err
					}
					if _, err := c.Initialize(p.ctx, true); err != nil {
						return nil, err
					}
					cfg := req.Configuration
					cfg["request"] = req.Request
					return c, c.Attach(p.ctx, cfg, func(ctx context.Context) error {
						_, err := c.SetBreakpoints(ctx, "/job/udf.py", 5)
						return err
					})
				}()
				if err != nil {
					childErr <- err
					return false, nil
				}
				children <- c
				return true, nil
			})
			if _, err := root.Initialize(p.ctx, true); err != nil {
				t.Fatal(err)
			}
			// nvim-dap sends the breakpoints to every session, the root too.
			if err := root.Attach(p.ctx, args, func(ctx context.Context) error {
				_, err := root.SetBreakpoints(ctx, "/job/udf.py", 5)
				return err
			}); err != nil {
				t.Fatalf("root attach with the README's configuration %v: %v", args, err)
			}
			f := p.executor(800+i, nil)
			// A worker is listed (its child session started) at its stop.
			waitFor(t, "breakpoint armed", func() (bool, string) {
				_, armed := f.state()
				return strings.Contains(armed, "/job/udf.py"), armed
			})
			if !f.hit("/job/udf.py", 5) {
				t.Fatal("the root's breakpoint did not reach the worker")
			}
			var child *dapclient.Client
			select {
			case child = <-children:
			case err := <-childErr:
				t.Fatal(err)
			case <-p.ctx.Done():
				t.Fatal("no child session")
			}
			tid := stoppedOn(p.ctx, t, child)
			if frames, err := child.StackTrace(p.ctx, tid); err != nil || len(frames) == 0 {
				t.Fatalf("stackTrace in the child: %v, %v", frames, err)
			}
			if err := child.Continue(p.ctx, tid); err != nil {
				t.Fatal(err)
			}
			// nvim-dap's disconnect: the answer, then its own close.
			for _, c := range []*dapclient.Client{child, root} {
				resp, err := c.Request(p.ctx, "disconnect", map[string]any{"terminateDebuggee": false})
				if err != nil || !resp.Success {
					t.Fatalf("disconnect: %+v, %v", resp, err)
				}
				select {
				case <-c.Done():
					t.Fatal("the proxy closed the connection before the client could")
				default:
				}
				c.Close()
			}
		})
	}
	t.Run("merged mode default", func(t *testing.T) {
		got, err := runNvimConfig(lua, blocks[0]+"\n"+blocks[2], nil, env)
		if err != nil {
			t.Fatal(err)
		}
		if got["auto_continue_if_many_stopped"] != "false" {
			t.Errorf("after the README's merged-mode line, auto_continue_if_many_stopped for the sparkdap adapter is %s, want false",
				got["auto_continue_if_many_stopped"])
		}
	})
}
