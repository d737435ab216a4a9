"""The worker's output batching (_OutputBatcher, _batch_output): what a user
sees in the IDE's output is every line, in order, in few events, and a line
saying how much was dropped when the debugger connection could not keep up."""

import json
import queue
import subprocess
import sys
import textwrap
import time

import flat
import pytest
import real_debugger


class FakeFactory:
    def make_io_message(self, text, ctx):
        return ("output", "stdout" if ctx == 1 else "stderr", text)


class FakeWriter:
    """pydevd's WriterThread as the batcher sees it: add_command and the
    queue whose length says whether the connection keeps up."""

    def __init__(self):
        self._cmd_queue = queue.Queue()
        self.sent = []

    def add_command(self, cmd):
        self._cmd_queue.put(cmd)

    def outputs_queued(self):
        """Output commands waiting, the batcher's markers left out."""
        with self._cmd_queue.mutex:
            return sum(1 for cmd in self._cmd_queue.queue if not hasattr(cmd, "send"))

    def drain(self):
        """What pydevd's writer thread does: sends each command in order,
        a _Delivered marker by calling its send()."""
        while True:
            try:
                cmd = self._cmd_queue.get_nowait()
            except queue.Empty:
                return self.sent
            if hasattr(cmd, "send"):
                cmd.send(None)
            else:
                self.sent.append(cmd)


class FakePyDB:
    def __init__(self):
        self.writer = FakeWriter()
        self.cmd_factory = FakeFactory()
        self.pydb_disposed = False


def text_of(events, category=None):
    return "".join(t for _, c, t in events if category is None or c == category)


def test_many_writes_become_few_events_in_order(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False)
    lines = ["row %05d %s\n" % (i, "x" * 60) for i in range(2000)]
    for line in lines:
        b.write(1, line[:-1])  # print(): the text, then the newline
        b.write(1, "\n")
    b.flush()
    events = pydb.writer.drain()
    assert text_of(events) == "".join(lines)
    assert len(events) <= len("".join(lines)) // b.event + 1
    assert all(len(t) <= b.event for _, _, t in events)
    # Cut after newlines: every event holds whole lines.
    assert all(t.endswith("\n") for _, _, t in events)


def test_stdout_and_stderr_keep_their_order(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False)
    b.write(1, "a\n")
    b.write(1, "b\n")
    b.write(2, "warn\n")
    b.write(1, b"c\n")  # sys.stdout.buffer.write
    b.flush()
    assert pydb.writer.drain() == [
        ("output", "stdout", "a\nb\n"),
        ("output", "stderr", "warn\n"),
        ("output", "stdout", "c\n"),
    ]


def test_backed_up_connection_holds_then_drops_and_says_so(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, cap=100, queued=2, thread=False)
    for i in range(3):  # the connection is slow: pydevd's queue is full
        pydb.writer.add_command(("other", "", str(i)))
    b.write(1, "kept %s\n" % ("k" * 80))  # 87 of 100
    assert b._send(False) is False  # held back, not queued
    b.write(1, "lost 1 %s\n" % ("l" * 20))  # over the cap: dropped
    b.write(1, "x\n")  # fits, but must not overtake the dropped line
    assert pydb.writer._cmd_queue.qsize() == 3
    pydb.writer.drain()
    pydb.writer.sent = []
    assert b._send(False) is True
    b.write(1, "after\n")
    b.flush()
    out = text_of(pydb.writer.drain())
    dropped = len("lost 1 %s\n" % ("l" * 20)) + len("x\n")
    assert out == (
        "kept %s\n" % ("k" * 80)
        + "[sparkdap: %d bytes of output dropped: the debugger connection could not keep up]\n"
        % dropped
        + "after\n"
    )


def test_flush_before_a_stop_ignores_a_backed_up_queue(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, queued=0, thread=False)
    pydb.writer.add_command(("other", "", ""))
    b.write(1, "up to the breakpoint\n")
    b.flush()
    assert text_of(pydb.writer.drain()) == "up to the breakpoint\n"


