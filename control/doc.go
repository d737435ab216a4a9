// Package control is the control protocol: how `sparkdap capture`,
// `select` and `workers` reach a running `sparkdap serve` to list the
// workers stopped in the debugger and capture one's call for `sparkdap
// replay`, change the selection and list every worker, and how a view
// steers one worker (continue, pause, detach) or all (continue-all),
// whichever front end serves them. A front end implements Backend
// (package dap's Hub and package pycharm's Proxy do), and Steerer for
// the operations it can do (others answer CodeUnsupported); Serve
// answers the protocol for it on the socket, Ask in process (the DAP
// front end's root session serves it that way), Call is the client's
// side. The package imports neither front end.
//
// One connection carries one request, a JSON object on one line of at most
// MaxRequestBytes with no field Request lacks, and its answer, a JSON
// object on one line; then the server closes it. The socket carries the
// user's data (a capture writes their arguments to disk) and the protocol
// has no token, so only the user may reach it: Listen makes a Unix socket
// of mode 0600 in a directory that it checks is the user's own and of mode
// 0700. Every string of an answer is cluster text or may hold some (a
// stack frame's name, an executor's error message quoted in Error), and
// the client prints them to a terminal: the answer is cleaned as a whole
// (admission.CleanAll) where Serve encodes it and again where Call decodes it,
// so neither a front end that forgot a field nor a server of another
// version gets a control character to the terminal.
package control
