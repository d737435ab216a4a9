"""A Spark executor's Python worker minus Spark, for integration/matrix_test.go:
the generated wrapper (argv --wrapper, from `sparkdap wrap`) attaches this
process as a selected task would, with whichever debugger is first on
PYTHONPATH, then compute() runs a bounded number of times.

Lines on stdout, for the test to read:
  LOADED <module> <version> <file>  the debugger the wrapper attached with
  DEBUGGER <state>                  the wrapper's verdict ("connected")
  RESULT <worker_id> <pid> <total>  at the end; the process then exits 0
"""

import argparse
import os
import sys


def compute(worker_id, i):
    value = worker_id * 1000 + i
    return value  # BREAKPOINT: matrix-compute


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wrapper", required=True)
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--iterations", type=int, default=3)
    args = ap.parse_args()

    sys.path.insert(0, args.wrapper)
    import remote_debug

    cfg = remote_debug._config()
    task = {"stageId": 1, "partitionId": args.id, "attemptNumber": 0, "taskAttemptId": args.id}
    remote_debug._connect(cfg, task)
    for name in ("pydevd_pycharm", "debugpy"):
        mod = sys.modules.get(name)
        if mod is not None:
            print("LOADED", name, mod.__version__, os.path.realpath(mod.__file__), flush=True)
            break
    print("DEBUGGER", remote_debug._st().debugger, flush=True)

    total = 0
    for i in range(args.iterations):
        total += compute(args.id, i)
    print("RESULT", args.id, os.getpid(), total, flush=True)


if __name__ == "__main__":
    main()
