// Package workerwrap generates remote_debug.py, the Python daemon module that
// lets sparkdap debug PySpark code where it really runs: in the Python worker
// processes forked on the executors.
//
// Spark starts its Python daemon with `python -m <spark.python.daemon.module>`
// and forks one worker per concurrent task from it. The generated module is a
// drop-in replacement for pyspark.daemon: it wraps pyspark.daemon.worker,
// which runs in the forked child on every Spark version, and from there hooks
// the points where a worker has learned which task it runs but has not run
// user code yet (pyspark.worker.read_command, read_udfs, read_udtf). Only
// then does it decide, from partition, stage and a deterministic sample,
// whether the task is debugged. A selected task's worker connects once, with
// debugpy.connect, to the sparkdap proxy and labels itself with a custom
// "sparkdapTask" DAP event; an unselected task installs no tracing at all.
// In the daemon parent only the debugger's import runs (_preload_debugger,
// before pyspark.daemon.manager, when the wrapper is enabled and some task
// may be selected), so that a worker that attaches does not pay ~0.1 s
// (debugpy) or ~0.4 s (pydevd-pycharm) importing it; everything that starts
// threads or opens sockets (debugpy.connect, pydevd's settrace) runs in the
// worker only, because forking a process that has threads can deadlock the
// children. The tests check that the import starts no thread, opens no
// descriptor and sets no trace; if it fails, one line says so and workers
// import the debugger themselves. After the import the daemon freezes its
// objects (gc.freeze), so that the garbage collections of workers nobody
// debugs do not walk the debugger's objects and copy the daemon's pages.
//
// The executors need no debugger installed: the job ships debugpy's
// pure-Python wheel next to the wrapper (shipdebugger.go: one release,
// ShippedDebugpyVersion, whose wheel runs on every Python from 3.8;
// fetched once with pip into a private cache and checked against PyPI's
// digest; JobSettings lists it in spark.submit.pyFiles). When the
// executors' Python has no debugpy, or one the wrapper calls unusable, the
// daemon unpacks the wheel before it forks (python/remote_debug/shipped.py)
// into a private directory it removes as it exits, forgets the unusable
// copy, and imports debugpy from there; workers inherit it.
//
// Debugging is strictly best effort. A missing debugpy, an unreachable proxy,
// a wrong token or a proxy that never finishes the handshake costs at most the
// configured timeouts, prints one "sparkdap:" line on the worker's stderr and
// lets the task run undebugged. A worker that found the proxy silent (a
// timeout, a lapsed lease) makes the other workers of its executor skip it
// for Options.ProxyBackoff, through a marker file in a private directory
// the daemon makes before it forks them, so that each new worker process
// does not pay the timeouts again. The executor environment can override every
// baked-in option (SPARKDAP_* variables, listed in the generated file and in
// EnvVars), so one wrapper can be retargeted without rebuilding the job.
//
// Every stop is held on a lease (Options.Lease, `--lease`), because a proxy
// that vanishes without closing the connection (SIGSTOP, a closed laptop, a
// firewall dropping packets) gives pydevd nothing to notice, and a stopped
// task would hold its executor slot forever. DAP has no ping and the
// wrapper cannot add a message pydevd would read, so the proxy renews the
// lease every 2 s while a worker is stopped with a request pydevd answers
// on its reader thread without side effects (pydevdSystemInfo;
// CMD_LIST_THREADS with PyCharm). The wrapper does not parse anything: it
// swaps pydevd's reader socket for one that counts the reads that brought
// bytes, and wraps PyDB.do_wait_suspend, which every tracer of both
// debuggers calls as an attribute (settrace, Cython, sys.monitoring on 3.12
// and later), to know when a thread is stopped. A guard thread, hidden from
// pydevd and asleep on a condition while nothing is stopped (so a running
// task pays nothing), looks once a second while something is; when the
// proxy was silent for the lease it clears the breakpoints, shuts the
// connection down for reading, disposes pydevd and resumes every stopped
// thread, and says so in one line. A side channel of its own would have
// needed a second connection per worker through every tunnel, and would
// prove less: the renewal travels on pydevd's own connection, so it proves
// exactly the path the IDE's commands take.
//
// The module's source is a Python package, python/remote_debug, split by
// role (settings, hello, attach, lease, output batching, hooks, ...) with
// every use of pydevd's and debugpy's private internals in one module,
// pydevd_compat, which knows the debugger versions it was written for and
// leaves a worker undebugged on any other. The package has unit tests of its
// own (python/tests, pytest), linted by the repository's ruff.toml. Spark
// imports the daemon module before --py-files reach sys.path, so executors
// must get one file: Render writes a short settings header
// (template/header.py.tmpl: the _BAKED dict and the documentation of the
// variables) followed by the package's modules concatenated without their
// relative imports (module.go; the package's __init__.py states the rules
// that keep the one file equivalent, and a test checks them). The output is
// one self-contained file, as before; the PyCharm flavour is a runtime
// check of the baked "ide" setting. The Go and Python parsers of the same
// settings are tested against one table, testdata/settings_cases.json.
package workerwrap
