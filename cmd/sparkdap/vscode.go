package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/internal/jsonc"
	"github.com/sparkdap/sparkdap/internal/safefile"
)

func init() {
	register("vscode", "write or merge sparkdap's attach configuration into .vscode/launch.json", newVSCodeCmd)
}

// defaultAttachName is the launch configuration sparkdap owns: running
// `sparkdap vscode` again replaces it and nothing else.
const defaultAttachName = "sparkdap: attach to Spark workers"

// replayName is the second configuration sparkdap owns: an attach to
// `sparkdap replay --debug`, so the capture-fix-replay loop is one click.
const replayName = "sparkdap: replay capture"

// defaultReplayDebugAddr is where the replay configuration attaches; the
// README's `sparkdap replay --debug` uses the same address.
const defaultReplayDebugAddr = "127.0.0.1:5679"

// launchConfig is a configuration sparkdap writes: it owns its name.
type launchConfig interface{ configName() string }

func (c vscodeAttach) configName() string { return c.Name }
func (c vscodeReplay) configName() string { return c.Name }

// vscodeReplay attaches to the debugpy that `sparkdap replay --debug
// HOST:PORT` starts and waits in. justMyCode: the replay steps through
// the user's function, and stepping out of it should not descend into
// cloudpickle, pandas or the replay harness's unpickling; breakpoints in
// the user's files stop either way.
type vscodeReplay struct {
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	Request    string        `json:"request"`
	Connect    vscodeConnect `json:"connect"`
	JustMyCode bool          `json:"justMyCode"`
}

// vscodeAttach is the configuration written, in the key order written.
type vscodeAttach struct {
	Name         string              `json:"name"`
	Type         string              `json:"type"`
	Request      string              `json:"request"`
	Connect      vscodeConnect       `json:"connect"`
	JustMyCode   bool                `json:"justMyCode"`
	PathMappings []vscodePathMapping `json:"pathMappings,omitempty"`
	IDEToken     string              `json:"sparkdapToken,omitempty"`
}

type vscodeConnect struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

type vscodePathMapping struct {
	LocalRoot  string `json:"localRoot"`
	RemoteRoot string `json:"remoteRoot"`
}

type vscodeOptions struct {
	dir, ide, name string
	// host and port are the deprecated --host and --port: when given
	// they replace that part of --ide.
	host, port  *string
	mappings    []vscodeMappingArg
	ideTokenEnv string
	replayDebug string
	dryRun      bool
}

// vscodeMappingArg is one --path-mapping, with the spelling it came by
// (the deprecated --map) for the error message.
type vscodeMappingArg struct{ flag, value string }

