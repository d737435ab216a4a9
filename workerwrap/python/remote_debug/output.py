"""Output batching: a debugged worker's stdout and stderr reach the IDE in
batches, whole and in order; the task waits for the debugger only while
its connection is behind, and never longer than the connection stalls."""

import os
import sys

from .hello import _mac
from .state import _describe, _say, _st
from .pydevd_compat import (
    _around_stops,
    _global_debugger,
    _hide_from_pydevd,
    _io_message_limit,
    _output_redirects,
    _output_sink_gone,
    _queue_marker,
    _queue_output,
    _take_output_redirects,
    _writer_backlog,
)


#
# With the attach's redirectOutput, pydevd puts an IORedirector on sys.stdout
# and sys.stderr (_pydevd_bundle.pydevd_io): every write() goes to the
# original stream and becomes one DAP output event on pydevd's writer queue,
# an unbounded queue.Queue. A print() is two writes, so a chatty task makes
# thousands of events a second (~0.25 MB/s of output), and whatever the
# socket does not take piles up in that queue without limit. pydevd's
# RedirectToPyDBIoMessages has an on_write hook (_on_write) for exactly this:
# the wrapper points it at an _OutputBatcher, so the original stream (the
# executor log) still gets every write at once, in order, from pydevd's
# IORedirector, and the debugger gets one event per batch.

_OUTPUT_INTERVAL = 0.05  # seconds a write waits at most before it is sent
_OUTPUT_BATCH = 32 << 10  # characters that wake the sender at once
_OUTPUT_EVENT = 64 << 10  # characters per output event at most
_OUTPUT_CAP = 4 << 20  # characters held back at most; a writer over it waits
# Commands in pydevd's writer queue that mean "backed up": each output
# event is followed by its _Delivered marker.
_OUTPUT_QUEUED = 32
# Seconds a writer over the cap, and the end-of-task flush, wait for the
# connection to take some output before they give up on it; the flush
# waits _FLUSH_MOST seconds at most in all, however slowly it moves.
_FLUSH_TIMEOUT = 5.0
_FLUSH_MOST = 120.0

_output = None  # (pid, _OutputBatcher) of this process, once installed


def _split_output(text, most):
    """text in pieces of at most `most` characters, cut after a newline
    where there is one, so that lines stay whole in the IDE."""
    # By offsets: cutting the rest off each time would copy a whole held
    # batch (4 MiB) once per piece.
    pieces = []
    start, end = 0, len(text)
    while end - start > most:
        cut = text.rfind("\n", start, start + most) + 1
        if cut <= start:
            cut = start + most
        pieces.append(text[start:cut])
        start = cut
    if start < end:
        pieces.append(text[start:] if start else text)
    return pieces


class _Delivered:
    """A command on pydevd's writer queue that writes nothing: pydevd's
    writer thread sends its commands one at a time, in order, with a
    blocking sendall, so when it calls this one's send(), the output queued
    before it is in the socket. Every pydevd the wrapper loads has that
    loop (WriterThread._on_run: cmd.as_dict, cmd.send(sock), cmd.id)."""

    as_dict = None  # no DAP message: pydevd's listeners never see it
    id = -1  # no command of pydevd's (CMD_EXIT ends the writer)

    def __init__(self, batcher, nbytes, nlines):
        self._batcher = batcher
        self._bytes = nbytes
        self._lines = nlines

    def send(self, sock):
        self._batcher._delivered(self._bytes, self._lines)


