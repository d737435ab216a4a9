"""The executor's backoff (remote_debug._Backoff and its callers): a worker
that found the proxy silent makes the daemon's other workers skip it for a
while. Markers are dated with a fake clock; only the test of a real silent
proxy waits, for its 0.2 s handshake timeout."""

import os
import re
import socket
import stat
import threading

import pytest
from test_remote_debug import TOKEN, Proxy, closed_port, task

PROXY = "127.0.0.1:5678"


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def backoff_dir(rd, tmp_path, monkeypatch):
    """The daemon's directory, as _open_backoff makes it."""
    path = tmp_path / "daemon"
    path.mkdir(mode=0o700)
    monkeypatch.setattr(rd, "_backoff_dir", str(path))
    return path


def marker(path):
    return path / "proxy-silent"


def settings(rd, port=5678, **over):
    cfg = {"proxy": ("127.0.0.1", port), "proxy_backoff": 60.0}
    cfg.update(over)
    return cfg


def test_fresh_marker_skips_the_proxy(rd, backoff_dir):
    clock = FakeClock()
    rd._Backoff(str(backoff_dir), 60.0, clock).record(PROXY)
    clock.now += 3.2
    assert rd._skip_reason(settings(rd), clock) == (
        "another worker of this executor found proxy 127.0.0.1:5678 silent 3s ago; "
        "retrying after 57s"
    )


@pytest.mark.parametrize("later", [60.0, 61.0, 3600.0, -1.0])
def test_stale_marker_lets_the_worker_try(rd, backoff_dir, later):
    clock = FakeClock()
    rd._Backoff(str(backoff_dir), 60.0, clock).record(PROXY)
    clock.now += later
    assert rd._skip_reason(settings(rd), clock) is None


def test_marker_of_another_proxy_is_none(rd, backoff_dir):
    clock = FakeClock()
    rd._Backoff(str(backoff_dir), 60.0, clock).record("10.0.0.1:5678")
    assert rd._skip_reason(settings(rd), clock) is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe",
        b"not json",
        b"[1, 2]",
        b'{"proxy": "127.0.0.1:5678"}',
        b'{"proxy": "127.0.0.1:5678", "at": "999"}',
        b'{"proxy": "127.0.0.1:5678", "at": true}',
        b'{"proxy": "127.0.0.1:5678", "at": NaN}',
        b'{"proxy": "127.0.0.1:5678", "at": 999.0, "pad": "' + b"x" * 5000 + b'"}',
    ],
)
def test_corrupt_marker_lets_the_worker_try(rd, backoff_dir, data):
    marker(backoff_dir).write_bytes(data)
    assert rd._skip_reason(settings(rd), FakeClock()) is None


def test_symlinked_marker_is_not_followed(rd, backoff_dir, tmp_path):
    """A marker that is a symlink is none, and recording replaces the link
    instead of writing through it."""
    clock = FakeClock()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b'{"proxy": "127.0.0.1:5678", "at": 1000.0}')
    marker(backoff_dir).symlink_to(elsewhere)
    assert rd._skip_reason(settings(rd), clock) is None

    assert rd._proxy_silent(settings(rd), clock) != ""
    assert not marker(backoff_dir).is_symlink()
    assert elsewhere.read_bytes() == b'{"proxy": "127.0.0.1:5678", "at": 1000.0}'
    assert rd._skip_reason(settings(rd), clock) is not None


def test_fifo_marker_does_not_block(rd, backoff_dir):
    os.mkfifo(str(marker(backoff_dir)), 0o600)
    assert rd._skip_reason(settings(rd), FakeClock()) is None


@pytest.mark.parametrize("kind", ["open", "symlink"])
def test_directory_not_private_is_not_used(rd, backoff_dir, tmp_path, monkeypatch, capsys, kind):
    if kind == "open":
        backoff_dir.chmod(0o755)
        where = backoff_dir
    else:
        where = tmp_path / "link"
        where.symlink_to(backoff_dir)
        monkeypatch.setattr(rd, "_backoff_dir", str(where))
    clock = FakeClock()
    assert rd._proxy_silent(settings(rd), clock) == ""
    assert not marker(backoff_dir).exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "cannot tell this executor's other workers" in err[0], err
    marker(backoff_dir).write_bytes(b'{"proxy": "127.0.0.1:5678", "at": 1000.0}')
    assert rd._skip_reason(settings(rd), clock) is None


def test_no_daemon_directory_no_backoff(rd, capsys):
    assert rd._backoff_dir is None
    assert rd._proxy_silent(settings(rd)) == ""
    assert rd._skip_reason(settings(rd)) is None
    rd._proxy_heard(settings(rd))
    assert capsys.readouterr().err == ""


def test_backoff_zero_is_off(rd, backoff_dir):
    assert rd._proxy_silent(settings(rd, proxy_backoff=0.0)) == ""
    assert not marker(backoff_dir).exists()


def test_heard_clears_the_marker(rd, backoff_dir):
    clock = FakeClock()
    rd._proxy_silent(settings(rd), clock)
    assert marker(backoff_dir).exists()
    rd._proxy_heard(settings(rd))
    assert not marker(backoff_dir).exists()
    assert rd._skip_reason(settings(rd), clock) is None
    rd._proxy_heard(settings(rd))  # none there: nothing to do