func newVSCodeCmd(stderr io.Writer) *cmdSpec {
	o := &vscodeOptions{}
	c := &cmdSpec{fs: newFlagSet("vscode", stderr)}
	fs := c.fs
	fs.StringVar(&o.dir, "dir", ".", "workspace `folder`; the file written is DIR/.vscode/launch.json")
	defAddr(fs, &o.ide, "ide", defaultIDEAddr, "as VS Code reaches it: written as the configuration's connect host and port")
	fs.StringVar(&o.name, "name", defaultAttachName, "name of the configuration; one with the same name is replaced")
	mapping := func(flag string) func(string) error {
		return func(v string) error { o.mappings = append(o.mappings, vscodeMappingArg{flag, v}); return nil }
	}
	fs.Var(funcValue{set: mapping("path-mapping")}, "path-mapping",
		"`REMOTE=LOCAL`: add a debugpy pathMappings entry (repeatable). Rarely needed: serve --root/--map map paths in the proxy")
	fs.StringVar(&o.ideTokenEnv, "ide-token-env", "", "add \"sparkdapToken\": \"${env:`VARIABLE`}\", for a serve started with an IDE token: VS Code reads the token from that variable of its own environment, so none is written into launch.json (usually "+ideTokenEnv+")")
	fs.StringVar(&o.replayDebug, "replay-debug", defaultReplayDebugAddr, "`HOST:PORT` the \""+replayName+"\" configuration attaches to: "+
		"where 'sparkdap replay --debug HOST:PORT CAPTURE' waits for VS Code (empty: leave that configuration out)")
	defBool(fs, &o.dryRun, "n", "prints the resulting launch.json")
	c.deprecate("host", "--ide HOST:PORT", funcValue{set: func(v string) error { o.host = &v; return nil }}, stderr)
	c.deprecate("port", "--ide HOST:PORT", funcValue{set: func(v string) error { o.port = &v; return nil }}, stderr)
	c.deprecate("map", "--path-mapping REMOTE=LOCAL", funcValue{set: mapping("map")}, stderr)
	c.deprecate("ide-token", "--ide-token-env "+ideTokenEnv, boolFunc(func(b bool) {
		if b {
			o.ideTokenEnv = ideTokenEnv
		}
	}), stderr)
	c.usage(stderr, `usage: sparkdap vscode [--dir .] [--ide 127.0.0.1:4711] [--name NAME] [--path-mapping REMOTE=LOCAL]... [--ide-token-env VAR] [-n]

Adds the attach configuration for 'sparkdap serve' to .vscode/launch.json,
creating the file if needed, and "`+replayName+`", which attaches to
'sparkdap replay --debug `+defaultReplayDebugAddr+` CAPTURE' (see --replay-debug). Other configurations, their order and the
file's other keys are kept; a configuration with the same name is replaced.
launch.json may contain comments and trailing commas (JSONC): they are read,
but the rewritten file is plain JSON, so comments are lost; sparkdap warns
and keeps the original as launch.json.bak. An unreadable file is left as it is.
Symbolic links at .vscode, launch.json or launch.json.bak are refused, not
followed: a repository's link must not redirect the write.

Examples:
  sparkdap vscode                              # ./.vscode/launch.json, 127.0.0.1:4711
  sparkdap vscode --dir ~/src/myjob --ide 127.0.0.1:4800
  sparkdap vscode -n                           # show the result, write nothing
  sparkdap vscode --path-mapping /opt/jobs=${workspaceFolder}
  sparkdap vscode --ide-token-env SPARKDAP_IDE_TOKEN   # serve runs with --ide-token / $SPARKDAP_IDE_TOKEN

Flags:
`)
	c.run = func(args []string, stdout, stderr io.Writer) error { return vscodeRun(o, args, stdout, stderr) }
	return c
}

// connect is where VS Code attaches: --ide, with the deprecated --host
// and --port applied.
func (o *vscodeOptions) connect() (vscodeConnect, error) {
	host, port, err := net.SplitHostPort(o.ide)
	if err != nil {
		return vscodeConnect{}, flagError("ide", err)
	}
	portFlag := "ide"
	if o.host != nil {
		host = *o.host
	}
	if o.port != nil {
		port, portFlag = *o.port, "port"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		if portFlag == "port" {
			return vscodeConnect{}, fmt.Errorf("--port %s: want 1..65535", port)
		}
		return vscodeConnect{}, fmt.Errorf("--ide %s: port %q: want 1..65535", o.ide, port)
	}
	if strings.TrimSpace(host) == "" {
		return vscodeConnect{}, fmt.Errorf("--ide %s: no host: VS Code needs one to connect to", o.ide)
	}
	return vscodeConnect{Host: host, Port: n}, nil
}

