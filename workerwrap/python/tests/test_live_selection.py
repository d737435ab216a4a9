"""The live selection, worker side (remote_debug/selection.py): a worker
process watches the selection on one connection to the proxy, decides each
task by the proxy's latest one, and reports its tasks. The proxy's side is
played here over loopback TCP, hello and all."""

import json
import os
import queue
import random
import re
import socket
import sys
import threading
import time
import types

import pytest
from test_remote_debug import TOKEN, mac, readline

ALL = {"partitions": None, "stages": None, "executors": None, "sampleRate": 1.0}


def selection(**over):
    s = dict(ALL)
    s.update(over)
    return s


def select_line(sel):
    return b"SPARKDAP/2 SELECT " + json.dumps(sel).encode() + b"\n"


class WatchProxy:
    """A loopback listener playing the proxy's side of watch connections:
    the hello (admission's wire), then `initial` (the SELECT lines sent
    right after the reply), then what push() sends. .hellos: the workers'
    hello bodies; .reports: the lines they sent after it. silent: accepts
    and never answers. read: reads the reports (else leaves them in the
    socket)."""

    def __init__(self, reply=b"SPARKDAP/2 OK\n", initial=(), silent=False, read=True):
        self.reply, self.initial, self.silent, self.read = reply, list(initial), silent, read
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.port = self.server.getsockname()[1]
        self.conns = []
        self.accepted = threading.Event()
        self.hellos = []
        self.reports = queue.Queue()
        self.eof = threading.Event()  # the worker closed the watch
        self.threads = []
        self.stopping = False
        t = threading.Thread(target=self.accept_loop, daemon=True)
        t.start()
        self.threads.append(t)

    def accept_loop(self):
        self.server.settimeout(0.02)
        while not self.stopping:
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()
            t = threading.Thread(target=self.serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def serve(self, conn):
        conn.settimeout(30)
        try:
            if self.silent:
                while conn.recv(4096):
                    pass
                return
            first = readline(conn)
            if not first.startswith(b"SPARKDAP/2 HELLO "):
                return
            wn = first[len(b"SPARKDAP/2 HELLO ") :].strip().decode("ascii")
            pn = "%032x" % random.getrandbits(128)
            proof = mac(TOKEN, "sparkdap/2 proxy", wn, pn)
            conn.sendall(b"SPARKDAP/2 CHALLENGE %s %s\n" % (pn.encode(), proof.encode()))
            body = readline(conn)
            if not body:
                return  # the worker found the proof wrong
            hello = json.loads(body[len(b"SPARKDAP/2 ") :].decode("utf-8"))
            hello["proof_ok"] = hello.pop("proof") == mac(TOKEN, "sparkdap/2 worker", wn, pn)
            self.hellos.append(hello)
            conn.sendall(self.reply + b"".join(self.initial))
            if not self.read:
                return
            conn.settimeout(None)
            while True:
                line = readline(conn)
                if not line.endswith(b"\n"):
                    self.eof.set()
                    return
                self.reports.put(line)
        except OSError:
            self.eof.set()

    def push(self, data):
        self.conns[-1].sendall(data)

    def close_watch(self):
        self.conns[-1].shutdown(socket.SHUT_RDWR)

    def report(self, timeout=10):
        return self.reports.get(timeout=timeout)

    def close(self):
        self.stopping = True
        self.threads[0].join(10)
        self.server.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        for t in self.threads:
            t.join(10)


class FakeTaskContext:
    current = None

    @classmethod
    def get(cls):
        return cls.current


class FakeTask:
    def __init__(self, stage, partition, attempt, task_attempt_id):
        self._v = (stage, partition, attempt, task_attempt_id)

    def stageId(self):
        return self._v[0]

    def partitionId(self):
        return self._v[1]

    def attemptNumber(self):
        return self._v[2]

    def taskAttemptId(self):
        return self._v[3]


@pytest.fixture
def worker(rd, baked, monkeypatch):
    """A worker process's hooks, driven task by task: .run(stage, partition)
    runs one task through _task_started and the wrapped main, and returns
    whether it was selected (would attach a debugger)."""
    pyspark = types.ModuleType("pyspark")
    taskcontext = types.ModuleType("pyspark.taskcontext")
    taskcontext.TaskContext = FakeTaskContext
    pyspark.taskcontext = taskcontext
    monkeypatch.setitem(sys.modules, "pyspark", pyspark)
    monkeypatch.setitem(sys.modules, "pyspark.taskcontext", taskcontext)
    monkeypatch.setenv("SPARK_EXECUTOR_ID", "7")
    baked.update(token=TOKEN, connect_timeout=5.0, handshake_timeout=5.0)
    proxies = []
    ids = iter(range(1000, 100000))

    def run(stage, partition, attempt=0):
        FakeTaskContext.current = FakeTask(stage, partition, attempt, next(ids))
        seen = {}

        def main():
            st = rd._st()
            seen["selected"] = st.pending is not None
            st.pending = None

        rd._task_started()
        rd._wrap_main(main)()
        FakeTaskContext.current = None
        return seen["selected"]

    def start(proxy):
        proxies.append(proxy)
        baked["proxy"] = "127.0.0.1:%d" % proxy.port
        return proxy

    w = types.SimpleNamespace(rd=rd, baked=baked, run=run, start=start)
    yield w
    watch = rd._st().watch
    if watch is not None and watch.open:
        watch.stop(None)
    for p in proxies:
        p.close()
    # Its last line, if any, goes to this test's output, not the next's.
    if watch is not None and watch.thread is not None:
        watch.thread.join(15)
        assert not watch.thread.is_alive()
    FakeTaskContext.current = None


def wait_for(cond, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


def lines(err):
    return [ln for ln in err.splitlines() if ln.startswith("sparkdap: ")]


def frozen(sel):
    """The state's form of a SELECT's JSON."""
    return {
        "partitions": None if sel["partitions"] is None else frozenset(sel["partitions"]),
        "stages": None if sel["stages"] is None else frozenset(sel["stages"]),
        "executors": None if sel["executors"] is None else frozenset(sel["executors"]),
        "sample_rate": float(sel["sampleRate"]),
    }


# --- deciding -------------------------------------------------------------------


def test_selection_after_ok_decides_the_first_task(worker, capsys):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[3]))]))
    assert worker.run(0, 3) is True
    assert worker.run(0, 4) is False, "the baked selection (all) decided"
    assert proxy.hellos and proxy.hellos[0]["proof_ok"]
    hello = {k: v for k, v in proxy.hellos[0].items() if k != "proof_ok"}
    assert hello == {
        "watch": True,
        "executorId": "7",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "label": "",
        "sparkdapVersion": "9.8.7-test",
    }
    assert len(proxy.conns) == 1, "one watch per worker process"
    assert lines(capsys.readouterr().err) == []