class _OutputBatcher:
    """Collects a worker's stdout/stderr writes and hands them to pydevd's
    writer as one output event per run of one stream (at most `event`
    characters each): every `interval` seconds, as soon as `batch`
    characters are held, on flush requests, before the worker stops at a
    breakpoint and at the end of each task.

    Never blocks a writer on the debugger: write() only appends under a
    short lock; pydevd is called by the batching thread, or by flush() from
    a thread that is about to stop or has finished its task. While pydevd's
    writer queue holds more than `queued` commands (the proxy or the network
    is slower than the task's output) the batcher keeps the output itself,
    up to `cap` characters. Beyond that a writer waits for room while the
    connection takes output, and drops its write only once the connection
    took nothing for `timeout` seconds; the next batch then says so with a
    "[sparkdap: N bytes of output dropped ...]" line where they were. Order
    within and across the two streams is kept.

    Each output event is followed on pydevd's queue by a _Delivered marker,
    so the batcher knows how much of its output pydevd has written to the
    socket:
    the end of a task (wait_delivered) waits for all of it, and what did
    not go in time is reported as lost (_report_loss).

    Threads: the sender thread queues batches on pydevd's writer; the
    flusher thread empties the tee streams' buffers into the batcher
    every interval. They are two because a writer waiting for room holds
    its stream's buffer lock, which the flusher then waits for: the
    sender must not. The flusher waits for room like any writer; the
    sender and pydevd's threads, which make the room, never do.

    Locks: _lock guards the held output (_segments, _held, _dropped,
    _dropped_ctx, _flush_soon, _closed) and the counts (_queued_*,
    _delivered_*, _taken); nothing is called under it. _room and _progress
    are conditions on it. _send_lock (taken before _lock, never inside it)
    is held from taking a batch until it is queued, so two senders cannot
    reorder batches; pydevd is called under it only. A write from inside
    pydevd's calls (pydevd logging to stderr) takes only _lock and never
    waits, so it cannot deadlock."""

    def __init__(
        self,
        pydb,
        interval=_OUTPUT_INTERVAL,
        batch=_OUTPUT_BATCH,
        cap=_OUTPUT_CAP,
        queued=_OUTPUT_QUEUED,
        event=_OUTPUT_EVENT,
        thread=True,
        timeout=_FLUSH_TIMEOUT,
    ):
        import threading

        self._pydb = pydb
        self.interval = interval
        self.batch = batch
        self.cap = cap
        self.queued = queued
        # pydevd would cut a longer event short: pieces of its limit.
        limit = _io_message_limit(pydb)
        self.event = min(event, limit) if limit else event
        self.timeout = timeout
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._room = threading.Condition(self._lock)  # held output went out
        self._progress = threading.Condition(self._lock)  # a marker was sent
        self._send_lock = threading.RLock()
        self._segments = []  # [ctx, [str, ...]]: ctx 1 stdout, 2 stderr
        self._held = 0
        self._dropped = 0
        self._dropped_ctx = 2
        self._flush_soon = False
        self._closed = False
        # Output queued on pydevd's writer, and of that what it has sent
        # (the latest _Delivered marker's), in UTF-8 bytes and lines; and
        # how many batches were taken, which is what a writer waiting for
        # room watches.
        self._queued_bytes = self._queued_lines = 0
        self._delivered_bytes = self._delivered_lines = 0
        self._taken = 0
        # Dropped since the last end of task: reported with what did not
        # go (wait_delivered), as the note in the stream may not go either.
        self._dropped_unreported = self._dropped_unreported_lines = 0
        self._mine = threading.local()  # .sending: this thread is in _send
        self.events = 0  # output commands queued (tests, benchmark)
        self.streams = []  # the tee streams feeding this batcher, flushed each interval
        self.log = None  # the original stderr (the executor log), for the loss line
        self._threads = []
        self._flusher = None
        if thread:
            for target, name in (
                (self._run, "sparkdap-output"),
                (self._flush_streams_loop, "sparkdap-output-flush"),
            ):
                t = threading.Thread(target=target, name=name)
                t.daemon = True
                _hide_from_pydevd(t)  # from the IDE's thread list, and never traced
                self._threads.append(t)
            self._flusher = self._threads[1]
            for t in self._threads:
                t.start()

    def write(self, ctx, s):
        if not s:
            return
        if isinstance(s, bytes):
            s = s.decode(getattr(sys.stdout, "encoding", None) or "utf-8", "replace")
        elif not isinstance(s, str):
            return
        with self._lock:
            if self._closed:
                return
            if not self._dropped and self._held + len(s) > self.cap and self._may_wait():
                self._wait_for_room(len(s))
            # Once dropping, drop until a batch went out: a later write
            # that fits must not overtake the ones dropped before it. One
            # write bigger than the cap goes alone.
            if self._dropped or (self._held and self._held + len(s) > self.cap):
                if not self._dropped:
                    self._dropped_ctx = ctx
                n = len(s.encode("utf-8", "replace"))
                self._dropped += n
                self._dropped_unreported += n
                self._dropped_unreported_lines += s.count("\n")
                return
            if self._segments and self._segments[-1][0] == ctx:
                self._segments[-1][1].append(s)
            else:
                self._segments.append([ctx, [s]])
            was_empty = self._held == 0
            self._held += len(s)
            if self._held >= self.batch and not self._flush_soon:
                self._flush_soon = True
                self._wake.notify()
            elif was_empty:
                self._wake.notify()

    def _may_wait(self):
        """Whether the writing thread may wait for room: not pydevd's (its
        writer is what makes room), not the sender's, and not one queuing
        a batch (pydevd logging from inside the call). The flusher may: it
        passes on what a print left in a stream's buffer, which would be
        lost if it could not wait, and only writers need the stream."""
        import threading

        if getattr(self._mine, "sending", False):
            return False
        t = threading.current_thread()
        if t is self._flusher:
            return True
        return not (t in self._threads or getattr(t, "is_pydev_daemon_thread", False))

    def _wait_for_room(self, n):
        """Under _lock: waits until n more characters fit under the cap, as
        long as the connection takes some output every `timeout` seconds."""
        import time

        self._flush_soon = True
        self._wake.notify()
        seen = (self._taken, self._delivered_bytes)
        last = time.monotonic()
        while self._held and self._held + n > self.cap and not self._closed:
            now = time.monotonic()
            if (self._taken, self._delivered_bytes) != seen:
                seen, last = (self._taken, self._delivered_bytes), now
            left = last + self.timeout - now
            if left <= 0 or _output_sink_gone(self._pydb):
                return
            self._room.wait(min(left, self.interval))

    def _delivered(self, nbytes, nlines):
        """A _Delivered marker's send(), on pydevd's writer thread."""
        with self._lock:
            if nbytes > self._delivered_bytes:
                self._delivered_bytes, self._delivered_lines = nbytes, nlines
            self._progress.notify_all()
            self._room.notify_all()

    def wait_delivered(self, timeout=None, most=_FLUSH_MOST):
        """Waits until pydevd has written to the socket all the output
        queued so far, and the kernel has sent it, giving up once nothing
        went for `timeout` seconds (the batcher's by default) or after
        `most` in all. Returns the (bytes, lines) that will not reach the
        debugger, since the last call: what pydevd did not write (bytes it
        wrote are sent by the kernel even once the worker exits), and what
        writers dropped. (0, 0) when all went, or when pydevd dropped it
        itself because the debugger session is over."""
        import time

        timeout = self.timeout if timeout is None else timeout
        start = time.monotonic()
        with self._lock:
            want_bytes, want_lines = self._queued_bytes, self._queued_lines
            last = start
            seen = self._delivered_bytes
            while self._delivered_bytes < want_bytes:
                if _output_sink_gone(self._pydb):
                    return 0, 0
                now = time.monotonic()
                if self._delivered_bytes != seen:
                    seen, last = self._delivered_bytes, now
                left = min(last + timeout, start + most) - now
                if left <= 0:
                    break
                self._progress.wait(min(left, 0.5))
            lost_bytes = max(0, want_bytes - self._delivered_bytes) + self._dropped_unreported
            lost_lines = max(0, want_lines - self._delivered_lines) + self._dropped_unreported_lines
            self._dropped_unreported = self._dropped_unreported_lines = 0
        if self._delivered_bytes >= want_bytes:
            # What pydevd wrote reaches the proxy even if the worker exits
            # now, unless its close turns into a reset (bytes from the
            # proxy left unread): let the kernel send it while it moves.
            _wait_unsent(self._pydb, timeout, start + most)
        return lost_bytes, lost_lines

    def request_flush(self):
        """sys.stdout.flush(): sent by the batching thread at once, but not
        by the caller, so that a print(..., flush=True) loop still batches."""
        with self._lock:
            self._flush_soon = True
            self._wake.notify()

    def flush(self):
        """Hands everything written so far to pydevd now, backed-up queue or
        not: the task ended or the worker is about to stop, and the user
        must see its output up to there before the stop."""
        for stream in list(self.streams):
            try:
                stream.flush()
            except Exception:
                pass
        self._send(True)

    def close(self):
        self._send(True)
        with self._lock:
            self._closed = True
            self._wake.notify()

    def _backed_up(self):
        backlog = _writer_backlog(self._pydb)
        return backlog is not None and backlog > self.queued

    def _send(self, force):
        """Queues what is held on pydevd's writer. Returns False when it
        held back because pydevd's queue is backed up."""
        with self._send_lock:
            if not force and self._backed_up():
                return False
            with self._lock:
                segments, self._segments, self._held = self._segments, [], 0
                self._flush_soon = False
                if self._dropped:
                    note = (
                        "[sparkdap: %d bytes of output dropped: the debugger connection could not "
                        "keep up]\n" % (self._dropped,)
                    )
                    segments.append([self._dropped_ctx, [note]])
                    self._dropped = 0
                if segments:
                    self._taken += 1
                    self._room.notify_all()
            pydb = self._pydb
            if not segments or _output_sink_gone(pydb):
                return True  # pydevd itself drops output once disconnected
            self._mine.sending = True
            try:
                for ctx, parts in segments:
                    for text in _split_output("".join(parts), self.event):
                        # A marker behind each event: a slow connection is
                        # seen to move one event at a time.
                        try:
                            _queue_output(pydb, text, ctx)
                            self.events += 1
                            with self._lock:
                                self._queued_bytes += len(text.encode("utf-8", "replace"))
                                self._queued_lines += text.count("\n")
                                marker = _Delivered(self, self._queued_bytes, self._queued_lines)
                            _queue_marker(pydb, marker)
                        except Exception:
                            pass
            finally:
                self._mine.sending = False
            return True

    def _run(self):
        import time

        while True:
            with self._lock:
                if not self._closed and not self._flush_soon:
                    self._wake.wait(self.interval)
                if self._closed:
                    return
            if not self._send(False):
                time.sleep(self.interval)  # backed up: look again later

    def _flush_streams_loop(self):
        """What print() left in the streams' buffers (_TeeRaw) comes to the
        batcher every interval, then goes out with the next batch."""
        import time

        while not self._closed:
            time.sleep(self.interval)
            for stream in list(self.streams):
                try:
                    stream.flush()
                except Exception:
                    pass


