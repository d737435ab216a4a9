package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/workerwrap"
)

// vocab is the CLI's vocabulary: every flag name more than one command
// takes, with its one meaning. Shared flags are declared only through the
// def* helpers below, which take the usage text from here (a command may
// add a detail after it), and TestFlagVocabulary checks that a name means
// the same thing, with the same type, in every command. doc.go has the
// table for people.
var vocab = map[string]string{
	// Addresses: always one HOST:PORT flag, never --host/--port.
	"ide":           "`HOST:PORT` of the proxy's IDE port (DAP over TCP): serve listens there, IDEs, doctor and paths connect",
	"executors":     "`HOST:PORT` of the proxy's executor port, which the workers' debugpy.connect reaches",
	"pycharm":       "`HOST:PORT` where PyCharm's Python Debug Server listens (for serve --ide-kind pycharm)",
	"control":       "`path` of the proxy's control socket, a Unix socket only your user can reach (sparkdap capture talks to serve there; default: derived from --ide)",
	"remote-listen": "`HOST:PORT` serve's tunnel listens on for executors, on the SSH gateway (0.0.0.0:PORT for executors on other hosts)",
	// Front end.
	"ide-kind": "`kind` of front end: dap (VS Code, nvim-dap, any DAP client; workers load debugpy) or pycharm (PyCharm's Python Debug Server; workers load pydevd-pycharm)",
	// Tokens: --X-token is a token's value, --X-token-file a file holding
	// it, --X-token-env the name of a variable holding it.
	"token":            "the executors' access `token` (default: $" + tokenEnv + ")",
	"token-env":        "environment `variable` holding the executors' access token, here and on the executors",
	"ide-token":        "the IDE `token` DAP clients present as the \"sparkdapToken\" attach argument (default: $" + ideTokenEnv + ", else none)",
	"allow-weak-token": "accept a token under 128 bits of entropy, as estimated from its length and kinds of characters (whoever reaches the executor port can test guesses at the executors' token offline)",
	// SSH gateway.
	"ssh":             "reach executors through this SSH gateway: `user@host[:port]`",
	"ssh-identity":    "private key `file` for --ssh, like ssh -i (repeatable; default: ssh-agent, then ~/.ssh/id_ed25519, id_ecdsa, id_rsa)",
	"ssh-known-hosts": "known_hosts `file` the gateway's host key is checked against",
	"ssh-timeout":     "bound on reaching the gateway and the SSH handshake",
	// Interpreters and debuggers.
	"python":        "the Python `interpreter`",
	"pycharm-build": "your PyCharm's `build` (Help → About, e.g. 253.33813.30): the executors need the pydevd-pycharm of that build",
	// Logging.
	"log-level":  "debug, info, warn or error",
	"log-format": "console or json",
	// Output for scripts.
	"json": "print JSON",
	// The job's own Spark settings.
	"conf": "one of the job's Spark settings, `KEY=VALUE` as spark-submit's --conf (repeatable)",
	// Dry run.
	"n": "dry run: write and run nothing, print instead",
	// The worker wrapper (wrap, conf, submit).
	"proxy":             "`host:port` of the sparkdap proxy as seen from the executors",
	"embed-token":       "bake the token from --token-env into the generated file (readable by anyone who can read the file)",
	"partitions":        "debug only these partition `ids` (comma separated; default all; none for no task)",
	"stages":            "debug only these stage `ids` (comma separated; default all; none for no task)",
	"sample-rate":       "debug this `fraction` (0..1] of the selected tasks, the same ones on every run",
	"connect-timeout":   "give up connecting to the proxy after this `duration` (pydevd rounds up to whole seconds)",
	"handshake-timeout": "give up if the proxy has not finished the debug handshake after this `duration`",
	"wait":              "stop each selected task at its first line of user code",
	"post-mortem":       "stop where an exception escapes user code",
	"lease":             "a worker stopped at a breakpoint that hears nothing from the proxy for this `duration` clears its breakpoints, resumes and runs on undebugged (0: it waits as long as the connection stays open)",
	"ship-debugger":     "auto, always or never: ship debugpy " + workerwrap.ShippedDebugpyVersion + " with the job (a pure-Python wheel, fetched once with pip into sparkdap's cache; with --ide-kind pycharm, the pydevd-pycharm of --pycharm-build); auto: workers use it only when their Python has no debugger the wrapper can use, always: even then, never: ship nothing",
	"proxy-backoff":     "once a worker found the proxy silent (a timeout, a lapsed lease), the other workers of its executor run undebugged without trying it for this `duration` (0: each one tries)",
}