@pytest.mark.parametrize("baked_version, said", [("0.4.0", "0.4.0"), (None, "")])
def test_watch_hello_carries_the_baked_version(worker, baked_version, said):
    """The watch hello says which sparkdap wrote the wrapper, so that
    `sparkdap doctor` can tell it from serve's; a wrapper generated before
    the version was baked says "" (the proxy counts it as older)."""
    if baked_version is None:
        del worker.baked["sparkdap_version"]
    else:
        worker.baked["sparkdap_version"] = baked_version
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[3]))]))
    assert worker.run(0, 3) is True
    assert proxy.hellos and proxy.hellos[0]["proof_ok"]
    assert proxy.hellos[0]["sparkdapVersion"] == said


def test_changed_selection_applies_to_the_next_task(worker):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[3]))]))
    assert worker.run(0, 3) and not worker.run(0, 4)
    sel = selection(partitions=[4], stages=[0, 1])
    proxy.push(select_line(sel))
    assert wait_for(lambda: worker.rd._st().live == frozen(sel))
    assert worker.run(0, 4) and not worker.run(0, 3) and not worker.run(2, 4)
    proxy.push(select_line(selection(partitions=[])))
    assert wait_for(lambda: worker.rd._st().live["partitions"] == frozenset())
    assert not worker.run(0, 4) and not worker.run(0, 3)
    assert len(proxy.conns) == 1


