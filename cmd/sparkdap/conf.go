package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/workerwrap"
)

func init() {
	register("conf", "print the Spark settings that run a job under remote_debug.py", newConfCmd)
}

type confOptions struct {
	wrapper   string
	driverDir string
	connect   bool
	wrap      *wrapFlags
}

func newConfCmd(stderr io.Writer) *cmdSpec {
	o := &confOptions{}
	c := &cmdSpec{fs: newFlagSet("conf", stderr)}
	c.fs.StringVar(&o.wrapper, "wrapper", workerwrap.FileName, "`path` of the wrapper written by `sparkdap wrap`")
	c.fs.StringVar(&o.driverDir, "driver-dir", ".", "`directory` of the driver's script: breakpoints in it bind before a task runs its functions (what `sparkdap submit` takes from the application's path; '' for none)")
	c.fs.BoolVar(&o.connect, "connect", false, "print a script that starts a Spark Connect server whose Python workers run the wrapper (Connect clients' settings never reach them)")
	o.wrap = addWrapFlags(c, stderr)
	c.usage(stderr, `usage: sparkdap conf [--wrapper PATH] [--connect] [flags]

Prints the spark-submit options and a SparkSession.builder snippet that run
a job under a wrapper written by 'sparkdap wrap' (notebooks, schedulers).
With --connect, prints a shell script that starts a local-mode Spark Connect
server whose UDFs run under the wrapper instead: a Connect client's own
settings never reach the server's Python workers.

Examples:
  sparkdap wrap -o . && sparkdap conf --wrapper ./remote_debug.py
  sparkdap conf --wrapper ./remote_debug.py --partitions 2 --proxy 10.0.0.5:5678
  sparkdap conf --connect --wrapper ~/sparkdap/remote_debug.py --partitions 0 > connect-server.sh
  bash connect-server.sh --master 'local[2]'     # clients: SparkSession.builder.remote("sc://127.0.0.1:15002")

Flags:
`)
	c.run = func(args []string, stdout, _ io.Writer) error { return confRun(o, args, stdout) }
	return c
}

