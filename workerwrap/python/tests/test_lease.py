"""The lease on stops (remote_debug._Lease and what it does when it lapses),
with a fake clock: no test here waits on real time."""

import socket
import threading

import pytest


class FakeClock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run_guard(lease, clock, on_tick=None, most=10000):
    """Runs the guard's loop on this thread with the fake clock; on_tick
    runs after each tick's sleep. Returns when the lease lapsed (the time
    of expiry) or, bounded, raises."""
    expired = []
    ticks = [0]

    def sleep(seconds):
        ticks[0] += 1
        if ticks[0] > most:
            raise AssertionError("the lease never lapsed within %d ticks" % most)
        clock.sleep(seconds)
        if on_tick is not None:
            on_tick(clock.now)

    lease.run(lambda: expired.append(clock.now), sleep)
    return expired


def test_lease_lapses_after_silence(rd):
    clock = FakeClock()
    lease = rd._Lease(60.0, clock=clock, tick=1.0)
    lease.enter()
    start = clock.now
    expired = run_guard(lease, clock)
    assert expired == [start + 60.0]
    assert lease.lapsed


def test_proxy_heard_keeps_the_stop(rd):
    """A ping every 2 s holds the stop as long as it comes; once the proxy
    falls silent, the lease runs out `seconds` after the last one."""
    clock = FakeClock()
    lease = rd._Lease(10.0, clock=clock, tick=0.5)
    lease.enter()
    start = clock.now
    silent_from = start + 300.0

    def ping(now):
        if now < silent_from and (now - start) % 2.0 == 0:
            lease.hear()

    expired = run_guard(lease, clock, on_tick=ping)
    # The last ping came at silent_from - 2; the guard sees it at that tick.
    assert expired == [silent_from - 2.0 + 10.0]


def test_lease_counts_from_the_stop_not_from_older_silence(rd):
    """Silence while the worker ran does not count: the lease starts when
    a thread stops."""
    clock = FakeClock()
    lease = rd._Lease(10.0, clock=clock, tick=1.0)
    clock.now += 500.0  # the worker ran for long without a word
    assert not lease.due()
    lease.enter()
    stopped = clock.now
    assert run_guard(lease, clock) == [stopped + 10.0]


def test_no_lapse_while_nothing_is_stopped(rd):
    clock = FakeClock()
    lease = rd._Lease(10.0, clock=clock, tick=1.0)
    lease.enter()
    clock.sleep(9.0)
    lease.leave()
    clock.sleep(3600.0)
    assert not lease.due()
    # A new stop gets a whole new lease.
    lease.enter()
    clock.sleep(9.0)
    assert not lease.due()
    clock.sleep(1.0)
    assert lease.due()
    assert not lease.due(), "lapses once"


def test_nested_stops_count(rd):
    """do_wait_suspend may nest (set next statement) and several threads
    may stop: the lease holds while any is stopped."""
    clock = FakeClock()
    lease = rd._Lease(10.0, clock=clock, tick=1.0)
    lease.enter()
    lease.enter()
    lease.leave()
    clock.sleep(10.0)
    assert lease.due()


def test_guard_sleeps_while_running_and_ends_on_close(rd):
    """The guard waits on a condition while no thread is stopped (no
    ticks, nothing to cost a running task), and ends on close."""
    lease = rd._Lease(10.0, tick=1.0)
    ticks = []
    guard = threading.Thread(target=lease.run, args=(lambda: ticks.append("expired"), ticks.append))
    guard.daemon = True
    guard.start()
    lease.close()
    guard.join(10)
    assert not guard.is_alive()
    assert ticks == []


def test_default_tick(rd):
    assert rd._Lease(60.0).tick == 1.0
    assert rd._Lease(10.0).tick == 1.0
    assert rd._Lease(5.0).tick == 0.5