def test_null_reverts_to_the_baked_selection(worker):
    worker.baked["partitions"] = [1]
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[2]))]))
    assert worker.run(0, 2) and not worker.run(0, 1)
    proxy.push(b"SPARKDAP/2 SELECT null\n")
    assert wait_for(lambda: worker.rd._st().live is None)
    assert worker.run(0, 1) and not worker.run(0, 2)
    # The watch goes on: a later selection still applies.
    proxy.push(select_line(selection(partitions=[2])))
    assert wait_for(lambda: worker.rd._st().live is not None)
    assert worker.run(0, 2)


def test_baked_none_selects_once_the_proxy_says(worker):
    """A job submitted with --partitions none selects later."""
    worker.baked["partitions"] = []
    assert worker.rd._may_select(worker.rd._load_config())
    proxy = worker.start(WatchProxy(initial=[b"SPARKDAP/2 SELECT null\n"]))
    assert not worker.run(0, 0)
    proxy.push(select_line(selection(partitions=[0])))
    assert wait_for(lambda: worker.rd._st().live is not None)
    assert worker.run(0, 0)


def test_executors_filter(worker):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(executors=["8"]))]))
    assert not worker.run(0, 0)
    proxy.push(select_line(selection(executors=["8", "7"])))
    assert wait_for(lambda: worker.rd._st().live["executors"] == frozenset(["7", "8"]))
    assert worker.run(0, 0)


def test_selected_takes_executors(rd, monkeypatch):
    monkeypatch.setenv("SPARK_EXECUTOR_ID", "7")
    task = {"stageId": 1, "partitionId": 2, "attemptNumber": 0, "taskAttemptId": 9}
    base = {"partitions": None, "stages": None, "sample_rate": 1.0}
    assert rd._selected(dict(base), task)
    assert rd._selected(dict(base, executors=None), task)
    assert rd._selected(dict(base, executors=["7"]), task)
    assert not rd._selected(dict(base, executors=["8"]), task)
    assert not rd._selected(dict(base, executors=[]), task)


def test_live_sample_is_the_deterministic_one(worker):
    """A live sample rate picks the tasks the baked one would."""
    worker.start(WatchProxy(initial=[select_line(selection(sampleRate=0.25))]))
    got = [p for p in range(40) if worker.run(5, p)]
    cfg = {"partitions": None, "stages": None, "sample_rate": 0.25}
    want = [
        p
        for p in range(40)
        if worker.rd._selected(
            cfg, {"stageId": 5, "partitionId": p, "attemptNumber": 0, "taskAttemptId": 0}
        )
    ]
    assert got == want and 0 < len(got) < 40


def closed_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- falling back ---------------------------------------------------------------


def test_refused_watch_uses_the_baked_selection(worker, capsys):
    worker.baked["partitions"] = [0]
    proxy = worker.start(WatchProxy(reply=b"SPARKDAP/2 REFUSED too many workers watch\n"))
    assert worker.run(0, 0) and not worker.run(0, 1)
    assert worker.run(0, 0) and not worker.run(0, 1)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1, err
    assert "takes no selection watch (too many workers watch)" in err[0]
    assert "settings the job was submitted with" in err[0]
    assert len(proxy.conns) == 1, "not tried again"
    assert proxy.eof.wait(10) or wait_for(lambda: not worker.rd._st().watch.open)