def test_record_leaves_only_the_marker(rd, backoff_dir):
    clock = FakeClock()
    for _ in range(3):
        rd._proxy_silent(settings(rd), clock)
    assert os.listdir(str(backoff_dir)) == ["proxy-silent"]
    assert stat.S_IMODE(marker(backoff_dir).stat().st_mode) == 0o600


def test_open_and_close_the_daemon_directory(rd, monkeypatch):
    rd._open_backoff()
    path = rd._backoff_dir
    try:
        info = os.lstat(path)
        assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
        rd._proxy_silent(settings(rd))
        # A worker forked from the daemon leaves the directory be.
        monkeypatch.setattr(rd, "_backoff_owner", os.getpid() + 1)
        rd._close_backoff()
        assert os.path.isdir(path) and rd._backoff_dir == path
        monkeypatch.setattr(rd, "_backoff_owner", os.getpid())
        rd._close_backoff()
        assert not os.path.exists(path) and rd._backoff_dir is None
    finally:
        if os.path.isdir(path):
            os.remove(os.path.join(path, "proxy-silent"))
            os.rmdir(path)


# --- what a worker does -------------------------------------------------------


def new_worker(rd):
    """What a fork of the daemon starts with: fresh per-process state, the
    daemon's directory."""
    rd._state = rd._State(None)


@pytest.fixture
def silent_proxy():
    """A listener that never accepts: connects succeed (the kernel's
    backlog) and the hello is never answered, like serve under SIGSTOP."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def test_silent_proxy_is_skipped_by_the_next_workers(rd, baked, backoff_dir, silent_proxy, capsys):
    baked.update(proxy="127.0.0.1:%d" % silent_proxy, handshake_timeout=0.2)
    rd._connect(rd._load_config(), task(0, 0))
    assert rd._st().debugger == "failed"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert "did not finish the debug handshake within 0.2s" in err[0]
    assert "this executor's other workers skip it for 60s" in err[0]
    assert marker(backoff_dir).exists()

    for partition in (1, 2):
        new_worker(rd)
        rd._connect(rd._load_config(), task(0, partition))
        assert rd._st().debugger == "failed"
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1, err
        assert re.search(
            r"debugger unavailable \(another worker of this executor found proxy "
            r"127\.0\.0\.1:%d silent \d+s ago; retrying after \d+s\); task runs undebugged$"
            % silent_proxy,
            err[0],
        ), err


def test_connect_timeout_sets_the_backoff(rd, baked, backoff_dir, monkeypatch, capsys):
    def unreachable(cfg, task):
        raise socket.timeout("timed out")

    monkeypatch.setattr(rd, "_hello", unreachable)
    rd._connect(rd._load_config(), task(0, 0))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "no connection within 3s; this executor's" in err[0], err
    assert marker(backoff_dir).exists()


def one_hello(reply=b"SPARKDAP/2 OK\n", token=TOKEN, at_once=None):
    """A listener that answers one hello as Proxy does (or with at_once
    before any challenge); returns (port, join)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(30)
    got = []

    def serve():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        if at_once is not None:
            conn.recv(4096)
            conn.sendall(at_once)
            conn.close()
            return
        proxy = Proxy(conn, token=token, reply=reply)
        proxy.join()
        conn.close()
        got.append(proxy)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def join():
        thread.join(30)
        server.close()
        assert not thread.is_alive()
        return got[0] if got else None

    return server.getsockname()[1], join


@pytest.mark.parametrize("kind", ["refused connection", "refused hello", "unproven", "closed"])
def test_fast_failures_set_no_backoff(rd, baked, backoff_dir, capsys, kind):
    """A failure that costs no wait leaves no marker: a user who starts
    serve after the job gets debugging with the next task."""
    join = None
    if kind == "refused connection":
        port = closed_port()
    elif kind == "refused hello":
        port, join = one_hello(reply=b"SPARKDAP/2 REFUSED session limit reached (1)\n")
    elif kind == "unproven":
        port, join = one_hello(token=None)
    else:
        port, join = one_hello(at_once=b"HTTP/1.1 400 Bad Request\r\n")
    baked.update(proxy="127.0.0.1:%d" % port, token=TOKEN)
    rd._connect(rd._load_config(), task(0, 0))
    if join is not None:
        join()
    assert rd._st().debugger == "failed"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "skip it" not in err[0], err
    assert not marker(backoff_dir).exists()


def test_answering_proxy_clears_a_stale_marker(rd, baked, backoff_dir, fake_debugpy, capsys):
    """After the backoff the next worker tries; a proxy that answers its
    hello clears the marker for the workers after it. (The fake debugpy
    then fails the attach at once, which sets nothing.)"""
    port, join = one_hello()
    baked.update(proxy="127.0.0.1:%d" % port, token=TOKEN)
    long_ago = FakeClock(rd._Backoff(str(backoff_dir), 60.0).clock() - 61.0)
    rd._Backoff(str(backoff_dir), 60.0, long_ago).record("127.0.0.1:%d" % port)
    rd._connect(rd._load_config(), task(0, 0))
    assert join().hello is not None
    assert "skip" not in capsys.readouterr().err
    assert not marker(backoff_dir).exists()
