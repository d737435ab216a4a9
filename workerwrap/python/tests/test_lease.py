"""The lease on stops (remote_debug._Lease and what it does when it lapses),
with a fake clock: no test here waits on real time."""

import socket
import threading

import flat
import pytest
import real_debugger


class FakeClock:
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


class FakeInfo:
    def __init__(self, state):
        self.pydev_state = state
        self.pydev_step_cmd = 108
        self.pydev_original_step_cmd = 108
        self.pydev_step_stop = object()


class FakePyDB:
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
    down for reading (pydevd's reader wakes), pydevd disposed without
    waiting, one line on stderr, and the worker never attaches again."""
    st = rd._st()
    st.debugger = "connected"
    pydb = FakePyDB()
    stopped = threading.current_thread()
    info = FakeInfo(2)
    stopped.additional_info = info
    a, b = socket.socketpair()
    try:
        rd._lease_lapsed(pydb, a, 60.0)
        a.settimeout(10)
        assert a.recv(16) == b"", "pydevd's reader is not woken by an end of file"
    finally:
        del stopped.additional_info
        a.close()
        b.close()
    for table in (
        pydb.breakpoints,
        pydb.file_to_id_to_line_breakpoint,
        pydb.api_received_breakpoints,
        pydb.break_on_caught_exceptions,
        pydb.break_on_uncaught_exceptions,
    ):
        assert table == {}
    assert pydb.changed == [True]
    assert pydb.disposed == [False]
    assert info.pydev_state == 1
    assert st.debugger == "failed"
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "no word from the proxy for 60s while stopped at a breakpoint (--lease)" in err
    assert "runs on undebugged" in err


def test_lapse_says_why_before_the_task_resumes(rd, monkeypatch, capsys):
    """The guard is a daemon thread: a task that ends the process as soon
    as it resumes would take a line said after resuming with it."""
    said_by_then = []

    def let_go(pydb, sock):
        said_by_then.append(capsys.readouterr().err)

    monkeypatch.setattr(rd, "_let_go", let_go)
    rd._st().debugger = "connected"
    rd._lease_lapsed(FakePyDB(), None, 60.0)
    assert len(said_by_then) == 1
    assert "no word from the proxy for 60s" in said_by_then[0]


def test_lapse_tells_the_executors_other_workers(rd, tmp_path, monkeypatch, capsys):
    """A lapsed lease means the proxy went silent: the daemon's other
    workers skip it for the backoff instead of each waiting it out."""
    daemon_dir = tmp_path / "daemon"
    daemon_dir.mkdir(mode=0o700)
    monkeypatch.setattr(rd, "_backoff_dir", str(daemon_dir))
    cfg = {"proxy": ("127.0.0.1", 5678), "proxy_backoff": 60.0}
    rd._st().debugger = "connected"
    a, b = socket.socketpair()
    try:
        rd._lease_lapsed(FakePyDB(), a, 60.0, cfg)
    finally:
        a.close()
        b.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "runs on undebugged; this executor's other workers skip it for 60s" in err
    rd._state = rd._State(None)  # another worker of the daemon
    assert rd._skip_reason(cfg).startswith("another worker of this executor found proxy")


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
    [
        ("60", 60.0),
        ("60s", 60.0),
        ("1.5m", 90.0),
        ("1h", 3600.0),
        ("0", 0.0),
        (" 10 ", 10.0),
        ("86400", 86400.0),
    ],
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


# --- with the real debugger ---------------------------------------------------------
#
# A child process attaches the real debugger to a stand-in for the proxy,
# holds its stops on a short lease and stops at a breakpoint; the stand-in
# then goes silent without closing anything (a frozen proxy). The lease
# must let the child go: it prints "resumed" and exits.

_DAP_CHILD = r"""
import os, sys
sys.path.insert(0, %(module_dir)r)
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
import debugpy
import remote_debug as rd
print("loaded", debugpy.__file__, flush=True)
debugpy.configure(subProcess=False)
debugpy.connect(("127.0.0.1", %(port)d))
rd._hold_stops_on_lease({"lease": %(lease)r})
debugpy.breakpoint()
x = 1
print("resumed", flush=True)
"""

_PYCHARM_CHILD = r"""
import sys
sys.path.insert(0, %(module_dir)r)
import pydevd_pycharm
import remote_debug as rd
print("loaded", pydevd_pycharm.__file__, flush=True)
pydevd_pycharm.settrace("127.0.0.1", port=%(port)d, suspend=False, stdout_to_server=False,
                        stderr_to_server=False, patch_multiprocessing=False)
rd._hold_stops_on_lease({"lease": %(lease)r})
pydevd_pycharm.settrace("127.0.0.1", port=%(port)d, suspend=True, patch_multiprocessing=False)
x = 1
print("resumed", flush=True)
"""


def _dap_stand_in(conn, stopped):
    from fake_adapter import _recv, _send

    f = conn.makefile("rb")
    seq = 0
    for command, args in (
        ("initialize", {"clientID": "test", "adapterID": "debugpy", "pathFormat": "path"}),
        ("attach", {"justMyCode": False}),
        ("configurationDone", None),
    ):
        seq += 1
        msg = {"seq": seq, "type": "request", "command": command}
        if args is not None:
            msg["arguments"] = args
        _send(conn, msg)
    while True:
        m = _recv(f)
        if m is None:
            return
        if m.get("type") == "event" and m.get("event") == "stopped":
            stopped.set()
            return  # silent from here on: nothing read, nothing sent, nothing closed


def _pycharm_stand_in(conn, stopped):
    conn.sendall(b"101\t1\t\n")  # CMD_RUN: settrace returns
    buf = b""
    while b"\n105\t" not in b"\n" + buf:  # CMD_THREAD_SUSPEND
        data = conn.recv(65536)
        if not data:
            return
        buf += data
    stopped.set()


@pytest.mark.real_debugger
@pytest.mark.parametrize(
    "mode", [{"debugpy": "dap", "pydevd-pycharm": "pycharm"}[k] for k in real_debugger.kinds()]
)
def test_real_debugger_let_go_when_the_proxy_falls_silent(mode, tmp_path):
    import subprocess
    import sys

    if mode == "dap":
        pytest.importorskip("debugpy")
        child, stand_in = _DAP_CHILD, _dap_stand_in
    else:
        pytest.importorskip("pydevd_pycharm")
        child, stand_in = _PYCHARM_CHILD, _pycharm_stand_in
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(60)
    module_dir = flat.directory()
    script = tmp_path / "child.py"
    script.write_text(
        child % {"module_dir": module_dir, "port": listener.getsockname()[1], "lease": 1.0}
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=real_debugger.env(),
    )
    conns = []
    try:
        conn, _ = listener.accept()
        conns.append(conn)
        stopped = threading.Event()
        threading.Thread(target=stand_in, args=(conn, stopped), daemon=True).start()
        assert stopped.wait(60), "the child never stopped at its breakpoint"
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for c in conns:
            c.close()
        listener.close()
    err = err.decode("utf-8", "replace")
    assert proc.returncode == 0, err
    out = out.decode("utf-8", "replace")
    # pydevd-pycharm on 3.13 says on stdout that it cannot trace the
    # threads that exist at settrace, lease or not; a write to the proxy
    # that failed once the lease lapsed would say "Connection error".
    assert out.splitlines()[-1:] == ["resumed"], out
    assert "Connection error" not in out, out
    loaded = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("loaded ")]
    assert len(loaded) == 1, out
    real_debugger.check_loaded_from_dir(loaded[0])
    lines = [line for line in err.splitlines() if "no word from the proxy" in line]
    assert len(lines) == 1, err
    assert "no word from the proxy for 1s while stopped at a breakpoint (--lease)" in lines[0]
