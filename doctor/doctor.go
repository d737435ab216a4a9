package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Config is what one doctor run checks. The caller (the CLI) fills it from
// its flags and environment; the fixes doctor prints name the CLI's flags.
type Config struct {
	IDE, Executors string // the proxy's two addresses, free or a sparkdap's
	Python         string // the executors' Python; "" chooses it as Spark does
	Java           string // "" is $JAVA_HOME/bin/java, else java from PATH
	Token          string // the running proxy's executor token, for the test connection
	IDEToken       string // the running proxy's IDE token, if it has one
	// TokenEnv and IDETokenEnv are the environment variables the CLI reads
	// the two tokens from, named in fixes.
	TokenEnv, IDETokenEnv string
	Timeout               time.Duration // bound on each check that runs something
	// Confs (KEY=VALUE) and Archives (FILE#ALIAS,...) are the job's own
	// spark-submit settings, for the executors' Python.
	Confs, Archives []string
	Gateway         *Gateway // nil: executors reach this machine directly
	// Kubernetes, if set: the executors are pods of its image, and the
	// gateway is a pod without Python, reached through a port-forward.
	Kubernetes *Kubernetes
	// PyCharmBuild, if set (as ParsePyCharmBuild returns it), is the
	// user's PyCharm: the executors load pydevd-pycharm, not debugpy, and
	// it should be that build's.
	PyCharmBuild string
	// ShipsDebugger says the job brings a debugger to the executors,
	// which the wrapper loads when theirs is missing or unusable: such an
	// installed debugger is then only a warning. doctor does not check
	// the shipped one, and its test connections use the installed one.
	ShipsDebugger bool
	// Control is the control socket of the running sparkdap serve (the
	// CLI's --control, by default derived from --ide): doctor asks it
	// which sparkdap each worker of the running job runs the wrapper of.
	// "": that check does not run.
	Control string
}

// Gateway is the SSH gateway to check, as serve's tunnel would reach it.
type Gateway struct {
	Dest          string // user@host[:port], as given
	IdentityFiles []string
	KnownHosts    string
	Timeout       time.Duration // the SSH dial's
	// RemoteListen is where executors connect on the gateway (serve's
	// tunnel listens there); RemotePython, a Python with debugpy there.
	RemoteListen, RemotePython string
	// RemoteListenGiven says the caller's user chose RemoteListen; else it
	// is the caller's default, which need not be the running serve's, so
	// fixes do not offer it as the user's address.
	RemoteListenGiven bool
	// Explain, if set, names the caller's setting behind an error from
	// parsing Dest or dialing the gateway.
	Explain func(error) error
}

// Run runs every check, in order, printing a verdict line each (and the
// fix for a FAIL or WARN) to out, then a summary. Its error says how many
// checks failed; none fail for a nil error.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	d := &doctor{f: cfg, out: out}
	return d.run(ctx)
}

// doctor runs the checks of one doctor command, in order, on one goroutine.
type doctor struct {
	f       Config
	out     io.Writer
	results []checkResult

	// What earlier checks found, for later ones.
	ideState, exeState portState
	py                 string
	pyOK               bool
	pyPacked           bool        // py was unpacked from the job's --archives
	gateway            *ssh.Client // closed by run
	cleanup            []func()    // run by run when the checks are done (unpacked archives)
}

// doctorCheck is one row of doctor's table. run reports one or more
// verdicts through d.report, and may leave what it found in d for the
// checks after it.
type doctorCheck struct {
	name string
	run  func(ctx context.Context, d *doctor)
}