def test_thread_sends_within_an_interval_and_on_flush(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, interval=0.05)
    try:
        b.write(1, "one\n")
        deadline = time.monotonic() + 10
        while pydb.writer.outputs_queued() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        b.write(2, "two\n")
        b.request_flush()
        while pydb.writer.outputs_queued() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pydb.writer.drain() == [("output", "stdout", "one\n"), ("output", "stderr", "two\n")]
    finally:
        b.close()
    b.write(1, "after close\n")
    assert pydb.writer.drain() == [("output", "stdout", "one\n"), ("output", "stderr", "two\n")]


def test_disconnected_debugger_is_not_an_error(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False)
    pydb.pydb_disposed = True
    b.write(1, "x\n")
    b.flush()
    pydb.writer = None
    b.write(1, "y\n")
    b.flush()


@pytest.mark.parametrize(
    "text, most, want",
    [
        ("", 4, []),
        ("ab\ncd\n", 100, ["ab\ncd\n"]),
        ("ab\ncd\nef\n", 7, ["ab\ncd\n", "ef\n"]),
        ("abcdefgh", 3, ["abc", "def", "gh"]),
    ],
)
def test_split_output(rd, text, most, want):
    assert rd._split_output(text, most) == want


# The real thing: debugpy's pydevd redirection of sys.stdout/sys.stderr,
# with a fake writer in place of the socket.
_SCRIPT = textwrap.dedent(
    """
    import json, os, queue, sys
    sys.path.insert(0, sys.argv[1])
    import remote_debug as rd
    debugger = rd._import_debugger()
    from _pydevd_bundle import pydevd_io
    from _pydevd_bundle.pydevd_net_command_factory_json import NetCommandFactoryJson

    class Writer(object):
        def __init__(self):
            self._cmd_queue = queue.Queue()
        def add_command(self, cmd):
            if cmd.as_dict is None:
                cmd.send(None)  # the batcher's marker: nothing on the wire
            else:
                self._cmd_queue.put(cmd.as_dict)

    class PyDB(object):
        def __init__(self):
            self.writer = Writer()
            self.cmd_factory = NetCommandFactoryJson()
            self.stops = []
        def do_wait_suspend(self, *args):
            self.stops.append(self.writer._cmd_queue.qsize())

    pydb = PyDB()
    real_stdout = sys.stdout
    pydevd_io.redirect_stream_to_pydb_io_messages("stdout")
    pydevd_io.redirect_stream_to_pydb_io_messages("stderr")
    batcher = rd._batch_output(pydb)
    for i in range(int(sys.argv[2])):
        print("line %d" % i)
    sys.stdout.flush()
    pydb.do_wait_suspend(None, None, "line", None)
    events = []
    while not pydb.writer._cmd_queue.empty():
        events.append(pydb.writer._cmd_queue.get())
    result = {"batched": batcher is not None, "stops": pydb.stops, "events": events,
              "file": debugger.__file__}
    real_stdout.write("RESULT " + json.dumps(result) + "\\n")
    real_stdout.flush()
    """
)


def _run_redirected(rd, n, env_extra):
    env = real_debugger.env(**env_extra)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, flat.directory(), str(n)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    result = None
    printed = []
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
        else:
            printed.append(line)
    real_debugger.check_loaded_from_dir(result["file"])
    return printed, result


@real_debugger.only("debugpy")
def test_real_pydevd_redirection_is_batched(rd):
    pytest.importorskip("debugpy")
    printed, result = _run_redirected(rd, 1000, {"SPARKDAP_OUTPUT_BATCHING": ""})
    want = ["line %d" % i for i in range(1000)]
    assert printed == want  # the executor log still gets every line, in order
    assert result["batched"]
    events = result["events"]
    assert [e["event"] for e in events] == ["output"] * len(events)
    assert "".join(e["body"]["output"] for e in events) == "".join(w + "\n" for w in want)
    assert len(events) <= 3
    # Everything printed was queued before the worker stopped.
    assert result["stops"] == [len(events)]


