"""Worker for the stop-storm benchmark (bench/storm.go).

usage: stormer.py HOST:PORT

It attaches to sparkdap's executor port as a worker does (debugpy.connect
with SPARKDAP_TOKEN, TCP_NODELAY on pydevd's socket as the wrapper sets it),
prints READY, and then runs hit() once for every line on stdin, printing
DONE <i> after each. The benchmark sets a breakpoint on the line marked
STORM and writes a line to every worker at once. It exits at the end of
stdin, or after ten minutes without a line.
"""
import os
import socket
import sys
import threading

import debugpy


def set_nodelay():
    from _pydevd_bundle.pydevd_constants import get_global_debugger

    sock = getattr(get_global_debugger(), "_client_socket", None)
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def hit(i):
    x = i + 1  # STORM
    return x


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    debugpy.connect((host, int(port)), access_token=os.environ.get("SPARKDAP_TOKEN"))
    set_nodelay()
    print("READY", flush=True)
    timer = threading.Timer(600, lambda: os._exit(3))
    timer.daemon = True
    timer.start()
    for i, _ in enumerate(sys.stdin):
        hit(i)
        print(f"DONE {i}", flush=True)
    timer.cancel()


if __name__ == "__main__":
    main()