// doctorChecks is every check, in the order they run and print: the
// local parts first, then the test connections that need them.
var doctorChecks = []doctorCheck{
	{"IDE port", func(ctx context.Context, d *doctor) {
		d.ideState = d.checkPort(ctx, "IDE port", d.f.IDE, "--ide", d.probeIDE)
	}},
	{"executor port", func(ctx context.Context, d *doctor) {
		d.exeState = d.checkPort(ctx, "executor port", d.f.Executors, "--executors", probeExecutorPort)
	}},
	{"PyCharm build", func(ctx context.Context, d *doctor) {
		if d.pycharm() {
			d.checkPyCharmBuild()
		}
	}},
	{"Python", func(ctx context.Context, d *doctor) { d.py, d.pyOK = d.checkPython(ctx) }},
	{"Spark", func(ctx context.Context, d *doctor) {
		if !d.pyOK {
			d.report(checkResult{name: "Spark version", v: vSkip, detail: "needs a working Python (see above)"})
			return
		}
		d.checkSpark(ctx, d.py)
	}},
	{"Java", func(ctx context.Context, d *doctor) { d.checkJava(ctx) }},
	{"SSH gateway", func(ctx context.Context, d *doctor) { d.gateway = d.checkSSH(ctx) }},
	{"executors' Python on the gateway", func(ctx context.Context, d *doctor) {
		switch {
		case d.f.Kubernetes != nil:
			d.checkImage(ctx)
		case d.gateway != nil:
			d.checkGatewayPython(ctx, d.gateway)
		}
	}},
	{"test connection", func(ctx context.Context, d *doctor) {
		if d.pycharm() {
			d.report(checkResult{name: "test connection", v: vSkip, detail: notWithPyCharm})
			return
		}
		d.checkTestConnection(ctx, d.py, d.pyOK, d.ideState, d.exeState)
	}},
	{"test connection through the gateway", func(ctx context.Context, d *doctor) {
		switch {
		case d.gateway != nil && d.pycharm():
			d.report(checkResult{name: "test connection through the gateway", v: vSkip, detail: notWithPyCharm})
		case d.gateway != nil && d.f.Kubernetes != nil:
			d.report(checkResult{name: "test connection through the gateway", v: vSkip,
				detail: "not checked: a test worker runs where executors run, and neither the gateway pod (no Python) nor this machine is one; " +
					"executors reach the agent through the gateway's Service (kubectl get endpoints shows whether it has the pod)"})
		case d.gateway != nil:
			d.checkTunnelConnection(ctx, d.gateway, d.ideState)
		}
	}},
	{wrapperCheckName, func(ctx context.Context, d *doctor) {
		if d.f.Control != "" {
			d.checkWrapperVersion(ctx)
		}
	}},
}

// notWithPyCharm is why the test connections do not run for PyCharm: the
// test worker connects with debugpy, and a PyCharm proxy has no DAP
// port to list it on.
const notWithPyCharm = "not run with --pycharm-build: the test worker connects with debugpy and must be listed on a DAP IDE port, and a proxy serving PyCharm has none"

func (d *doctor) report(r checkResult) {
	d.results = append(d.results, r)
	fmt.Fprintf(d.out, "%-4s  %s: %s\n", r.v, r.name, r.detail)
	if r.fix != "" {
		for _, l := range strings.Split(r.fix, "\n") {
			fmt.Fprintf(d.out, "      fix: %s\n", l)
		}
	}
}

func (d *doctor) run(ctx context.Context) error {
	defer func() {
		if d.gateway != nil {
			d.gateway.Close()
		}
		for _, f := range d.cleanup {
			f()
		}
	}()
	for _, c := range doctorChecks {
		c.run(ctx, d)
	}
	failed := 0
	for _, r := range d.results {
		if r.v == vFail {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(d.out, "\n%d of %d checks failed\n", failed, len(d.results))
		return fmt.Errorf("%d check(s) failed", failed)
	}
	warned := 0
	for _, r := range d.results {
		if r.v == vWarn {
			warned++
		}
	}
	if warned > 0 {
		fmt.Fprintf(d.out, "\nall checks passed, %d with a warning (see WARN above: something may not be checked)\n", warned)
		return nil
	}
	fmt.Fprintf(d.out, "\nall checks passed\n")
	return nil
}