@real_debugger.only("debugpy")
def test_batching_can_be_turned_off(rd):
    pytest.importorskip("debugpy")
    printed, result = _run_redirected(rd, 10, {"SPARKDAP_OUTPUT_BATCHING": "0"})
    assert not result["batched"]  # pydevd's own path: one event per write
    assert printed == ["line %d" % i for i in range(10)]


def test_tee_stream_passes_everything_on_in_order(rd, tmp_path):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False)
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        out = rd._tee_stream(log, b, 1)
        b.streams.append(out)
        lines = [
            "zeile %d: \u00e4\u00f6\u00fc \u2603 %s\n" % (i, "y" * (i % 50)) for i in range(5000)
        ]
        for line in lines:
            out.write(line)
        b.flush()  # what a stop or the task's end does
    # The executor log and the debugger both get every byte, in order,
    # multi-byte characters cut by the 64 KiB buffer included.
    assert (tmp_path / "log").read_text(encoding="utf-8") == "".join(lines)
    events = pydb.writer.drain()
    assert text_of(events) == "".join(lines)
    assert len(events) < 20


def test_tee_stream_to_a_stream_without_buffer(rd):
    import io

    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False)
    log = io.StringIO()
    out = rd._tee_stream(log, b, 2)
    b.streams.append(out)
    out.write("a\n")
    out.write("b\n")
    b.flush()
    assert log.getvalue() == "a\nb\n"
    assert pydb.writer.drain() == [("output", "stderr", "a\nb\n")]


class SlowWriter(FakeWriter):
    """A connection slower than the task: a thread sends one command every
    `pause` seconds, as pydevd's writer does behind a slow proxy."""

    def __init__(self, pause):
        FakeWriter.__init__(self)
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send_slowly, args=(pause,), daemon=True)
        self._thread.start()

    def _send_slowly(self, pause):
        while not self._stop.is_set():
            try:
                cmd = self._cmd_queue.get(timeout=0.05)
            except queue.Empty:
                continue
            if hasattr(cmd, "send"):
                cmd.send(None)
            else:
                self.sent.append(cmd)
                time.sleep(pause)

    def stop(self):
        self._stop.set()
        self._thread.join(10)


def test_writer_over_the_cap_waits_for_a_slow_connection_and_nothing_is_lost(rd):
    pydb = FakePyDB()
    pydb.writer = SlowWriter(0.002)
    b = rd._OutputBatcher(pydb, interval=0.01, batch=256, cap=1024, queued=2, event=256, timeout=5)
    try:
        lines = ["line %05d %s\n" % (i, "y" * 40) for i in range(2000)]  # 100 KiB, 100 caps
        for line in lines:
            b.write(1, line)
        b.flush()
        assert b.wait_delivered() == (0, 0)
    finally:
        pydb.writer.stop()
        b.close()
    out = text_of(pydb.writer.sent)
    assert "dropped" not in out
    assert out == "".join(lines)


def test_writer_gives_up_on_a_connection_that_takes_nothing(rd):
    pydb = FakePyDB()  # nothing ever drains pydevd's queue
    b = rd._OutputBatcher(pydb, interval=0.01, cap=100, queued=0, timeout=0.3)
    try:
        start = time.monotonic()
        for i in range(20):
            b.write(1, "line %02d %s\n" % (i, "z" * 40))
        waited = time.monotonic() - start
        # One wait of the timeout, then the rest dropped at once.
        assert 0.25 <= waited < 3, waited
        assert b._dropped > 0
        # The end of the task counts every line: those queued and never
        # sent, those dropped, and the note that says so.
        b.flush()
        lost_bytes, lost_lines = b.wait_delivered(timeout=0.1)
        assert lost_lines == 20 + 1
        assert lost_bytes > 20 * len("line 00 %s\n" % ("z" * 40))
    finally:
        b.close()