def test_proxy_without_live_selection_is_not_a_failure(worker, capsys):
    # An older serve refuses the watch as it refuses an unknown hello: the
    # worker selects by its settings, as it did with it, and says nothing.
    worker.baked["partitions"] = [0]
    worker.start(WatchProxy(reply=b"SPARKDAP/2 REFUSED this proxy has no live selection\n"))
    assert worker.run(0, 0) and not worker.run(0, 1)
    assert lines(capsys.readouterr().err) == []


def test_watch_failure_is_said_only_when_nothing_else_was(worker, capsys, monkeypatch):
    # The debugger's own line about an unreachable proxy, said during the
    # task, is the worker's one line; the watch adds none.
    rd = worker.rd
    worker.baked["proxy"] = "127.0.0.1:%d" % closed_port()
    decide = rd._decide

    def decide_and_fail_to_attach(st, cfg, task):
        selected = decide(st, cfg, task)
        rd._say("debugger unavailable (proxy unreachable); task runs undebugged")
        return selected

    monkeypatch.setattr(rd, "_decide", decide_and_fail_to_attach)
    worker.run(0, 1)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "debugger unavailable" in err[0], err


def test_watch_failure_is_said_once_when_nothing_else_is(worker, capsys):
    worker.baked["proxy"] = "127.0.0.1:%d" % closed_port()
    worker.run(0, 1)
    worker.run(0, 2)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "unreachable for the selection watch" in err[0], err


def test_proxy_closing_the_watch_reverts_to_baked(worker, capsys):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))]))
    assert not worker.run(0, 0)
    proxy.close_watch()
    assert wait_for(lambda: worker.rd._st().live is None)
    assert worker.run(0, 0) and worker.run(0, 5)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "closed the selection watch" in err[0], err
    assert len(proxy.conns) == 1, "not tried again"


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b"[1, 2]",
        b'"all"',
        b'{"partitions": null, "stages": null, "sampleRate": 1}',  # no executors
        b'{"partitions": null, "stages": null, "executors": null, "sampleRate": 1, "x": 1}',
        b'{"partitions": [-1], "stages": null, "executors": null, "sampleRate": 1}',
        b'{"partitions": [true], "stages": null, "executors": null, "sampleRate": 1}',
        b'{"partitions": [1.5], "stages": null, "executors": null, "sampleRate": 1}',
        b'{"partitions": "1", "stages": null, "executors": null, "sampleRate": 1}',
        b'{"partitions": null, "stages": ["1"], "executors": null, "sampleRate": 1}',
        b'{"partitions": null, "stages": null, "executors": [7], "sampleRate": 1}',
        b'{"partitions": null, "stages": null, "executors": [""], "sampleRate": 1}',
        b'{"partitions": null, "stages": null, "executors": null, "sampleRate": 0}',
        b'{"partitions": null, "stages": null, "executors": null, "sampleRate": 1.5}',
        b'{"partitions": null, "stages": null, "executors": null, "sampleRate": NaN}',
        b'{"partitions": null, "stages": null, "executors": null, "sampleRate": true}',
        b'{"partitions": null, "stages": null, "executors": null, "sampleRate": "1"}',
        b"\xff\xfe",
    ],
)
def test_malformed_selection_reverts_to_baked(worker, capsys, bad):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))]))
    assert not worker.run(0, 0)
    proxy.push(b"SPARKDAP/2 SELECT " + bad + b"\n")
    assert wait_for(lambda: worker.rd._st().live is None)
    assert worker.run(0, 0)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "sent a selection this worker cannot read" in err[0], err
    assert proxy.eof.wait(10), "the worker closed the watch"


def test_overlong_line_closes_the_watch(worker, capsys):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))]))
    assert not worker.run(0, 0)
    proxy.push(b"SPARKDAP/2 SELECT " + b" " * 70000)
    assert wait_for(lambda: worker.rd._st().live is None)
    assert worker.run(0, 0)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "longer than 65536 bytes" in err[0], err
    assert proxy.eof.wait(10)


