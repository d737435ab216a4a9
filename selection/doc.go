// Package selection is which tasks the proxy's workers debug, changed while
// the job runs, and what the proxy knows of every worker: shared by both
// front ends (package dap, package pycharm), served to `sparkdap select`
// and `sparkdap workers` through package control.
//
// Each Python worker process of a job opens one watch connection to the
// executor port when it starts its first task, with a hello whose
// description says "watch" (admission.Hello.Watch). It is held open for the
// worker's life and carries lines only:
//
//	proxy → worker:  SPARKDAP/2 SELECT <Selection as JSON, or null>\n
//	worker → proxy:  SPARKDAP/2 TASK {"stageId":…,"partitionId":…,"attemptNumber":…,"taskAttemptId":…,"selected":…}\n
//	worker → proxy:  SPARKDAP/2 IDLE\n
//
// The proxy sends the current selection right after the hello's OK and
// again on every change (null: the selection the job was submitted with).
// The worker keeps the last one and decides at each task start from that
// copy, with no round trip; it reports the task, and its end, without
// waiting for anything. A task that is selected attaches its debugger on
// its own connection, as before. So a change reaches every worker as one
// short write, and a task that is not selected costs the worker a
// non-blocking send per task.
//
// A Board holds the selection and the workers watching it, and the last
// MaxFinished workers whose watch ended (finished.go). Its lock guards
// the selection and each watcher's task; sends to a worker happen on
// that watcher's writer goroutine, never under the lock.
package selection