def test_the_flusher_waits_for_room_and_drops_nothing(rd):
    # A print loop paused (computing) leaves a line in its stream's buffer;
    # the flusher passes it on while the connection is still behind.
    import threading

    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, cap=100, queued=0, timeout=10, thread=False)
    b.write(1, "x" * 95 + "\n")
    done = []
    flusher = threading.Thread(target=lambda: done.append(b.write(1, "left in the buffer\n")))
    flusher.is_pydev_daemon_thread = True  # as the batcher's own threads are marked
    b._flusher = flusher
    flusher.start()
    time.sleep(0.3)
    assert not done  # waiting for room, not dropping
    b._send(True)  # the connection takes the held batch
    pydb.writer.drain()
    flusher.join(10)
    assert done and b._dropped == 0
    b.flush()
    assert text_of(pydb.writer.drain()) == "x" * 95 + "\nleft in the buffer\n"


def test_pydevd_threads_never_wait(rd):
    import threading

    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, cap=10, queued=0, timeout=30, thread=False)
    b.write(1, "0123456789")
    took = []

    def pydevd_log():
        start = time.monotonic()
        b.write(2, "pydevd says something\n")
        took.append(time.monotonic() - start)

    t = threading.Thread(target=pydevd_log)
    t.is_pydev_daemon_thread = True
    t.start()
    t.join(10)
    assert took and took[0] < 1
    assert b._dropped == len("pydevd says something\n")


def test_end_of_task_waits_for_the_output_to_be_sent(rd):
    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False, timeout=0.3)
    b.write(1, "first\nsecond\n")
    b.flush()
    # Queued but not sent: pydevd's writer has not run.
    assert b.wait_delivered() == (len("first\nsecond\n"), 2)
    pydb.writer.drain()
    assert b.wait_delivered() == (0, 0)
    b.write(2, "ünïcode\n")
    b.flush()
    assert b.wait_delivered(timeout=0.1) == (len("ünïcode\n".encode()), 1)


def _listen():
    import socket

    ln = socket.socket()
    ln.bind(("127.0.0.1", 0))
    ln.listen(4)
    ln.settimeout(10)
    return ln


def test_lost_output_is_reported_in_the_log_and_to_the_proxy(rd):
    import hashlib
    import hmac
    import io

    ln = _listen()
    try:
        st = rd._st()
        token = "t0ken-for-the-loss-report-0123456789"
        st.config = {"proxy": ln.getsockname(), "token": token, "connect_timeout": 5}
        wn, pn = "a" * 32, "b" * 32
        st.hello_nonces = (wn, pn)
        pydb = FakePyDB()
        b = rd._OutputBatcher(pydb, thread=False, timeout=0.2)
        b.log = io.StringIO()
        rd._output = (rd.os.getpid(), b)
        try:
            b.write(1, "never sent 1\nnever sent 2\n")
            start = time.monotonic()
            rd._flush_output()
            assert time.monotonic() - start < 3
        finally:
            rd._output = None
        nbytes = len("never sent 1\nnever sent 2\n")
        assert (
            "%d bytes (2 lines) of this task's output did not reach the debugger" % nbytes
            in b.log.getvalue()
        )
        conn, _ = ln.accept()
        with conn:
            conn.settimeout(10)
            got = b""
            while not got.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                got += chunk
        # admission/challenge.go's form, computed here independently.
        msg = "sparkdap/2 lost\n%s\n%s\n%d\n2" % (wn, pn, nbytes)
        proof = hmac.new(token.encode(), msg.encode(), hashlib.sha256).hexdigest()
        assert got == ("SPARKDAP/2 LOST %s %s %d 2 %s\n" % (wn, pn, nbytes, proof)).encode()
    finally:
        ln.close()


