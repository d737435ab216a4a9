package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sparkdap/sparkdap/doctor"
	"github.com/sparkdap/sparkdap/workerwrap"
)

// wrapFlags are the worker wrapper options shared by wrap, conf and submit.
type wrapFlags struct {
	fs               *flag.FlagSet
	proxy            string
	tokenEnv         string
	embedToken       bool
	partitions       string
	stages           string
	sampleRate       float64
	connectTimeout   time.Duration
	handshakeTimeout time.Duration
	wait             bool
	postMortem       bool
	lease            time.Duration
	proxyBackoff     time.Duration
	ide              string
	allowWeakToken   bool
	shipDebugger     string
	pycharmBuild     string
	stderr           io.Writer // takes the weak-token warning
}

// addWrapFlags declares the wrapper's flags in c; stderr takes the
// deprecation notices.
func addWrapFlags(c *cmdSpec, stderr io.Writer) *wrapFlags {
	d := workerwrap.NewOptions()
	fs := c.fs
	w := &wrapFlags{fs: fs, stderr: stderr}
	defString(fs, &w.proxy, "proxy", d.Proxy, "")
	defString(fs, &w.tokenEnv, "token-env", d.TokenEnv, "")
	defBool(fs, &w.embedToken, "embed-token", "")
	defBool(fs, &w.allowWeakToken, "allow-weak-token", "the token baked into the wrapper")
	defString(fs, &w.partitions, "partitions", "", "")
	defString(fs, &w.stages, "stages", "", "")
	defFloat(fs, &w.sampleRate, "sample-rate", d.SampleRate, "")
	defDuration(fs, &w.connectTimeout, "connect-timeout", d.ConnectTimeout, "")
	defDuration(fs, &w.handshakeTimeout, "handshake-timeout", d.HandshakeTimeout, "")
	defBool(fs, &w.wait, "wait", "")
	defBool(fs, &w.postMortem, "post-mortem", "")
	defDuration(fs, &w.lease, "lease", d.Lease, "")
	defDuration(fs, &w.proxyBackoff, "proxy-backoff", d.ProxyBackoff, "")
	defKind(fs, &w.ide, "the wrapper loads the matching debugger")
	w.shipDebugger = workerwrap.ShipAuto
	fs.Var((*shipValue)(&w.shipDebugger), "ship-debugger", usageOf("ship-debugger", ""))
	// The same flag, and the same meaning, as doctor's and pycharm's: the
	// build of the user's PyCharm. Here it says which pydevd-pycharm the
	// job ships; without it a PyCharm job ships none, as there is no one
	// release that matches every PyCharm.
	defString(fs, &w.pycharmBuild, "pycharm-build", "", "with --ide-kind pycharm the job ships that build's pydevd-pycharm (pure Python, fetched once with pip into sparkdap's cache), which workers use as --ship-debugger says")
	// Until this release --ide was the kind here; everywhere else it is
	// the IDE address. A kind is never HOST:PORT, so the old spelling
	// stays unambiguous for its last release.
	c.deprecate("ide", "--ide-kind dap|pycharm", (*kindValue)(&w.ide), stderr)
	return w
}

// options turns the parsed flags into validated wrapper options.
func (w *wrapFlags) options() (workerwrap.Options, error) {
	o := workerwrap.NewOptions()
	o.Proxy = w.proxy
	o.TokenEnv = w.tokenEnv
	o.SampleRate = w.sampleRate
	o.ConnectTimeout = w.connectTimeout
	o.HandshakeTimeout = w.handshakeTimeout
	o.Wait = w.wait
	o.PostMortem = w.postMortem
	o.Lease = w.lease
	o.ProxyBackoff = w.proxyBackoff
	o.IDE = w.ide
	var err error
	if o.Partitions, err = workerwrap.ParseIDs(w.partitions); err != nil {
		return o, flagError("partitions", err)
	}
	if o.Stages, err = workerwrap.ParseIDs(w.stages); err != nil {
		return o, flagError("stages", err)
	}
	if w.embedToken {
		o.Token = os.Getenv(w.tokenEnv)
		if o.Token == "" {
			return o, fmt.Errorf("--embed-token: $%s is empty or unset", w.tokenEnv)
		}
		if err := w.checkBakedToken(o.Token); err != nil {
			return o, err
		}
	}
	if err := o.Validate(); err != nil {
		return o, withWrapFlagNames(err)
	}
	return o, nil
}