def _wait_unsent(pydb, timeout, until):
    """Waits while pydevd's socket holds bytes the proxy has not
    acknowledged (SIOCOUTQ, Linux), as long as their count goes down
    within `timeout` seconds and until the monotonic time `until`.
    Elsewhere, or on any error, returns at once."""
    import time

    try:
        import fcntl
        import struct
        import termios

        fd = pydb.writer.sock.fileno()

        def unsent():
            return struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0\0\0\0"))[0]

        left = unsent()
        last = time.monotonic()
        while left > 0:
            now = time.monotonic()
            if now >= until or now - last >= timeout:
                return
            time.sleep(0.005)
            n = unsent()
            if n < left:
                last = now
            left = n
    except Exception:
        return


def _tee_raw_class():
    import io

    class _TeeRaw(io.RawIOBase):
        """The bottom of the sys.stdout/sys.stderr the wrapper installs: a
        TextIOWrapper and BufferedWriter (both C) collect what print()
        writes, and only a full buffer or a flush reaches this Python code,
        which passes the bytes on to the original stream (the executor log)
        and, decoded, to the batcher. pydevd's own redirection costs two
        Python calls per print(), each also seen by pydevd's tracer."""

        def __init__(self, orig, batcher, ctx, encoding):
            import codecs

            io.RawIOBase.__init__(self)
            self._orig = orig
            self._batcher = batcher
            self._ctx = ctx
            self._decoder = codecs.getincrementaldecoder(encoding)("replace")

        def writable(self):
            return True

        def write(self, b):
            data = bytes(b)
            text = self._decoder.decode(data)
            orig = self._orig
            buf = getattr(orig, "buffer", None)
            try:
                if buf is not None:
                    orig.flush()  # text written to the original before us goes first
                    buf.write(data)
                else:
                    orig.write(text)
                orig.flush()
            finally:
                self._batcher.write(self._ctx, text)
            return len(data)

        def fileno(self):
            return self._orig.fileno()

        def isatty(self):
            return self._orig.isatty()

    return _TeeRaw


