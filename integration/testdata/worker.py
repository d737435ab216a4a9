"""A stand-in for a Spark executor's Python worker under sparkdap.

It attaches to sparkdap's executor port the way the generated worker
wrapper does (debugpy.connect with an access token), then runs compute() a
bounded number of times. Each process computes values of its own
(worker_id * 1000 + i), so a test can tell processes apart in the debugger.

Lines on stdout, for the test to read:
  STARTED <worker_id> <pid>         before connecting
  CONNECTED <worker_id> <pid>       debugpy.connect returned (handshake done)
  RESULT <worker_id> <pid> <total>  at the end; the process then exits 0
"""
import argparse
import os
import sys
import time


def compute(worker_id, i):
    pid = os.getpid()
    value = worker_id * 1000 + i
    return value + 0 * pid  # BREAKPOINT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", default=os.environ.get("SPARKDAP_TOKEN", ""))
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--gate", help="after connecting, wait for this file before computing")
    ap.add_argument("--gate-timeout", type=float, default=60)
    args = ap.parse_args()

    pid = os.getpid()
    print(f"STARTED {args.id} {pid}", flush=True)
    import debugpy

    debugpy.connect((args.host, args.port), access_token=args.token)
    print(f"CONNECTED {args.id} {pid}", flush=True)

    if args.gate:
        deadline = time.monotonic() + args.gate_timeout
        while not os.path.exists(args.gate):
            if time.monotonic() > deadline:
                print(f"gate {args.gate} never opened", file=sys.stderr, flush=True)
                sys.exit(3)
            time.sleep(0.02)

    total = 0
    for i in range(args.iterations):
        total += compute(args.id, i)
    print(f"RESULT {args.id} {pid} {total}", flush=True)


if __name__ == "__main__":
    main()