def test_heard_socket_counts_reads_with_bytes(rd):
    a, b = socket.socketpair()
    try:
        lease = rd._Lease(10.0)
        heard = rd._HeardSocket(a, lease)
        b.sendall(b"ping")
        assert heard.recv(16) == b"ping"
        assert lease.heard == 1
        assert heard.fileno() == a.fileno()
        b.close()
        assert heard.recv(16) == b""
        assert lease.heard == 1, "EOF is not the proxy speaking"
    finally:
        a.close()
        b.close()


class FakeInfo(object):
    def __init__(self, state):
        self.pydev_state = state
        self.pydev_step_cmd = 108
        self.pydev_original_step_cmd = 108
        self.pydev_step_stop = object()


class FakePyDB(object):
    def __init__(self):
        self.breakpoints = {"f.py": {12: object()}}
        self.file_to_id_to_line_breakpoint = {"f.py": {1: object()}}
        self.api_received_breakpoints = {("f.py", 1): object()}
        self.break_on_caught_exceptions = {"ValueError": object()}
        self.break_on_uncaught_exceptions = {"BaseException": object()}
        self.changed = []
        self.disposed = []

    def on_breakpoints_changed(self, removed=False):
        self.changed.append(removed)

    def dispose_and_kill_all_pydevd_threads(self, wait=True):
        self.disposed.append(wait)


def test_lapse_lets_the_worker_go(rd, capsys):
    """Breakpoints cleared, the stopped thread resumed, the connection shut
    down, pydevd disposed without waiting, one line on stderr, and the
    worker never attaches again."""
    st = rd._st()
    st.debugger = "connected"
    pydb = FakePyDB()
    stopped = threading.current_thread()
    info = FakeInfo(2)
    stopped.additional_info = info
    a, b = socket.socketpair()
    try:
        rd._lease_lapsed(pydb, a, 60.0)
        b.settimeout(10)
        assert b.recv(16) == b"", "the proxy's side sees the connection end"
    finally:
        del stopped.additional_info
        a.close()
        b.close()
    for table in (pydb.breakpoints, pydb.file_to_id_to_line_breakpoint, pydb.api_received_breakpoints,
                  pydb.break_on_caught_exceptions, pydb.break_on_uncaught_exceptions):
        assert table == {}
    assert pydb.changed == [True]
    assert pydb.disposed == [False]
    assert info.pydev_state == 1
    assert st.debugger == "failed"
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "no word from the proxy for 60s while stopped at a breakpoint (--lease)" in err
    assert "runs on undebugged" in err


def test_lapse_resumes_stopped_threads(rd):
    info = FakeInfo(2)
    threading.current_thread().additional_info = info
    try:
        rd._let_go(FakePyDB(), None)
    finally:
        del threading.current_thread().additional_info
    assert info.pydev_state == 1
    assert info.pydev_step_cmd == -1
    assert info.pydev_original_step_cmd == -1
    assert info.pydev_step_stop is None


@pytest.mark.parametrize(
    "text,want",
    [("60", 60.0), ("60s", 60.0), ("1.5m", 90.0), ("1h", 3600.0), ("0", 0.0), (" 10 ", 10.0), ("86400", 86400.0)],
)
def test_parse_lease(rd, text, want):
    assert rd._parse_lease("SPARKDAP_LEASE", text) == want


@pytest.mark.parametrize("text", ["9", "-1", "86401", "soon", "", "nan"])
def test_parse_lease_refuses(rd, text):
    with pytest.raises(ValueError):
        rd._parse_lease("SPARKDAP_LEASE", text)


def test_lease_from_the_environment(rd, baked, monkeypatch):
    assert rd._load_config()["lease"] == 60.0
    baked["lease"] = 120.0
    assert rd._load_config()["lease"] == 120.0
    monkeypatch.setenv("SPARKDAP_LEASE", "0")
    assert rd._load_config()["lease"] == 0.0
    monkeypatch.setenv("SPARKDAP_LEASE", "5")
    with pytest.raises(ValueError, match="invalid SPARKDAP_LEASE"):
        rd._load_config()


def test_no_lease_installs_nothing(rd):
    assert rd._hold_stops_on_lease({"lease": 0.0}) is None