// checkBakedToken refuses to bake a weak token from $--token-env into the
// wrapper, as serve refuses to start with one, unless --allow-weak-token.
func (w *wrapFlags) checkBakedToken(token string) error {
	warning, err := checkToken(token, "$"+w.tokenEnv, executorTokenRisk, w.allowWeakToken)
	if warning != "" {
		fmt.Fprintln(w.stderr, warning)
	}
	return err
}

// wrapSettingFlags names the flag that sets each workerwrap.Options field.
var wrapSettingFlags = map[string]string{
	"Proxy": "proxy", "IDE": "ide-kind", "TokenEnv": "token-env", "Token": "embed-token",
	"Partitions": "partitions", "Stages": "stages", "SampleRate": "sample-rate",
	"ConnectTimeout": "connect-timeout", "HandshakeTimeout": "handshake-timeout", "Lease": "lease",
	"ProxyBackoff": "proxy-backoff", "ShipDebugger": "ship-debugger",
}

// withWrapFlagNames rewrites workerwrap's setting errors to name the flags
// the user typed; other errors pass unchanged.
func withWrapFlagNames(err error) error {
	var list []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		list = joined.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var se *workerwrap.SettingError
		if errors.As(e, &se) && wrapSettingFlags[se.Setting] != "" {
			msg := se.Problem
			if se.Value != "" {
				msg = se.Value + ": " + msg
			}
			e = flagError(wrapSettingFlags[se.Setting], &flagValueError{msg: msg, err: se})
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// flagValueError is a setting error re-worded for a flag; errors.As still
// finds the library's error under it.
type flagValueError struct {
	msg string
	err error
}

func (e *flagValueError) Error() string { return e.msg }
func (e *flagValueError) Unwrap() error { return e.err }

// envOverrides maps the flags given explicitly on the command line to the
// executor environment variables that override a wrapper's baked-in values.
func (w *wrapFlags) envOverrides() [][2]string {
	var env [][2]string
	w.fs.Visit(func(f *flag.Flag) {
		var name string
		switch f.Name {
		case "proxy":
			name = "SPARKDAP_PROXY"
		case "partitions":
			name = "SPARKDAP_PARTITIONS"
		case "stages":
			name = "SPARKDAP_STAGES"
		case "sample-rate":
			name = "SPARKDAP_SAMPLE_RATE"
		case "connect-timeout":
			name = "SPARKDAP_CONNECT_TIMEOUT"
		case "handshake-timeout":
			name = "SPARKDAP_HANDSHAKE_TIMEOUT"
		case "wait":
			name = "SPARKDAP_WAIT"
		case "post-mortem":
			name = "SPARKDAP_POST_MORTEM"
		case "lease":
			name = "SPARKDAP_LEASE"
		case "proxy-backoff":
			name = "SPARKDAP_PROXY_BACKOFF"
		default:
			return
		}
		value := f.Value.String()
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok {
			value = fmt.Sprintf("%g", d.Seconds())
		}
		env = append(env, [2]string{name, value})
	})
	return env
}

// leaseText says what a lease of d means for a stopped worker, for conf
// and submit to print: the one setting that decides how long a task may
// stay stopped when serve goes silent.
func leaseText(d time.Duration) string {
	if d == 0 {
		return "no lease (--lease 0): a worker stopped at a breakpoint waits for sparkdap serve " +
			"as long as the connection stays open, even if serve went silent (a closed laptop, a dropped VPN)"
	}
	return fmt.Sprintf("lease %gs (--lease): a worker stopped at a breakpoint that hears nothing from "+
		"sparkdap serve for %gs clears its breakpoints, resumes and runs on undebugged", d.Seconds(), d.Seconds())
}

// leaseGiven reports whether --lease was on the command line.
func (w *wrapFlags) leaseGiven() bool {
	given := false
	w.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "lease" })
	return given
}

