"""Debuggee for the dapclient tests.

Run as "parent": listen for one DAP client on a free port, print
"LISTENING <port>", wait for the client, run compute() a few times, and
optionally ("parent spawn") run itself as a "child" subprocess, which
debugpy reports to the client as a new process. Both print "RESULT ..."
at the end so the test can check they ran to completion.
"""
import os
import subprocess
import sys

FACTOR = {"parent": 7, "child": 11}


def compute(role, i):
    value = i * FACTOR[role] + 1000
    return value  # BREAKPOINT


def main():
    role = sys.argv[1]
    if role == "parent":
        import debugpy

        _, port = debugpy.listen(("127.0.0.1", 0))
        print(f"LISTENING {port}", flush=True)
        debugpy.wait_for_client()
    total = sum(compute(role, i) for i in range(3))
    if role == "parent" and "spawn" in sys.argv[2:]:
        subprocess.run([sys.executable, os.path.abspath(__file__), "child"], check=True)
    print(f"RESULT {role} {os.getpid()} {total}", flush=True)


if __name__ == "__main__":
    main()
