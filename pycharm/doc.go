// Package pycharm presents Spark executors to PyCharm's "Python Debug
// Server" as one pydevd debuggee.
//
// PyCharm does not speak DAP to its debuggees: pydevd_pycharm.settrace
// connects to PyCharm with pydevd's own line protocol (CMD_ID\tSEQ\tPAYLOAD\n,
// payloads URL-quoted by pydevd, thread and frame state as XML), and PyCharm's
// server side serves one connection at a time (PyRemoteDebugProcess builds a
// single-connection RemoteDebugger over ServerModeDebuggerTransport, which
// accepts once; its multi-process debugger is used only for processes PyCharm
// launches itself). So the proxy holds one connection to PyCharm and
// multiplexes every selected executor behind it. Executors connect to the
// proxy's executor port with the same hello the DAP flavour uses (package
// worker: token, session limit, task label, code roots) and then with
// pydevd. The hello's
// reply carries a one-time random nonce ("SPARKDAP/2 OK <nonce>"); the
// wrapper names its connect-guard thread, alive while pydevd connects,
// "sparkdap-connect-guard <nonce>", and the proxy asks each new pydevd
// connection for its threads: the guard's name ties the connection to its
// hello (pid and address alone would not: every process on the worker's
// host has its address), and its thread id gives the pid. Pending hellos live in a
// admission.Registry, keyed by nonce: they expire on their own timers and are
// capped. Connections not yet joined hold a place in a budget, in total and
// per source address (internal/connbudget, as the DAP front end's executor
// port): over it, one is closed unread. Until its probe's answer ties it to
// a hello, a connection may send no more than a small budget of bytes (the
// proxy hangs up past it). Each connection's writes go through an
// internal/wirequeue.Queue:
// no goroutine per idle connection, a byte cap for a peer that stops
// reading. The package does not import dap: both front ends share only
// worker, pathmap and wirequeue.
//
// Towards PyCharm there is one handshake: PyCharm's CMD_VERSION is answered
// by the first executor's pydevd. Commands that name a thread (pydevd's ids,
// pid_<pid>_id_<n>, are unique per process) go to the executor with that
// pid; all others are broadcast, and the settings among them (version,
// breakpoints, exception breakpoints, run and the like) are recorded and
// replayed to executors that join later. Sequence numbers are translated
// both ways. Thread names get the executor's task label, announced again
// when a reused worker starts another task (PyCharm names threads only from
// CMD_THREAD_CREATE); the wrapper's own threads ("sparkdap-…") are kept from
// PyCharm and resumed if a suspend-all stopped them. Breakpoint files are
// rewritten from the developer's path to each candidate executor path
// (pathmap.Mapper.ToRemote) and frame files back (ToLocal), so PyCharm needs
// no path mappings; breakpoints lose PyCharm's function filter (a lambda
// shipped from the driver runs as <lambda>, never as the function PyCharm
// names). While a worker has a thread suspended, the proxy sends it
// CMD_LIST_THREADS every Config.LeasePing, answered and swallowed: that
// renews the lease the wrapper holds the stop on. Commands from PyCharm the
// proxy does not know pass through
// unchanged; from executors only what PyCharm needs reaches it (an
// allowlist: events about the worker's own threads, console output, answers
// to requests PyCharm waits for). Never CMD_EXIT: PyCharm drops the whole
// session, every worker's, on one. When PyCharm goes away the executors are
// let go and run on undebugged.
//
// Capture: a Debug Console line starting with "!"
// (CMD_CONSOLE_EXEC) is the proxy's own command, never pydevd's. "!capture"
// runs the shared capture package through the proxy's own
// CMD_EVALUATE_EXPRESSION requests to the stopped worker (Proxy.eval: its
// own sequence number, the answer handed to the waiting goroutine through
// request.reply, p.mu never held while waiting); the proxy also records
// the stops PyCharm is shown, for `sparkdap capture`: the Proxy is a
// control.Backend (StoppedWorkers, CaptureStopped), a worker named by its
// pid. As a control.Steerer it resumes a stopped worker, or all, as the
// MaxStop clock does (steer.go); pause and detach of one worker answer
// control.ErrUnsupported.
package pycharm
