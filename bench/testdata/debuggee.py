"""Debuggee for the request-latency benchmark.

usage: debuggee.py connect HOST:PORT NODELAY   (debugpy.connect, as a worker)
       debuggee.py idle HOST:PORT NODELAY      (debugpy.connect, then run
                                                without stopping: fan-out)
       debuggee.py listen - NODELAY            (debugpy.listen: debugpy's own
                                                adapter; prints LISTENING <port>)
       debuggee.py none - 0                    (no debugger: the attach
                                                benchmark's floor)

SPARKDAP_BENCH_WRAPPER_DIR=workerwrap/python first imports the debugger the
way the worker wrapper does (remote_debug._import_debugger).
NODELAY=1 sets TCP_NODELAY on pydevd's socket the way sparkdap's worker
wrapper does (remote_debug.py, _set_nodelay); 0 leaves it as debugpy ships.
The process then stops at the line marked BREAKPOINT and stays there until the
benchmark disconnects or kills it.
"""
import os
import socket
import sys

import debugpy


def set_nodelay():
    from _pydevd_bundle.pydevd_constants import get_global_debugger

    sock = getattr(get_global_debugger(), "_client_socket", None)
    if sock is None:
        raise SystemExit("no pydevd socket to set TCP_NODELAY on")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def target(n):
    x = 41
    values = list(range(n))
    return x + len(values)  # BREAKPOINT


def never_called():
    a = 1  # FANOUT
    b = a + 1  # FANOUT
    c = b + 1  # FANOUT
    return c


def main():
    mode, addr, nodelay = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    if mode == "none":
        print("RUNNING", flush=True)
        return
    wrapper = os.environ.get("SPARKDAP_BENCH_WRAPPER_DIR")
    if wrapper:
        # What the worker wrapper does before debugpy.connect: its imports
        # (and what it changes in debugpy) from workerwrap/python.
        sys.path.insert(0, wrapper)
        import remote_debug

        remote_debug._import_debugger()
    if mode in ("connect", "idle"):
        host, port = addr.rsplit(":", 1)
        debugpy.connect((host, int(port)), access_token=os.environ.get("SPARKDAP_TOKEN"))
    else:
        _, port = debugpy.listen(("127.0.0.1", 0))
        print(f"LISTENING {port}", flush=True)
        debugpy.wait_for_client()
    if nodelay:
        set_nodelay()
    print("RUNNING", flush=True)
    if mode == "idle":
        import time

        for _ in range(6000):  # at most ten minutes
            time.sleep(0.1)
        return
    target(10)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