// shipValue is --ship-debugger's value.
type shipValue string

func (v *shipValue) String() string { return string(*v) }
func (v *shipValue) Get() any       { return string(*v) }

func (v *shipValue) Set(s string) error {
	mode, err := workerwrap.ParseShipMode(s)
	if err != nil {
		return errors.New("want auto, always or never")
	}
	*v = shipValue(mode)
	return nil
}

// wheelSource fetches the wheel to ship into sparkdap's cache and returns
// its path there ("" and no error: nothing to ship); a variable so that
// tests need no pip.
var wheelSource = func(ctx context.Context) (string, error) {
	dir, err := workerwrap.DebuggerCacheDir()
	if err != nil {
		return "", err
	}
	return workerwrap.DebugpyWheel(ctx, "python3", dir)
}

// pycharmSource fetches the pydevd-pycharm of build into sparkdap's cache
// and returns the path of the zip to ship; a variable so that tests need
// no pip.
var pycharmSource = func(ctx context.Context, build string) (string, error) {
	dir, err := workerwrap.DebuggerCacheDir()
	if err != nil {
		return "", err
	}
	return workerwrap.PyCharmArchive(ctx, "python3", dir, build)
}

// shipped puts the debugger to ship next to the wrapper in dir, as
// --ship-debugger asks: debugpy's wheel, or with --ide-kind pycharm the
// pydevd-pycharm of --pycharm-build (none without it). With auto a
// debugger that cannot be had is a warning (the executors may have their
// own), with always an error.
func (w *wrapFlags) shipped(ctx context.Context, dir string) (workerwrap.Shipped, error) {
	mode := w.shipDebugger
	if w.pycharmBuild != "" && w.ide != ideKindPyCharm {
		return workerwrap.Shipped{}, flagError("pycharm-build", errors.New("only with --ide-kind pycharm: debugpy jobs ship debugpy"))
	}
	if mode == workerwrap.ShipNever {
		return workerwrap.Shipped{Never: true}, nil
	}
	what := "debugpy"
	var get func() (string, error)
	place := workerwrap.PlaceWheel
	if w.ide == ideKindPyCharm {
		if w.pycharmBuild == "" {
			if mode == workerwrap.ShipAlways {
				return workerwrap.Shipped{}, flagError("ship-debugger", errors.New("always: with --ide-kind pycharm, name your PyCharm's build with --pycharm-build BUILD (Help → About), whose pydevd-pycharm the job then ships"))
			}
			return workerwrap.Shipped{}, nil
		}
		build, err := doctor.ParsePyCharmBuild(w.pycharmBuild)
		if err != nil {
			return workerwrap.Shipped{}, flagError("pycharm-build", err)
		}
		what = "pydevd-pycharm"
		get = func() (string, error) { return pycharmSource(ctx, build) }
		place = workerwrap.PlacePyCharmArchive
	} else {
		get = func() (string, error) { return wheelSource(ctx) }
	}
	wheel, err := get()
	if err == nil && wheel == "" {
		return workerwrap.Shipped{}, nil
	}
	if err == nil {
		wheel, err = place(wheel, dir)
	}
	if err != nil {
		if mode == workerwrap.ShipAlways {
			return workerwrap.Shipped{}, flagError("ship-debugger", err)
		}
		fmt.Fprintf(w.stderr, "sparkdap: warning: shipping no debugger with the job (%v); workers need %s on the executors (--ship-debugger never silences this)\n", err, what)
		return workerwrap.Shipped{}, nil
	}
	return workerwrap.Shipped{Wheel: wheel, Always: mode == workerwrap.ShipAlways}, nil
}
