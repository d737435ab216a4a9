// Package capture takes a stopped executor call (the user function of a
// frame and the arguments it holds) to a file for `sparkdap replay`.
// It is the part both front ends share: the Python
// expressions that load capture/python/sparkdap_capture.py into the
// worker and fetch its answer in chunks, the size checks, the split of
// the executor's bytes into data (tagged JSON) and code (a pickle), and
// the capture file. Each front end supplies an Evaluator: "evaluate this
// expression in the stopped frame" over its own wire (DAP's evaluate
// request, pydevd's CMD_EVALUATE_EXPRESSION), and decides when to call
// Run — never under a lock of its own, since Run waits on several round
// trips.
//
// Files by role:
//   - capture.go: Evaluator, Run (start, chunks, drop; size cap; the
//     executor's header checked for size and depth, CheckHeader; data and
//     code apart; the file built by File and written with safefile, mode
//     0600), typed errors.
//   - console.go: the Debug Console commands (!capture, !help) both front
//     ends answer themselves, their arguments and the summary line.
//
// Nothing here unpickles: the capture's bytes come from the cluster. Only
// sparkdap_replay.py (and the modules beside it) reads them; it decodes
// the data with loaders that cannot run code, and unpickles the code only
// with --trust-captured-code (SECURITY.md). The fetch is bounded by size, chunk count and time, so
// an executor cannot keep the proxy fetching.
package capture
