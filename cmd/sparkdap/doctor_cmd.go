package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/doctor"
	"github.com/sparkdap/sparkdap/workerwrap"
)

func init() {
	register("doctor", "check ports, Python, the executors' debugger, Spark, Java, the SSH gateway, a test connection and the running job's wrapper", newDoctorCmd)
}

// doctorFlags are doctor's options. The SSH ones are serve's (sshFlags),
// with the same defaults, so a serve command line's flags check the same
// gateway.
type doctorFlags struct {
	sshFlags
	ide, executors  string
	python, java    string
	token, ideToken string
	remotePython    string
	image, ns       string
	timeout         time.Duration
	// The job's own spark-submit settings, for the executors' Python.
	confs, archives stringList
	// remoteListenGiven: --remote-listen is on the command line, not the default.
	remoteListenGiven bool
	pycharmBuild      string
	// shipDebugger is the job's --ship-debugger (auto by default, as in
	// submit, conf and wrap): unless never, the job brings debugpy for
	// executors whose own is missing or unusable.
	shipDebugger string
	// control is the running serve's control socket; "": derived from
	// ide, as capture, select and workers derive it.
	control string
}

func newDoctorCmd(stderr io.Writer) *cmdSpec {
	f := &doctorFlags{}
	c := &cmdSpec{fs: newFlagSet("doctor", stderr)}
	fs := c.fs
	defAddr(fs, &f.ide, "ide", defaultIDEAddr, "doctor checks it is free or a sparkdap's")
	defAddr(fs, &f.executors, "executors", defaultExecutorAddr, "doctor checks it is free or a sparkdap's")
	defString(fs, &f.control, "control", "", "doctor asks the serve there which sparkdap the running job's wrappers come from")
	defString(fs, &f.python, "python", "", "the one the Spark workers run (default $PYSPARK_PYTHON, else python3)")
	defList(fs, &f.confs, "conf", doctor.ConfPySparkPython+" chooses the executors' Python")
	fs.Var(&f.archives, "archives", "the job's spark-submit --archives (FILE#ALIAS,...): an executors' Python inside one is unpacked here and checked (repeatable)")
	fs.StringVar(&f.java, "java", "", "the java Spark runs (default $JAVA_HOME/bin/java, else java)")
	defString(fs, &f.token, "token", "", "the running proxy's, for the test connection")
	defString(fs, &f.ideToken, "ide-token", "", "the running proxy's, if it has one")
	bindSSHFlags(fs, &f.sshFlags, "doctor checks it", "with --ssh, the test worker on the gateway connects there")
	fs.StringVar(&f.remotePython, "remote-python", "python3", "with --ssh: the Python on the gateway for the test connection through the tunnel; without debugpy, it uses the debugger the job ships (unless --ship-debugger never)")
	fs.StringVar(&f.image, "image", "", "Kubernetes: the executors' container `image` (spark.kubernetes.container.image); doctor checks the debugger of python3 in a pod of it, instead of on the gateway")
	fs.StringVar(&f.ns, "namespace", "", "Kubernetes, with --image: the `namespace` the job's pods run in (default: kubectl's current one)")
	defString(fs, &f.pycharmBuild, "pycharm-build", "", "doctor checks the executors' pydevd-pycharm against it, instead of their debugpy")
	f.shipDebugger = workerwrap.ShipAuto
	fs.Var((*shipValue)(&f.shipDebugger), "ship-debugger", usageOf("ship-debugger",
		"doctor takes the job's: unless never, an executors' Python without a usable debugpy is only a warning"))
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "bound on each other check")
	c.usage(stderr, `usage: sparkdap doctor [--ide HOST:PORT] [--executors HOST:PORT] [--python PYTHON] [--ssh user@host] [flags]

Checks, each with a verdict (OK, WARN, FAIL with the reason and the fix):
  - the IDE and executor ports are free, or a sparkdap is already serving there
  - the debugger the executors' Python loads (debugpy; pydevd-pycharm with
    --pycharm-build), and whether the worker wrapper debugs with it: a
    supported release, an untested one it debugs with (WARN), or one that
    lacks what the wrapper needs (FAIL: the workers would run undebugged).
    The Python is --python, else the job's --conf spark.pyspark.python (an
    interpreter in the job's --archives is unpacked to a temp dir and run
    there), else $PYSPARK_PYTHON, else python3; with --ssh also on the
    gateway; on Kubernetes (--image), in a pod of the executors' image instead
  - the Spark version (pyspark, in that Python), Java
  - the SSH gateway, if --ssh is given (host key checked against known_hosts)
  - a test connection along the whole path: a throwaway Python process says
    the wrapper's hello and calls debugpy.connect, and the proxy must list it
    on its IDE port. Against the running sparkdap serve if there is one (give
    its token), else against a temporary proxy on loopback.
  - with --ssh and a running 'sparkdap serve --ssh', the same test worker
    run on the gateway (--remote-python) against --remote-listen (give
    serve's): through the tunnel to the proxy, as executors connect (not
    on Kubernetes: the gateway pod has no Python, and doctor says so). If
    that Python has no debugpy and the job ships one, the worker runs
    with it: the wheel is uploaded beside the wrapper and unpacked there
  - with --pycharm-build, whether sparkdap is tested with that PyCharm, and
    that the executors' pydevd-pycharm is its build; the test connections,
    which need debugpy and a DAP proxy, are skipped
  - the running job's wrapper: the running serve (its control socket,
    --control, by default derived from --ide) says which sparkdap release
    wrote the wrapper each of the job's workers runs; another release's
    than serve's is a WARN naming it (the fix: resubmit the job with the
    matching wrapper, or run the matching serve). No serve running: SKIP
Exits 0 only if no check fails.

Examples:
  sparkdap doctor
  SPARKDAP_TOKEN=... sparkdap doctor --ide 127.0.0.1:4711 --executors 127.0.0.1:5678
  sparkdap doctor --python /opt/venvs/spark/bin/python --ssh me@edge.example.com
  sparkdap doctor --archives pyenv.tar.gz#pyenv --conf spark.pyspark.python=./pyenv/bin/python
  SPARKDAP_TOKEN=... sparkdap doctor --ssh me@edge.example.com --remote-listen 0.0.0.0:5678
  sparkdap doctor --ssh dev@127.0.0.1:2222 --image registry.example.com/loans:1 --namespace spark
  sparkdap doctor --pycharm-build 253.33813.30 --python /opt/venvs/spark/bin/python

Flags:
`)
	c.run = func(args []string, stdout, _ io.Writer) error {
		fs.Visit(func(fl *flag.Flag) { f.remoteListenGiven = f.remoteListenGiven || fl.Name == "remote-listen" })
		return doctorRun(f, args, stdout)
	}
	return c
}