def _tee_stream(orig, batcher, ctx):
    """A text stream like orig (encoding, errors, line buffering) whose
    output goes to orig and to the batcher."""
    import io

    encoding = getattr(orig, "encoding", None) or "utf-8"
    raw = _tee_raw_class()(orig, batcher, ctx, encoding)
    stream = io.TextIOWrapper(
        io.BufferedWriter(raw, 64 << 10),
        encoding=encoding,
        errors=getattr(orig, "errors", None) or "strict",
        line_buffering=bool(getattr(orig, "line_buffering", False)),
    )
    stream._sparkdap_tee = True
    return stream


def _batch_output(pydb=None):
    """Installs output batching on this worker's pydevd redirection (once
    per process): sys.stdout and sys.stderr, where pydevd's IORedirector is,
    become buffered tee streams (_tee_stream) to the original streams and
    the batcher; whoever kept a reference to pydevd's redirector (a logging
    handler made earlier) reaches the batcher through pydevd's on_write
    hook. SPARKDAP_OUTPUT_BATCHING=0 leaves pydevd's one event per write
    (the benchmark's baseline). Never raises."""
    global _output
    try:
        if os.environ.get("SPARKDAP_OUTPUT_BATCHING", "").strip().lower() in (
            "0",
            "false",
            "no",
            "off",
        ):
            return None
        if _output is not None and _output[0] == os.getpid():
            return _output[1]
        pydb = pydb or _global_debugger()
        redirects = _output_redirects()
        if pydb is None or not redirects:
            return None
        cfg = _st().config or {}
        batcher = _OutputBatcher(pydb, timeout=cfg.get("output_flush_timeout", _FLUSH_TIMEOUT))

        def hook(ctx):
            def on_write(s):
                batcher.write(ctx, s)

            return on_write

        for ctx, std, redirector, orig in _take_output_redirects(
            redirects, hook, batcher.request_flush
        ):
            if getattr(sys, std) is redirector and orig is not None:
                stream = _tee_stream(orig, batcher, ctx)
                batcher.streams.append(stream)
                if ctx == 2:
                    batcher.log = orig
                setattr(sys, std, stream)
        # pydevd queues the stopped event as the thread stops: the output
        # before it goes first.
        _around_stops(pydb, before=batcher.flush)
        _output = (os.getpid(), batcher)
        return batcher
    except Exception as exc:
        _say(
            "output batching unavailable, output goes to the debugger unbatched: %s"
            % (_describe(exc),)
        )
        return None