// Defaults shared by every command that takes the flag.
const (
	defaultIDEAddr      = "127.0.0.1:4711"
	defaultExecutorAddr = "127.0.0.1:5678"
	defaultPyCharmAddr  = "127.0.0.1:12345"
	defaultRemoteListen = "127.0.0.1:5678"
	defaultSSHTimeout   = 20 * time.Second
)

// usageOf is the vocabulary's text for name, then the command's detail.
func usageOf(name, detail string) string {
	u, ok := vocab[name]
	if !ok {
		panic("flag --" + name + " is not in the vocabulary (vocab.go)")
	}
	if detail != "" {
		u += "; " + detail
	}
	return u
}

func defString(fs *flag.FlagSet, p *string, name, def, detail string) {
	fs.StringVar(p, name, def, usageOf(name, detail))
}

func defBool(fs *flag.FlagSet, p *bool, name, detail string) {
	fs.BoolVar(p, name, false, usageOf(name, detail))
}

func defDuration(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, detail string) {
	fs.DurationVar(p, name, def, usageOf(name, detail))
}

func defFloat(fs *flag.FlagSet, p *float64, name string, def float64, detail string) {
	fs.Float64Var(p, name, def, usageOf(name, detail))
}

func defList(fs *flag.FlagSet, p *stringList, name, detail string) {
	fs.Var(p, name, usageOf(name, detail))
}

// defAddr declares a HOST:PORT flag, checked as it is parsed.
func defAddr(fs *flag.FlagSet, p *string, name, def, detail string) {
	*p = def
	fs.Var((*addrValue)(p), name, usageOf(name, detail))
}

// defAddrPlain declares a HOST:PORT flag only one command takes.
func defAddrPlain(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Var((*addrValue)(p), name, usage)
}

// addrValue is a HOST:PORT flag value. The host may be empty (all
// addresses) and the port 0 (any free port).
type addrValue string

func (a *addrValue) String() string { return string(*a) }
func (a *addrValue) Get() any       { return string(*a) }

func (a *addrValue) Set(s string) error {
	if _, _, err := net.SplitHostPort(s); err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	*a = addrValue(s)
	return nil
}

// kindValue is --ide-kind's value: one of the front ends.
type kindValue string

func (k *kindValue) String() string { return string(*k) }
func (k *kindValue) Get() any       { return string(*k) }

func (k *kindValue) Set(s string) error {
	if s != ideKindDAP && s != ideKindPyCharm {
		return fmt.Errorf("want %s or %s", ideKindDAP, ideKindPyCharm)
	}
	*k = kindValue(s)
	return nil
}

// The front ends, --ide-kind's values (the worker wrapper's workerwrap.IDE*).
const (
	ideKindDAP     = "dap"
	ideKindPyCharm = "pycharm"
)

func defKind(fs *flag.FlagSet, p *string, detail string) {
	*p = ideKindDAP
	fs.Var((*kindValue)(p), "ide-kind", usageOf("ide-kind", detail))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string {
	if s == nil {
		return ""
	}
	return strings.Join(*s, ",")
}
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// splitRule reads REMOTE=LOCAL, the one syntax of serve's --map (see
// dap.ParseMapRule, which cuts at the first = likewise) and vscode's
// --path-mapping: REMOTE is everything before the first =.
func splitRule(s string) (remote, local string, err error) {
	remote, local, ok := strings.Cut(s, "=")
	if !ok || remote == "" || local == "" {
		return "", "", errors.New("want REMOTE=LOCAL")
	}
	return remote, local, nil
}

// envVarRE is an environment variable's name.
var envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