def test_nothing_lost_nothing_reported(rd):
    import io

    pydb = FakePyDB()
    b = rd._OutputBatcher(pydb, thread=False, timeout=0.2)
    b.log = io.StringIO()
    rd._output = (rd.os.getpid(), b)
    try:
        b.write(1, "sent\n")
        b.flush()
        pydb.writer.drain()
        rd._flush_output()
    finally:
        rd._output = None
    assert b.log.getvalue() == ""


# pydevd's own WriterThread on a socket pair: its markers run in every
# debugger of the matrix, and a peer that stops reading is noticed.
_WRITER_SCRIPT = textwrap.dedent(
    """
    import json, re, socket, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    import remote_debug as rd
    if sys.argv[5] == "pydevd-pycharm":
        import pydevd_pycharm as debugger
    else:
        debugger = rd._import_debugger()
    from _pydevd_bundle.pydevd_comm import WriterThread
    try:
        from _pydevd_bundle.pydevd_net_command_factory_json import NetCommandFactoryJson as Factory
    except ImportError:
        try:
            from _pydevd_bundle.pydevd_net_command_factory_xml import NetCommandFactory as Factory
        except ImportError:  # pydevd-pycharm
            from _pydevd_bundle.pydevd_comm import NetCommandFactory as Factory

    class PyDB(object):
        def __init__(self):
            self.created_pydb_daemon_threads = {}
            self.dap_messages_listeners = []
            self.cmd_factory = Factory()
            self.pydb_disposed = False

    ours, peer = socket.socketpair()
    pydb = PyDB()
    pydb.writer = WriterThread(ours, pydb)
    pydb.writer.daemon = True
    pydb.writer.start()
    batcher = rd._OutputBatcher(pydb, timeout=float(sys.argv[3]))
    got = []
    reader = None
    if sys.argv[2] == "read":
        def read():
            while True:
                chunk = peer.recv(1 << 16)
                if not chunk:
                    return
                got.append(chunk)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
    n = int(sys.argv[4])
    for i in range(n):
        batcher.write(1, "L%07d %s\\n" % (i, "p" * 60))
    batcher.flush()
    start = time.monotonic()
    lost = batcher.wait_delivered()
    took = time.monotonic() - start
    if reader is not None:
        # What was written is in the socket: the peer reads it all.
        ours.shutdown(socket.SHUT_WR)
        reader.join(30)
    data = b"".join(got)
    order = [int(x) for x in re.findall(rb"L(\\d{7})", data)]
    print("RESULT " + json.dumps({"lost": lost, "took": took, "file": debugger.__file__,
                                  "complete": order == list(range(n))}))
    sys.stdout.flush()
    """
)


def _run_writer(kind, mode, timeout, n):
    proc = subprocess.run(
        [sys.executable, "-c", _WRITER_SCRIPT, flat.directory(), mode, str(timeout), str(n), kind],
        capture_output=True,
        text=True,
        timeout=120,
        env=real_debugger.env(),
    )
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT ") :])
    real_debugger.check_loaded_from_dir(result["file"])
    return result


@pytest.mark.real_debugger
@pytest.mark.parametrize("kind", real_debugger.kinds())
def test_real_pydevd_writer_reports_what_it_sent(rd, kind):
    result = _run_writer(kind, "read", 10, 20000)
    assert result["lost"] == [0, 0]
    assert result["complete"]  # every line, once, in order, none cut short


@pytest.mark.real_debugger
@pytest.mark.parametrize("kind", real_debugger.kinds())
def test_real_pydevd_writer_to_a_peer_that_reads_nothing(rd, kind):
    # 4.8 MB: many times what the socket pair's buffers hold.
    result = _run_writer(kind, "freeze", 0.5, 60000)
    lost_bytes, lost_lines = result["lost"]
    assert lost_bytes > 0 and lost_lines > 0
    assert result["took"] < 10
