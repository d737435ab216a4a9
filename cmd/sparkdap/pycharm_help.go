package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
)

func init() {
	register("pycharm", "print the PyCharm run-configuration steps for debugging executors", runPyCharmHelp)
}

func runPyCharmHelp(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pycharm", stderr)
	host := fs.String("host", "127.0.0.1", "host PyCharm's debug server listens on, as sparkdap serve reaches it")
	port := fs.Int("port", 12345, "port of PyCharm's Python Debug Server")
	build := fs.String("build", "<build>", "your PyCharm build (Help → About, e.g. 251.23774.444), to pin pydevd-pycharm")
	executors := fs.String("executors", "127.0.0.1:5678", "sparkdap serve's executor address")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: sparkdap pycharm [--host 127.0.0.1] [--port 12345] [--build BUILD] [--executors HOST:PORT]

Prints the steps to debug Spark executors from PyCharm's "Python Debug
Server" through 'sparkdap serve --ide-kind pycharm'. Writes nothing.

Examples:
  sparkdap pycharm
  sparkdap pycharm --port 5005 --build 251.23774.444

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (pycharm takes only flags)", fs.Args())
	}
	if *port < 1 || *port > 65535 {
		return fmt.Errorf("--port %d: want 1..65535", *port)
	}
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	_, err := fmt.Fprintf(stdout, `PyCharm (Professional) debugs Spark executors through sparkdap like this:

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
     sparkdap submit --ide pycharm --partitions 0 -- --master 'local[2]' app.py%[6]s
   Each selected task appears in PyCharm's Threads & Variables view, its
   threads prefixed with the executor's label (exec · host · pid · stage · partition).

Check the set-up with:  sparkdap doctor --executors %[5]s
`, *host, *port, addr, *build, *executors, wrapperNote())
	return err
}

// wrapperNote says so when this build's wrapper has no PyCharm flavour yet
// (the --ide wrap flag), instead of printing a command that fails.
func wrapperNote() string {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	addWrapFlags(fs)
	if fs.Lookup("ide") != nil {
		return ""
	}
	return "\n   (this sparkdap's wrapper has no --ide flag yet: the pydevd-pycharm flavour\n   of remote_debug.py is not in this build)"
}