func doctorRun(f *doctorFlags, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (doctor takes only flags)", args)
	}
	if f.ns != "" && f.image == "" {
		return fmt.Errorf("--namespace: only with --image (the executors' image on Kubernetes)")
	}
	if f.pycharmBuild != "" {
		build, err := doctor.ParsePyCharmBuild(f.pycharmBuild)
		if err != nil {
			return flagError("pycharm-build", err)
		}
		f.pycharmBuild = build
	}
	if f.token == "" {
		f.token = os.Getenv(tokenEnv)
	}
	if f.ideToken == "" {
		f.ideToken = os.Getenv(ideTokenEnv)
	}
	return doctor.Run(context.Background(), f.config(), stdout)
}

// config is what the flags ask doctor to check.
func (f *doctorFlags) config() doctor.Config {
	cfg := doctor.Config{
		IDE: f.ide, Executors: f.executors,
		Python: f.python, Java: f.java,
		Token: f.token, IDEToken: f.ideToken,
		TokenEnv: tokenEnv, IDETokenEnv: ideTokenEnv,
		Timeout: f.timeout,
		Confs:   f.confs, Archives: f.archives,
		PyCharmBuild: f.pycharmBuild,
		// For PyCharm the job ships the pydevd-pycharm of the build the
		// user names, as doctor's --pycharm-build does.
		ShipsDebugger: f.shipDebugger != workerwrap.ShipNever,
		Control:       f.control,
	}
	if cfg.Control == "" {
		cfg.Control = control.PathFor(f.ide)
	}
	if f.ssh != "" {
		cfg.Gateway = &doctor.Gateway{
			Dest: f.ssh, IdentityFiles: f.identities, KnownHosts: f.knownHosts, Timeout: f.sshFlags.timeout,
			RemoteListen: f.remoteListen, RemotePython: f.remotePython, RemoteListenGiven: f.remoteListenGiven,
			Explain: sshFlagError,
		}
	}
	if f.image != "" {
		cfg.Kubernetes = &doctor.Kubernetes{Image: f.image, Namespace: f.ns}
	}
	return cfg
}
