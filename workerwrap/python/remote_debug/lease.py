"""The lease on stops: a worker stopped at a breakpoint lets go when the proxy
is silent for the lease."""

from .state import _describe, _say, _st
from .backoff import _proxy_silent
from .pydevd_compat import (
    _around_stops,
    _global_debugger,
    _hide_from_pydevd,
    _let_go,
    _reader_socket,
    _stop_tracing_here,
    _swap_reader_socket,
)


#
# A worker stopped at a breakpoint waits for the IDE, through the proxy, as
# long as it takes. A proxy that vanishes without closing the connection (a
# closed laptop lid, a dropped VPN, a firewall that starts dropping packets,
# `serve` stopped with SIGSTOP) sends no FIN and no RST: pydevd would wait
# forever and the task hold its executor slot. So every stop is held on a
# lease. While a thread of this worker is stopped, the proxy sends pydevd a
# request without side effects every 2 s (pydevdSystemInfo; with PyCharm,
# CMD_LIST_THREADS), which pydevd's reader thread takes off the socket
# however long the stop and whatever the IDE does. The wrapper counts the
# reads that brought bytes (_HeardSocket), and a guard thread, asleep while
# no thread is stopped, looks at that count every tick while one is. When
# nothing came for the lease, it lets the worker go: breakpoints cleared,
# every stopped thread resumed, the connection shut down and pydevd disposed
# (what the proxy's closing the connection would do), one line on stderr.
# The worker then runs on undebugged and never connects again, and the
# executor's other workers skip the silent proxy for a while (backoff.py).


class _Lease:
    """A worker's lease on its stops, apart from pydevd and from real time
    so that it can be tested with a fake clock.

    The lease runs from the start of a stop (the first thread stopping
    while none was) and from each read that brought the proxy's bytes; it
    lapses when `seconds` pass without one while a thread is stopped.

    Threads: heard is written by pydevd's reader thread alone (hear), an int
    the guard only compares, so a received message takes no lock. _lock
    guards the rest; stopping threads (enter, leave) and the guard (due,
    wait_for_stop) take it briefly, and nothing is called under it."""

    def __init__(self, seconds, clock=None, tick=None):
        import threading
        import time

        self.seconds = seconds
        self.clock = clock or time.monotonic
        # How often the guard looks while a thread is stopped.
        self.tick = tick if tick is not None else min(1.0, seconds / 10.0)
        self.heard = 0  # reads of the proxy's bytes so far
        self.suspended = 0  # threads inside pydevd's do_wait_suspend
        self.lapsed = False
        self.closed = False
        self._since = 0.0  # when the proxy was last heard, or the stop began
        self._seen = 0  # heard, as of _since
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)

    def hear(self):
        """pydevd's reader received bytes from the proxy."""
        self.heard += 1

    def enter(self):
        """A thread stops."""
        with self._lock:
            self.suspended += 1
            if self.suspended == 1:
                self._since = self.clock()
                self._seen = self.heard
                self._wake.notify_all()

    def leave(self):
        """A stopped thread runs again."""
        with self._lock:
            self.suspended -= 1

    def due(self):
        """Whether the lease lapsed now: a thread is stopped and the proxy
        was not heard for `seconds`. True once; the lease is over then."""
        with self._lock:
            if self.lapsed or self.closed or self.suspended <= 0:
                return False
            now = self.clock()
            if self.heard != self._seen:
                self._seen = self.heard
                self._since = now
                return False
            if now - self._since < self.seconds:
                return False
            self.lapsed = True
            return True

    def wait_for_stop(self):
        """Blocks while no thread is stopped. False once the lease is over."""
        with self._lock:
            while self.suspended <= 0 and not self.closed and not self.lapsed:
                self._wake.wait()
            return not self.closed and not self.lapsed

    def close(self):
        with self._lock:
            self.closed = True
            self._wake.notify_all()

    def run(self, expire, sleep):
        """The guard's loop: asleep while no thread is stopped, a look every
        tick while one is; calls expire once, when the lease lapses."""
        while self.wait_for_stop():
            sleep(self.tick)
            if self.due():
                expire()
                return


class _HeardSocket:
    """pydevd's reader's socket, telling the lease of each read that
    brought bytes. Only the reader thread reads it; the writer has the
    socket itself."""

    def __init__(self, sock, lease):
        self._sock = sock
        self._lease = lease

    def recv(self, *args):
        data = self._sock.recv(*args)
        if data:
            self._lease.hear()
        return data

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _hold_stops_on_lease(cfg):
    """Puts this worker's stops on the lease (cfg["lease"] seconds; 0 for
    none), once connected. Never raises: without it, the worker debugs as
    before and says so."""
    seconds = cfg.get("lease") or 0
    if seconds <= 0:
        return None
    try:
        import threading
        import time

        pydb = _global_debugger()
        sock = _reader_socket(pydb)
        lease = _Lease(seconds)

        def left():
            lease.leave()
            if lease.lapsed:
                _stop_tracing_here()

        def expire():
            _lease_lapsed(pydb, sock, seconds, cfg)

        guard = threading.Thread(target=lease.run, args=(expire, time.sleep), name="sparkdap-lease")
        guard.daemon = True
        _hide_from_pydevd(guard)
        _around_stops(pydb, before=lease.enter, after=left)
        _swap_reader_socket(pydb, _HeardSocket(sock, lease))
        guard.start()
        return lease
    except Exception as exc:
        _say(
            "no lease on stops (%s): a stopped task waits for the proxy as long as it is away"
            % (_describe(exc),)
        )
        return None


def _lease_lapsed(pydb, sock, seconds, cfg=None):
    """The guard's action when the lease lapses: let the worker go, never
    to connect again, tell the executor's other workers (cfg's backoff),
    and say why in one line."""
    _st().debugger = "failed"
    # Said before letting go: the resumed task may end the process at once,
    # and this runs on a daemon thread, which would die with the line unsaid.
    skip = _proxy_silent(cfg) if cfg is not None else ""
    _say(
        "no word from the proxy for %gs while stopped at a breakpoint (--lease); "
        "breakpoints cleared, the task resumes and runs on undebugged%s" % (seconds, skip)
    )
    _let_go(pydb, sock)
