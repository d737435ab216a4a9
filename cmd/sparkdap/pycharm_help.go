package main

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/sparkdap/sparkdap/doctor"
)

func init() {
	register("pycharm", "print the PyCharm run-configuration steps for debugging executors", newPyCharmHelpCmd)
}

type pycharmHelpOptions struct {
	pycharm, build, executors string
	host, port                *string // the deprecated --host and --port
}

func newPyCharmHelpCmd(stderr io.Writer) *cmdSpec {
	o := &pycharmHelpOptions{}
	c := &cmdSpec{fs: newFlagSet("pycharm", stderr)}
	fs := c.fs
	defAddr(fs, &o.pycharm, "pycharm", defaultPyCharmAddr, "as sparkdap serve reaches it")
	defString(fs, &o.build, "pycharm-build", "", "the steps install that pydevd-pycharm")
	defAddr(fs, &o.executors, "executors", defaultExecutorAddr, "")
	c.deprecate("host", "--pycharm HOST:PORT", funcValue{set: func(v string) error { o.host = &v; return nil }}, stderr)
	c.deprecate("port", "--pycharm HOST:PORT", funcValue{set: func(v string) error { o.port = &v; return nil }}, stderr)
	c.deprecate("build", "--pycharm-build BUILD", funcValue{set: func(v string) error { o.build = v; return nil }}, stderr)
	c.usage(stderr, `usage: sparkdap pycharm [--pycharm 127.0.0.1:12345] [--pycharm-build BUILD] [--executors HOST:PORT]

Prints the steps to debug Spark executors from PyCharm's "Python Debug
Server" through 'sparkdap serve --ide-kind pycharm'. Writes nothing.

Examples:
  sparkdap pycharm
  sparkdap pycharm --pycharm 127.0.0.1:5005 --pycharm-build 253.33813.30

Flags:
`)
	c.run = func(args []string, stdout, _ io.Writer) error { return pycharmHelpRun(o, args, stdout) }
	return c
}

func pycharmHelpRun(o *pycharmHelpOptions, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (pycharm takes only flags)", args)
	}
	host, portStr, err := net.SplitHostPort(o.pycharm)
	if err != nil {
		return flagError("pycharm", err)
	}
	portFlag := "--pycharm " + o.pycharm + ": port"
	if o.host != nil {
		host = *o.host
	}
	if o.port != nil {
		portStr, portFlag = *o.port, "--port"
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("%s %s: want 1..65535", portFlag, portStr)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	build, untested := "<build>", ""
	if o.build != "" {
		if build, err = doctor.ParsePyCharmBuild(o.build); err != nil {
			return flagError("pycharm-build", err)
		}
		untested = untestedBuildNote(build)
	}
	_, err = fmt.Fprintf(stdout, `PyCharm (Professional) debugs Spark executors through sparkdap like this:
%[7]s
1. Run → Edit Configurations… → + → Python Debug Server.
     Name:           sparkdap: Spark workers
     IDE host name:  %[1]s
     Port:           %[2]d
     Path mappings:  leave empty — sparkdap maps executor paths to the files
                     under 'sparkdap serve --root' (default: the current directory).
   Untick "Suspend after connect" (only the breakpoints you set should stop a task).

2. Start that configuration with Debug (the bug icon). PyCharm now waits for
   a connection on %[3]s.

3. On the executors, install the debugger that matches your PyCharm build
   (Help → About shows it), in the Python that Spark runs (PYSPARK_PYTHON):
     pip install 'pydevd-pycharm~=%[4]s'

4. Start the proxy, pointing it at PyCharm:
     export SPARKDAP_TOKEN=$(openssl rand -hex 16)
     sparkdap serve --ide-kind pycharm --pycharm %[3]s --executors %[5]s --root .

5. Run the job with the worker wrapper, e.g. debugging partition 0 only:
     sparkdap submit --ide-kind pycharm --partitions 0 -- --master 'local[2]' app.py%[6]s
   Each selected task appears in PyCharm's Threads & Variables view, its
   threads prefixed with the executor's label (exec · host · pid · partition · stage).

Check the set-up (the executors' pydevd-pycharm among it) with:
  sparkdap doctor --executors %[5]s --pycharm-build %[4]s
`, host, port, addr, build, o.executors, wrapperNote(), untested)
	return err
}

// untestedBuildNote says, for a PyCharm build outside the ones sparkdap
// is tested with, what the wrapper will do with its pydevd-pycharm, so
// the steps after it are not taken for a promise.
func untestedBuildNote(build string) string {
	r := doctor.SupportedDebuggers["pydevd-pycharm"]
	if r.Contains(build) {
		return ""
	}
	return fmt.Sprintf(`
PyCharm build %[1]s is untested: sparkdap supports %[2]s.
The worker wrapper debugs with its pydevd-pycharm if that has every pydevd
internal the wrapper uses; if one is missing, each worker runs undebugged
and names what is missing in one line of its log. After step 3, see which:
  sparkdap doctor --pycharm-build %[1]s
`, build, r.Words)
}

// wrapperNote says so when this build's wrapper has no PyCharm flavour yet
// (the --ide-kind wrap flag), instead of printing a command that fails.
func wrapperNote() string {
	if newSubmitCmd(nil, io.Discard).fs.Lookup("ide-kind") != nil {
		return ""
	}
	return "\n   (this sparkdap's wrapper has no --ide-kind flag yet: the pydevd-pycharm flavour\n   of remote_debug.py is not in this build)"
}
