// Package dap is sparkdap's Debug Adapter Protocol proxy: the front end for
// DAP clients (VS Code, nvim-dap, …). What it shares with the PyCharm front
// end lives elsewhere: the worker's hello, task label and admission in
// package admission, path mapping in package pathmap, each connection's write
// queue in internal/wirequeue.
//
// A Hub sits between one IDE (any DAP client) and many pydevd instances, one
// per Spark executor Python worker, that connect out to it with
// debugpy.connect. Each worker connection is an ExecutorSession: the Hub
// performs debugpy's adapter handshake on it by itself (pydevdAuthorize with
// the access token, pydevdSystemInfo, initialize, attach, breakpoint replay,
// configurationDone), so a worker never blocks waiting for a human. Each IDE
// connection is an IDESession: the root session sees either every executor's
// threads merged and labelled, or, when the client supports the
// startDebugging reverse request, one child IDESession per executor that
// stopped, opened at its stop and ended by the proxy once the worker runs
// another task (the IDE lists the workers that matter, not every worker
// debugged; the others' output goes to the root). All
// per-process ids (threads, frames, variable and source references,
// breakpoints) are mapped into one global space by an id table so they never
// collide, and released when what they name goes away. Breakpoints live in a
// registry that fans them out to every executor present and replays them to
// those that connect later; the IDE gets one merged answer. Stopping any
// IDE session (root or child) stops the debugging of the whole job: every
// other session is sent terminated and closed, and every executor is let
// go; only a child that says "terminateDebuggee": false detaches its
// executor alone (Hub.ideGone), and a child the proxy ended itself ends
// nothing more. While an executor has a thread stopped, the
// Hub sends it pydevdSystemInfo every Config.LeasePing: the wrapper holds
// each stop on a lease that lapses when the proxy falls silent, so a
// vanished laptop cannot hold a task forever.
//
// Messages travel as generic JSON objects rather than go-dap structs, so a
// command or field the proxy does not know is forwarded intact; go-dap types
// are used where the proxy builds or reads a message itself. Every
// connection has one writer at a time (see wire), and nothing that holds a
// lock ever waits on the network: a send under a lock at most makes one
// non-blocking write.
//
// Each of the two ports has its own budget of connections not yet admitted
// (internal/connbudget), the executor port's also per source address,
// taken as a connection is accepted and before anything is read from it:
// a peer without the token cannot starve the IDE port, nor hold more than
// its share of the executor port.
//
// The code is organized by peer, as debugpy's adapter gives each peer a
// class. An ExecutorSession is all the proxy does with one pydevd
// connection: its state, handshake and admission, its events, thread list
// and held output, and letting it go. An IDESession is all it does with one
// DAP client: its requests and their routing, the merged view, the child
// sessions it is asked to open, and its leaving. The breakpoint registry is
// what the IDE asked for and what each executor was sent and answered. The
// Hub holds them together under one lock, and the compiler checks who holds
// it: the state it guards (the Hub's, and each session's) is reachable only
// through the held value Hub.lock returns, whose methods are the operations
// that need the lock, and unlock voids it (see Hub). Around the peers: the
// allowlist of what an executor may tell the IDE, the path mapping of the
// traffic, the id table, sparkdapCapture and the Debug Console's commands,
// the Hub as the control socket's Backend (package control) and its
// Steerer, the same control operations served to the root session (the
// sparkdap request) with its sparkdapWorkers events (sparkdapWatch), a stopped
// worker's lease renewed and a forgotten stop resumed (--max-stop), the
// two listeners with their budgets, and the wire: one writer per
// connection, messages framed and encoded by internal/dapwire.
//
// Files by role. Executor: executor.go (the session, its state and life in
// the Hub), executorrequests.go (requests to pydevd), executorserve.go (its
// reader, dispatch and output pacing), executorhandshake.go, hello.go,
// executorevents.go, exceptions.go, executorrelease.go (letting it go),
// lease.go, maxstop.go. IDE: ide.go (the session), iderequests.go
// (initialize, attach, dispatch), ideroute.go (requests routed to
// executors), idemerged.go, idechildren.go (startDebugging and child
// sessions), ideleave.go. Breakpoints: breakpoints.go (the registry and
// merged answer), breakpointsfanout.go (fan-out, answers and events),
// breakpointsexecutor.go (what each executor was sent and refused).
// Control: control.go (the Backend), steer.go (continue, pause, detach
// of one worker, continue of all), view.go (the root session's sparkdap
// and sparkdapWatch requests), viewwatch.go (its sparkdapWorkers events).
package dap
