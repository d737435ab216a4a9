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

    def drain(self):
        while True:
            try:
                self.sent.append(self._cmd_queue.get_nowait())
            except queue.Empty:
                return self.sent


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
        while pydb.writer._cmd_queue.qsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        b.write(2, "two\n")
        b.request_flush()
        while pydb.writer._cmd_queue.qsize() < 2 and time.monotonic() < deadline:
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