func vscodeRun(o *vscodeOptions, args []string, stdout, stderr io.Writer) error {
	dir := &o.dir
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (vscode takes only flags)", args)
	}
	conn, err := o.connect()
	if err != nil {
		return err
	}
	if strings.TrimSpace(o.name) == "" {
		return errors.New("--name must not be empty")
	}
	cfg := vscodeAttach{Name: o.name, Type: "debugpy", Request: "attach", Connect: conn}
	if o.ideTokenEnv != "" {
		if !envVarRE.MatchString(o.ideTokenEnv) {
			return fmt.Errorf("--ide-token-env %q: not an environment variable name", o.ideTokenEnv)
		}
		cfg.IDEToken = "${env:" + o.ideTokenEnv + "}"
	}
	for _, m := range o.mappings {
		remote, local, err := splitRule(m.value)
		if err != nil {
			return fmt.Errorf("--%s %q: %w", m.flag, m.value, err)
		}
		cfg.PathMappings = append(cfg.PathMappings, vscodePathMapping{LocalRoot: local, RemoteRoot: remote})
	}

	configs := []launchConfig{cfg}
	if o.replayDebug != "" {
		rc, err := replayConnect(o.replayDebug)
		if err != nil {
			return flagError("replay-debug", err)
		}
		configs = append(configs, vscodeReplay{Name: replayName, Type: "debugpy", Request: "attach", Connect: rc, JustMyCode: true})
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--dir %s: not a directory (the workspace folder must exist)", *dir)
	}
	// The repository decides what .vscode, launch.json and launch.json.bak
	// are: a symlink committed there would send these writes anywhere the
	// user can write (~/.bashrc). So none of them is followed: safefile
	// refuses links at the files, and the folder is checked here.
	vscodeDir := filepath.Join(*dir, ".vscode")
	if fi, err := os.Lstat(vscodeDir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s %w; nothing was changed", vscodeDir, safefile.ErrSymlink)
	}
	path := filepath.Join(vscodeDir, "launch.json")
	old, err := safefile.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %w; nothing was changed", err)
	}
	// Keep an existing file's permissions, for the file and its backup.
	mode := fs.FileMode(0o644)
	if fi, err := safefile.Lstat(path); err == nil && fi != nil {
		mode = fi.Mode().Perm()
	}
	res, err := mergeLaunch(old, configs...)
	if err != nil {
		return fmt.Errorf("%s: %w; the file was not changed", path, err)
	}
	if o.dryRun {
		_, err := stdout.Write(res.data)
		return err
	}
	if exists && bytes.Equal(old, res.data) {
		fmt.Fprintf(stderr, "sparkdap: %s already has %q for %s; nothing to do\n", path, cfg.Name, hostPort(cfg))
		return nil
	}
	if res.info.Comments > 0 {
		bak := path + ".bak"
		if err := safefile.WriteFile(bak, old, mode); err != nil {
			return fmt.Errorf("keep a copy of %s: %w; the file was not changed", path, err)
		}
		fmt.Fprintf(stderr, "sparkdap: warning: %s has %d comment(s); the rewritten file is plain JSON without them. The original is kept as %s\n",
			path, res.info.Comments, bak)
	}
	if err := os.MkdirAll(vscodeDir, 0o755); err != nil {
		return err
	}
	if err := safefile.WriteFile(path, res.data, mode); err != nil {
		return err
	}
	how := "added"
	if res.replaced {
		how = "replaced"
	}
	if !exists {
		how = "created the file with"
	}
	fmt.Fprintf(stderr, "sparkdap: %s: %s configuration %q (attach to %s)\n", path, how, cfg.Name, hostPort(cfg))
	fmt.Fprintf(stderr, "sparkdap: next: run 'sparkdap serve --ide %s', then start %q in VS Code's Run and Debug view\n", hostPort(cfg), cfg.Name)
	if o.replayDebug != "" {
		fmt.Fprintf(stderr, "sparkdap: to debug a capture: run 'sparkdap replay --debug %s CAPTURE', then start %q\n", o.replayDebug, replayName)
	}
	return nil
}

// replayConnect is --replay-debug as a connect host and port.
func replayConnect(addr string) (vscodeConnect, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return vscodeConnect{}, fmt.Errorf("want HOST:PORT: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strings.TrimSpace(host) == "" {
		return vscodeConnect{}, fmt.Errorf("%s: want HOST:PORT with a host and a port in 1..65535", addr)
	}
	return vscodeConnect{Host: host, Port: n}, nil
}

func hostPort(c vscodeAttach) string {
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(c.Connect.Host, "["), "]"), strconv.Itoa(c.Connect.Port))
}

