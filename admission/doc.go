// Package admission is the proxy's side of what a Spark executor's Python
// worker says before its debugger connects, shared by every front end
// (package dap for DAP clients, package pycharm for PyCharm).
//
// The generated wrapper (package workerwrap) opens the executor port with a
// hello (HelloPrefix, Hello): a challenge–response in which the proxy, then
// the worker, proves it knows the token without sending it (challenge.go),
// then its pid, its task (TaskInfo) and the roots its code loads from
// (pathmap.Roots). A Registry admits it: proof, a cap on pending hellos,
// the session limit; it keeps
// each accepted hello, under a key the front end chooses or a one-time
// nonce it draws, until the worker's debugger connection claims it (with
// the hello's one-time token, where the key is no secret) or its own TTL
// timer expires it; no other connection replaces or uses it up. Label is the one task label format people see.
//
// A new front end recognises the hello (IsHello) and hands the connection
// to ServeHello, which runs the Registry's Handshake, calls the front end's
// Admit (which keeps the hello with Accept under its own key, or
// AcceptNonce), answers with Reply, and counts and logs a refusal in a
// RefusalLog (the first per source address printed, the rest summed up).
// The front end calls Claim when the debugger's connection says which
// process it is (then CheckPydevdToken, if the debugger presents an access
// token). RemoteIP is the source address every front end keys by.
//
// A worker whose debugger could not send all of a task's output before the
// task ended (the proxy frozen or too slow) says how much on a fresh
// connection to the executor port, in one line and expecting no reply:
// "SPARKDAP/2 LOST <wn> <pn> <bytes> <lines> <proof>" (loss.go; LossProof,
// ReportLoss for the worker's side). ServeHello recognises it, verifies it
// (ReadLoss: the proof, and the hello's worker remembered by its pydevd
// token among the last accepted hellos) and hands it to the front end's
// Lost once, which says LossReport.Message in serve's log and the IDE's
// console; one that does not verify is noted as a refused hello.
package admission
