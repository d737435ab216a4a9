"""Output batching: a debugged worker's stdout and stderr reach the IDE in
batches, never blocking the task on the debugger."""

import os
import sys

from .state import _describe, _say
from .pydevd_compat import (
    _around_stops,
    _global_debugger,
    _hide_from_pydevd,
    _output_redirects,
    _output_sink_gone,
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
_OUTPUT_CAP = 4 << 20  # characters held back at most; more are dropped
_OUTPUT_QUEUED = 16  # commands in pydevd's writer queue that mean "backed up"

_output = None  # (pid, _OutputBatcher) of this process, once installed


def _split_output(text, most):
    """text in pieces of at most `most` characters, cut after a newline
    where there is one, so that lines stay whole in the IDE."""
    pieces = []
    while len(text) > most:
        cut = text.rfind("\n", 0, most) + 1
        if cut <= 0:
            cut = most
        pieces.append(text[:cut])
        text = text[cut:]
    if text:
        pieces.append(text)
    return pieces


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
    up to `cap` characters. Beyond that it drops writes, and the next batch
    says so with a "[sparkdap: N bytes of output dropped ...]" line where
    they were. Order within and across the two streams is kept.

    Locks: _lock guards the held output (_segments, _held, _dropped,
    _dropped_ctx, _flush_soon, _closed); nothing is called under it.
    _send_lock (taken before _lock, never inside it) is held from taking a
    batch until it is queued, so two senders cannot reorder batches; pydevd
    is called under it only. A write from inside pydevd's calls (pydevd
    logging to stderr) takes only _lock, so it cannot deadlock."""

    def __init__(
        self,
        pydb,
        interval=_OUTPUT_INTERVAL,
        batch=_OUTPUT_BATCH,
        cap=_OUTPUT_CAP,
        queued=_OUTPUT_QUEUED,
        event=_OUTPUT_EVENT,
        thread=True,
    ):
        import threading

        self._pydb = pydb
        self.interval = interval
        self.batch = batch
        self.cap = cap
        self.queued = queued
        self.event = event
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._send_lock = threading.RLock()
        self._segments = []  # [ctx, [str, ...]]: ctx 1 stdout, 2 stderr
        self._held = 0
        self._dropped = 0
        self._dropped_ctx = 2
        self._flush_soon = False
        self._closed = False
        self.events = 0  # output commands queued (tests, benchmark)
        self.streams = []  # the tee streams feeding this batcher, flushed each interval
        self._thread = None
        if thread:
            self._thread = threading.Thread(target=self._run, name="sparkdap-output")
            self._thread.daemon = True
            _hide_from_pydevd(self._thread)  # from the IDE's thread list, and never traced
            self._thread.start()

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
            # Once dropping, drop until a batch went out: a later write
            # that fits must not overtake the ones dropped before it.
            if self._dropped or self._held + len(s) > self.cap:
                if not self._dropped:
                    self._dropped_ctx = ctx
                self._dropped += len(s.encode("utf-8", "replace"))
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
            pydb = self._pydb
            if not segments or _output_sink_gone(pydb):
                return True  # pydevd itself drops output once disconnected
            for ctx, parts in segments:
                for text in _split_output("".join(parts), self.event):
                    try:
                        _queue_output(pydb, text, ctx)
                        self.events += 1
                    except Exception:
                        pass
            return True

    def _run(self):
        import time

        while True:
            with self._lock:
                if not self._closed and not self._flush_soon:
                    self._wake.wait(self.interval)
                if self._closed:
                    return
            # What print() left in the streams' buffers (_TeeRaw) comes to
            # the batcher here, then goes out in one event per stream run.
            for stream in list(self.streams):
                try:
                    stream.flush()
                except Exception:
                    pass
            if not self._send(False):
                time.sleep(self.interval)  # backed up: look again later


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
        batcher = _OutputBatcher(pydb)

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


def _flush_output():
    """At the end of a task: its output reaches the debugger before the
    next task's (and before the worker may exit)."""
    if _output is not None and _output[0] == os.getpid():
        try:
            _output[1].flush()
        except Exception:
            pass