def test_lines_not_of_the_protocol_are_skipped(worker, capsys):
    """pydevd's bytes before the proxy's lines, and lines of a later
    protocol, are no reason to end the watch."""
    proxy = worker.start(
        WatchProxy(
            initial=[
                b'Content-Length: 17\r\n\r\n{"seq": 1, "x": 0}\n',
                b"SPARKDAP/2 SOMETHING new\n",
                select_line(selection(partitions=[3])),
            ]
        )
    )
    assert worker.run(0, 3) and not worker.run(0, 4)
    # A selection split across writes is read whole.
    line = select_line(selection(partitions=[4]))
    proxy.push(line[:10])
    time.sleep(0.05)
    proxy.push(line[10:])
    assert wait_for(lambda: worker.rd._st().live["partitions"] == frozenset([4]))
    assert lines(capsys.readouterr().err) == []


def test_unproven_proxy_uses_the_baked_selection(worker, capsys, monkeypatch):
    monkeypatch.setenv("SPARKDAP_TOKEN", "another token")
    worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))]))
    assert worker.run(0, 0)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "did not prove it knows the access token" in err[0], err


def test_unreachable_proxy_one_line(worker, capsys):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    worker.baked["proxy"] = "127.0.0.1:%d" % port
    assert worker.run(0, 0) and worker.run(0, 1)
    worker.rd._st().watch.thread.join(10)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "unreachable for the selection watch" in err[0], err


# --- reporting ------------------------------------------------------------------


def test_task_and_idle_are_reported(worker):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[3]))]))
    assert worker.run(2, 3, attempt=1)
    assert not worker.run(2, 4)
    got = [proxy.report() for _ in range(4)]
    assert got[0].startswith(b"SPARKDAP/2 TASK {") and got[0].endswith(b"}\n")
    first = json.loads(got[0][len(b"SPARKDAP/2 TASK ") :])
    assert first == {
        "stageId": 2,
        "partitionId": 3,
        "attemptNumber": 1,
        "taskAttemptId": first["taskAttemptId"],
        "selected": True,
    }
    assert list(first) == ["stageId", "partitionId", "attemptNumber", "taskAttemptId", "selected"]
    assert isinstance(first["taskAttemptId"], int)
    assert got[1] == b"SPARKDAP/2 IDLE\n"
    second = json.loads(got[2][len(b"SPARKDAP/2 TASK ") :])
    assert (second["stageId"], second["partitionId"], second["selected"]) == (2, 4, False)
    assert second["taskAttemptId"] != first["taskAttemptId"]
    assert got[3] == b"SPARKDAP/2 IDLE\n"
    assert proxy.reports.empty()


def test_a_proxy_that_does_not_read_ends_the_watch(worker, capsys):
    """Reports never wait: once the socket's buffers are full, the send
    that would wait ends the watch instead, and tasks go on."""
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))], read=False))
    assert not worker.run(0, 0)
    rd = worker.rd
    st = rd._st()
    task = {"stageId": 0, "partitionId": 0, "attemptNumber": 0, "taskAttemptId": 1}
    start = time.monotonic()
    for _ in range(2000000):
        rd._report_task(st, task, False)
        if not st.watch.open:
            break
    assert not st.watch.open, "the buffers never filled"
    assert time.monotonic() - start < 60
    assert wait_for(lambda: st.live is None)
    assert worker.run(0, 0)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "cannot report to proxy" in err[0], err
    assert len(proxy.conns) == 1


def test_partial_send_ends_the_watch(worker, capsys):
    worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))]))
    assert not worker.run(0, 0)
    watch = worker.rd._st().watch
    real = watch.sock

    class Short:
        def send(self, data, flags=0):
            return real.send(data[:-1], flags)

        def shutdown(self, how):
            real.shutdown(how)

        def close(self):
            real.close()

    watch.sock = Short()
    # Decided by the live selection; its report goes out short.
    assert not worker.run(0, 0)
    assert not watch.open and worker.rd._st().live is None
    assert worker.run(0, 0) and worker.run(0, 1), "the baked selection (all) decides"
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and re.search(r"sent \d+ of \d+ bytes", err[0]), err