func confRun(o *confOptions, args []string, stdout io.Writer) error {
	wf := o.wrap
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (conf takes only flags)", args)
	}
	if _, err := wf.options(); err != nil {
		return err
	}
	path, err := wrapperPath(o.wrapper)
	if err != nil {
		return err
	}
	// Settings naming a wrapper that is not there would make every Python
	// worker fail to start (No module named remote_debug): refuse them.
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("--wrapper %s: %w (write it first: sparkdap wrap -o %s)", o.wrapper, err, filepath.Dir(path))
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("--wrapper %s: not a regular file", o.wrapper)
	}
	ship, err := wf.shipped(context.Background(), filepath.Dir(path))
	if err != nil {
		return err
	}
	if o.connect {
		_, err := io.WriteString(stdout, connectScript(path, wf, ship))
		return err
	}
	driverDir := ""
	if o.driverDir != "" { // '' leaves it out: functions bind once a task runs them
		if driverDir, err = filepath.Abs(o.driverDir); err != nil {
			return fmt.Errorf("--driver-dir %s: %w", o.driverDir, err)
		}
	}

	// What `sparkdap submit` sets, from the same list (the wrapper goes in
	// --py-files); then the flags given here as executor environment
	// overrides, so one generated file can be retargeted per job; then the
	// token, which submit bakes into the wrapper it generates instead.
	var (
		confs   []confOption
		pyFiles string
	)
	for _, st := range workerwrap.JobSettings(path, driverDir, ship) {
		if st.Key == "spark.submit.pyFiles" {
			pyFiles = st.Value
		} else {
			confs = append(confs, confOption{key: st.Key, value: st.Value})
		}
	}
	for _, e := range wf.envOverrides() {
		confs = append(confs, confOption{key: "spark.executorEnv." + e[0], value: e[1]})
	}
	tokenKey := "spark.executorEnv." + wf.tokenEnv
	confs = append(confs, confOption{key: tokenKey, env: wf.tokenEnv})

	var b strings.Builder
	writeSubmitOptions(&b, localShell, pyFiles, confs)
	// The lease in effect: --lease here (an executor variable above), else
	// what the wrapper file bakes.
	lease, known := wf.lease, wf.leaseGiven()
	if !known {
		lease, known = workerwrap.BakedLeaseFile(path)
	}
	if known {
		fmt.Fprintf(&b, "# %s.\n", leaseText(lease))
	} else {
		fmt.Fprintf(&b, "# The wrapper's lease (sparkdap wrap --lease) decides how long a worker stopped at a breakpoint waits for a silent sparkdap serve; --lease here overrides it.\n")
	}
	fmt.Fprintln(&b, "# spark.executorEnv.PYTHONPATH matters in local mode: shipped files are not on sys.path when the daemon starts.")
	fmt.Fprintf(&b, "# %s: where the driver's script is (--driver-dir), so its breakpoints bind before a task runs its functions.\n", workerwrap.EnvDriverDir)
	fmt.Fprintf(&b, "# With an existing --py-files, append %s to it (comma separated).\n", pyFiles)
	if ship.Wheel != "" {
		fmt.Fprintf(&b, "# %s ships with the job: workers whose Python has no usable %s use it.\n\n", filepath.Base(ship.Wheel), map[bool]string{true: "pydevd-pycharm", false: "debugpy"}[wf.ide == ideKindPyCharm])
	} else {
		fmt.Fprintf(&b, "# The Python workers need %s: set PYSPARK_PYTHON to an interpreter that has it.\n\n", map[bool]string{true: "pydevd-pycharm", false: "debugpy"}[wf.ide == ideKindPyCharm])
	}

	fmt.Fprintln(&b, "# PySpark, before the first SparkSession or SparkContext of the process.")
	fmt.Fprintln(&b, "# Not for Spark Connect (builder.remote(...), SPARK_REMOTE): the server's workers never")
	fmt.Fprintln(&b, "# see a client's settings; start the server with the script `sparkdap conf --connect` prints.")
	fmt.Fprintln(&b, "import os")
	fmt.Fprintln(&b, "from pyspark.sql import SparkSession")
	fmt.Fprintln(&b, "builder = SparkSession.builder")
	fmt.Fprintln(&b, "# Fail open: without the wrapper the job runs undebugged; with the daemon module")
	fmt.Fprintln(&b, "# set and no wrapper, every Python worker would fail to start.")
	fmt.Fprintf(&b, "if os.path.isfile(%s):\n", strconv.Quote(path))
	fmt.Fprintln(&b, "    builder = (")
	fmt.Fprintln(&b, "        builder")
	fmt.Fprintf(&b, "        .config(%s, %s)\n", strconv.Quote("spark.submit.pyFiles"), strconv.Quote(pyFiles))
	for _, c := range confs {
		if c.env != "" {
			fmt.Fprintf(&b, "        .config(%s, os.environ.get(%s, \"\"))\n", strconv.Quote(c.key), strconv.Quote(c.env))
		} else {
			fmt.Fprintf(&b, "        .config(%s, %s)\n", strconv.Quote(c.key), strconv.Quote(c.value))
		}
	}
	fmt.Fprintln(&b, "    )")
	fmt.Fprintln(&b, "spark = builder.getOrCreate()")
	_, err = io.WriteString(stdout, b.String())
	return err
}

// localShell is the shell the user pastes conf's spark-submit options and
// capture's replay command into: PowerShell on Windows, else POSIX sh.
// Tests set it to check the other one's form.
var localShell = shellquote.Local

// confOption is one --conf that conf prints: key=value, or (env set) the
// key set to that environment variable's value in the user's shell, so
// that the value (the token) is never printed.
type confOption struct{ key, value, env string }

// writeSubmitOptions writes conf's spark-submit options as words of sh,
// the user's shell, saying so when it is not POSIX.
func writeSubmitOptions(b *strings.Builder, sh shellquote.Dialect, pyFiles string, confs []confOption) {
	if sh == shellquote.POSIX {
		fmt.Fprintln(b, "# spark-submit options (put them before the application .py file):")
	} else {
		fmt.Fprintf(b, "# spark-submit options, in %s syntax (put them before the application .py file):\n", sh)
	}
	fmt.Fprintf(b, "--py-files %s\n", sh.Quote(pyFiles))
	for _, c := range confs {
		if c.env != "" {
			fmt.Fprintf(b, "--conf %s=%s\n", c.key, sh.Env(c.env))
		} else {
			fmt.Fprintf(b, "--conf %s\n", sh.Quote(c.key+"="+c.value))
		}
	}
}
