"""A stand-in for pyspark.daemon for the attach benchmark's fork model:
one long-lived Python process that forks a worker on command, as PySpark
starts its Python workers.

usage: forkdaemon.py PRELOAD
  PRELOAD none       the daemon loads no debugger (no debugger; and
                     PySpark's documented recipe, where the worker function
                     imports the debugger)
          sparkdap   the daemon loads it as sparkdap's worker wrapper does
                     (remote_debug._preload_debugger, from
                     SPARKDAP_BENCH_WRAPPER_DIR, where the bench
                     renders the wrapper as `sparkdap wrap` does)
          debugpy    the daemon imports debugpy and debugpy.server.api
                     (which loads pydevd): a DIY recipe with its import
                     hoisted out of the worker function

It prints READY, then reads commands from stdin, one a line:
  FORK MODE ADDR   fork a worker that attaches (MODE, below) and prints
                   RUNNING <pid> once its code runs under the debugger
  KILL             kill the last worker, reap it, print KILLED
MODE: none (no debugger), sparkdap (remote_debug._import_debugger, then
debugpy.connect with the wrapper's TCP_NODELAY, as debuggee.py's sparkdap
row), connect (import debugpy; debugpy.connect), listen (import debugpy;
debugpy.listen, print LISTENING <port>, wait_for_client).
"""

import os
import signal
import socket
import sys
import time


def set_nodelay():
    from _pydevd_bundle.pydevd_constants import get_global_debugger

    sock = getattr(get_global_debugger(), "_client_socket", None)
    if sock is None:
        raise SystemExit("no pydevd socket to set TCP_NODELAY on")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def worker(mode, addr):
    """Runs in the forked child."""
    if mode == "none":
        pass
    elif mode == "sparkdap":
        import remote_debug

        debugpy = remote_debug._import_debugger()
        host, port = addr.rsplit(":", 1)
        debugpy.connect((host, int(port)), access_token=os.environ.get("SPARKDAP_TOKEN"))
        set_nodelay()
    elif mode == "connect":
        import debugpy

        host, port = addr.rsplit(":", 1)
        debugpy.connect((host, int(port)))
    elif mode == "listen":
        import debugpy

        _, port = debugpy.listen(("127.0.0.1", 0))
        print("LISTENING %d" % port, flush=True)
        debugpy.wait_for_client()
    else:
        raise SystemExit("unknown mode %r" % mode)
    print("RUNNING %d" % os.getpid(), flush=True)
    for _ in range(6000):  # at most ten minutes
        time.sleep(0.1)


def preload(kind):
    if kind == "sparkdap":
        # The wrapper as `sparkdap wrap` renders it (the bench writes it
        # there), its settings baked in its header.
        sys.path.insert(0, os.environ["SPARKDAP_BENCH_WRAPPER_DIR"])
        import remote_debug

        if not remote_debug._preload_debugger():
            raise SystemExit("remote_debug._preload_debugger did not load the debugger")
    elif kind == "debugpy":
        import debugpy
        import debugpy.server.api  # noqa: F401
    elif kind != "none":
        raise SystemExit("unknown preload %r" % kind)


def main():
    preload(sys.argv[1])
    print("READY", flush=True)
    child = None
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        words = line.decode().split()
        if words[0] == "FORK":
            pid = os.fork()
            if pid == 0:
                try:
                    worker(words[1], words[2])
                finally:
                    os._exit(0)
            child = pid
        elif words[0] == "KILL":
            if child is not None:
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(child, 0)
                child = None
            print("KILLED", flush=True)
    if child is not None:
        os.kill(child, signal.SIGKILL)


if __name__ == "__main__":
    main()