# --- bounded waits --------------------------------------------------------------


def test_silent_proxy_costs_the_first_task_at_most_a_second(worker, capsys):
    worker.baked["partitions"] = [0]
    proxy = worker.start(WatchProxy(silent=True))
    start = time.monotonic()
    assert worker.run(0, 0)
    first = time.monotonic() - start
    assert proxy.accepted.wait(10), "the worker opened a watch"
    assert 0.5 <= first < 5.0, first
    start = time.monotonic()
    for p in range(20):
        assert worker.run(0, p) == (p == 0)
    later = time.monotonic() - start
    assert later < 2.0, later
    assert lines(capsys.readouterr().err) == [], "no line per task"


def test_silent_proxy_found_by_the_watch_is_backed_off(worker, capsys, tmp_path, monkeypatch):
    """A watch that waited out the hello tells the executor's other workers,
    and a worker that starts while the marker is fresh opens none."""
    backoff = tmp_path / "daemon"
    backoff.mkdir(mode=0o700)
    monkeypatch.setattr(worker.rd, "_backoff_dir", str(backoff))
    worker.baked["handshake_timeout"] = 0.3
    proxy = worker.start(WatchProxy(silent=True))
    worker.run(0, 0)
    worker.rd._st().watch.thread.join(10)
    err = lines(capsys.readouterr().err)
    assert len(err) == 1 and "did not answer its hello within 0.3s" in err[0], err
    assert (backoff / "proxy-silent").exists()
    # Another worker process of the executor.
    worker.rd._state = worker.rd._State(None)
    before = len(proxy.conns)
    assert worker.run(0, 0)
    time.sleep(0.2)
    assert len(proxy.conns) == before and worker.rd._st().watch is None


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "OFF"])
def test_live_selection_off_opens_no_connection(worker, monkeypatch, value):
    proxy = worker.start(WatchProxy(initial=[select_line(selection(partitions=[5]))]))
    assert worker.rd._load_config()["live_selection"] is True
    monkeypatch.setenv("SPARKDAP_LIVE_SELECTION", value)
    cfg = worker.rd._load_config()
    assert cfg["live_selection"] is False
    start = time.monotonic()
    assert worker.run(0, 0) and worker.run(0, 1)
    assert time.monotonic() - start < 0.9
    assert not proxy.accepted.wait(0.3)
    assert worker.rd._st().watch is None
    assert not any(t.name == "sparkdap-selection" for t in threading.enumerate())
    # And with nothing baked, nothing can be selected: no preload.
    cfg["partitions"] = []
    assert not worker.rd._may_select(cfg)


def test_watch_thread_is_hidden_from_pydevd(worker):
    worker.start(WatchProxy(initial=[select_line(ALL)]))
    worker.run(0, 0)
    threads = [t for t in threading.enumerate() if t.name == "sparkdap-selection"]
    assert len(threads) == 1
    t = threads[0]
    assert t.daemon and t.is_pydev_daemon_thread and t.pydev_do_not_trace


def test_parse_selection(rd):
    assert rd._parse_selection(b"null") is None
    assert rd._parse_selection(b" null\r") is None
    got = rd._parse_selection(
        b'{"partitions": [1, 2, 2], "stages": [], "executors": ["a"], "sampleRate": 1}'
    )
    assert got == {
        "partitions": frozenset([1, 2]),
        "stages": frozenset(),
        "executors": frozenset(["a"]),
        "sample_rate": 1.0,
    }
    assert isinstance(got["sample_rate"], float)
    with pytest.raises(ValueError):
        rd._parse_selection(
            b'{"partitions": %s, "stages": null, "executors": null, "sampleRate": 1}'
            % json.dumps(list(range(5000))).encode()
        )