type mergeResult struct {
	data     []byte
	replaced bool // a configuration with the first one's name was there
	info     jsonc.Info
}

// member is one key of a JSON object, in file order.
type member struct {
	key   string
	value json.RawMessage
}

// mergeLaunch puts cfgs into launch.json's content old (nil: no file),
// each replacing the configurations with its name where the first of them
// was (else appended, in order), and keeps everything else in its order.
func mergeLaunch(old []byte, cfgs ...launchConfig) (mergeResult, error) {
	var res mergeResult
	mine := make([]json.RawMessage, len(cfgs))
	for i, cfg := range cfgs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(cfg); err != nil {
			return res, err
		}
		mine[i] = json.RawMessage(bytes.TrimSpace(buf.Bytes()))
	}

	var members []member
	if len(bytes.TrimSpace(old)) > 0 {
		plain, info, err := jsonc.Standardize(old)
		if err != nil {
			return res, err
		}
		res.info = info
		if len(bytes.TrimSpace(plain)) > 0 { // else only comments: as good as empty
			if members, err = parseObject(plain); err != nil {
				return res, err
			}
		}
	}
	hasVersion, hasConfigs := false, false
	for i := range members {
		switch members[i].key {
		case "version":
			hasVersion = true
		case "configurations":
			hasConfigs = true
			var configs []json.RawMessage
			if err := json.Unmarshal(members[i].value, &configs); err != nil {
				return res, errors.New(`"configurations" is not an array`)
			}
			out := make([]json.RawMessage, 0, len(configs)+len(cfgs))
			placed := make([]bool, len(cfgs))
			for _, c := range configs {
				var named struct {
					Name any `json:"name"`
				}
				_ = json.Unmarshal(c, &named) // a non-object entry is kept as it is
				ours := -1
				for i, cfg := range cfgs {
					if named.Name == cfg.configName() {
						ours = i
					}
				}
				if ours < 0 {
					out = append(out, c)
					continue
				}
				if !placed[ours] {
					out = append(out, mine[ours])
				}
				placed[ours] = true
			}
			res.replaced = len(placed) > 0 && placed[0]
			for i, p := range placed {
				if !p {
					out = append(out, mine[i])
				}
			}
			b, err := json.Marshal(out)
			if err != nil {
				return res, err
			}
			members[i].value = b
		}
	}
	if !hasConfigs {
		b, _ := json.Marshal(mine)
		members = append([]member{{key: "configurations", value: b}}, members...)
	}
	if !hasVersion {
		members = append([]member{{key: "version", value: json.RawMessage(`"0.2.0"`)}}, members...)
	}

	var compact bytes.Buffer
	compact.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			compact.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		compact.Write(k)
		compact.WriteByte(':')
		compact.Write(m.value)
	}
	compact.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "    "); err != nil {
		return res, err
	}
	out.WriteByte('\n')
	res.data = out.Bytes()
	return res, nil
}

// parseObject reads a JSON object's members in order. Errors carry the
// line and column (plain has the input's offsets, see jsonc).
func parseObject(plain []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	where := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// The decoder's offsets count from the value it was reading;
			// a whole-document parse gives the absolute one.
			var v any
			if !errors.As(json.Unmarshal(plain, &v), &se) {
				return fmt.Errorf("invalid JSON: %w", err)
			}
			line, col := jsonc.Position(plain, max(int(se.Offset)-1, 0))
			return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, se)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errors.New("invalid JSON: unexpected end of file")
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, where(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("launch.json must hold a JSON object ({\"version\": ..., \"configurations\": [...]})")
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, where(err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, where(err)
		}
		replaced := false
		for i := range members {
			if members[i].key == key { // duplicate key: the last one wins, as in encoding/json
				members[i].value, replaced = v, true
			}
		}
		if !replaced {
			members = append(members, member{key: key, value: v})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, where(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, fmt.Errorf("invalid JSON: data after the top-level object (offset %d)", dec.InputOffset())
		}
		return nil, where(err)
	}
	return members, nil
}