def _flush_output(timeout=None):
    """At the end of a task: its output reaches the proxy before the next
    task's, and before the worker may exit (a worker is killed when its
    job ends). Waits for pydevd to have written it all, as long as the
    connection takes some every `timeout` seconds (the setting
    output_flush_timeout); what did not go is reported (_report_loss)."""
    if _output is None or _output[0] != os.getpid():
        return
    batcher = _output[1]
    try:
        batcher.flush()
        lost_bytes, lost_lines = batcher.wait_delivered(timeout)
    except Exception:
        return
    if lost_bytes:
        _report_loss(batcher, lost_bytes, lost_lines)


def _report_loss(batcher, lost_bytes, lost_lines):
    """Says in the executor log, and to the proxy on a connection of its
    own (the debugger's is stuck), how much of the task's output did not
    reach the debugger. Never raises, never waits longer than a connect."""
    timeout = batcher.timeout
    line = (
        "sparkdap: [pid %d] %d bytes (%d lines) of this task's output did not reach the "
        "debugger: the connection took none of it for %g s; they are in this log\n"
        % (os.getpid(), lost_bytes, lost_lines, timeout)
    )
    log = batcher.log or sys.__stderr__
    try:
        log.write(line)
        log.flush()
    except Exception:
        pass
    st = _st()
    cfg = st.config
    if not cfg or not st.hello_nonces or not cfg.get("token"):
        return
    wn, pn = st.hello_nonces
    try:
        import socket

        host, port = cfg["proxy"]
        sock = socket.create_connection(
            (host, port), timeout=min(2.0, cfg.get("connect_timeout", 2.0))
        )
        try:
            sock.sendall(_loss_line(cfg["token"], wn, pn, lost_bytes, lost_lines))
        finally:
            sock.close()
    except Exception as exc:
        _say("could not tell the proxy of the output lost: %s" % (_describe(exc),))


def _loss_line(token, wn, pn, lost_bytes, lost_lines):
    """The LOST line (admission/challenge.go reads it): the counts, the
    hello's nonces that name this worker, and the proof that the sender
    holds the token."""
    proof = _mac(token, "sparkdap/2 lost", wn, "%s\n%d\n%d" % (pn, lost_bytes, lost_lines))
    return ("SPARKDAP/2 LOST %s %s %d %d %s\n" % (wn, pn, lost_bytes, lost_lines, proof)).encode(
        "ascii"
    )
