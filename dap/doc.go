// Package dap is sparkdap's Debug Adapter Protocol proxy: the front end for
// DAP clients (VS Code, nvim-dap, …). What it shares with the PyCharm front
// end lives elsewhere: the worker's hello, task label and admission in
// package worker, path mapping in package pathmap, each connection's write
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
// startDebugging reverse request, one child IDESession per executor. All
// per-process ids (threads, frames, variable and source references,
// breakpoints) are mapped into one global space by an id table so they never
// collide, and released when what they name goes away. Breakpoints live in a
// registry that fans them out to every executor present and replays them to
// those that connect later; the IDE gets one merged answer. Stopping any
// IDE session (root or child) stops the debugging of the whole job: every
// other session is sent terminated and closed, and every executor is let
// go; only a child that says "terminateDebuggee": false detaches its
// executor alone (Hub.ideGone). While an executor has a thread stopped, the
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
// Files by role: server.go (the two listeners and their budgets), hub.go (the Hub: sessions,
// announcing child sessions, stopping the job's debugging), executor.go and
// hello.go (one pydevd connection and its admission), ide.go (one IDE
// session: requests, attach, disconnect and its grace), events.go (pydevd's
// events relayed and kept for replay), heldoutput.go (a worker's output held,
// capped, until the child session that will show it is ready), allow.go (the
// allowlist of what an executor may say to the IDE), breakpoints.go and
// fanout.go (the breakpoint registry, its fan-out and merged answers, what
// "verified" may claim), refusals.go (breakpoints no executor could bind),
// release.go (letting executors go when nobody watches them), maxstop.go
// (resuming a worker stopped too long with nobody asking), lease.go
// (renewing a stopped worker's lease), threads.go
// (merged threads from what the proxy knows; continue-all and pause-all),
// capture.go (sparkdapCapture: a stopped frame's call fetched to a capture
// file), console.go (the Debug Console's !capture and !help, answered by the
// proxy), control.go (the Hub as the control socket's Backend: its stopped
// executors with their stacks, and a capture of one, for `sparkdap capture`),
// paths.go (path mapping of the traffic), ids.go and translate.go (the id
// table and where ids sit in messages), message.go and wire.go (the wire,
// framed and encoded by internal/dapwire).
package dap
