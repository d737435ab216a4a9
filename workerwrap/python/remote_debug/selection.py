"""The live selection: which tasks this worker debugs, as the proxy says while
the job runs (package selection in sparkdap's source is the other side).

Each worker process opens one watch connection at its first task, with a
hello whose body says "watch", and keeps it for its life. It carries lines:

    proxy -> worker:  SPARKDAP/2 SELECT <selection as JSON, or null>
    worker -> proxy:  SPARKDAP/2 TASK {"stageId":...,"selected":...}
    worker -> proxy:  SPARKDAP/2 IDLE

A thread of its own reads the selections and keeps the last one in the
worker's state (st.live, one assignment of a value never changed after);
the main thread decides each task from that copy with no round trip, and
reports the task and its end with sends that never wait. Anything that goes
wrong ends the watch with one line, and the worker selects tasks by the
settings it was submitted with (cfg), as without a watch."""

import os

from .state import _describe, _said_count, _say
from .backoff import _proxy_heard, _proxy_silent, _skip_reason
from .task import _executor_id, _selected
from .hello import (
    _HELLO,
    _hello_accepted,
    _hello_with_retries,
    _NoHelloReply,
    _ProxyUnproven,
    _sparkdap_version,
)

# How long the first task of a worker waits for the watch's hello and the
# selection that follows it, so that a worker started after a change
# already decides by it. Later tasks never wait.
_FIRST_TASK_WAIT = 1.0

# Bounds on what a watch reads (selection.MaxIDs and friends on the proxy's
# side): a longer line ends the watch.
_MAX_SELECT_LINE = 65536
_MAX_SELECT_IDS = 4096
_MAX_SELECT_EXECUTORS = 1024
_MAX_EXECUTOR_CHARS = 128

_SELECTION_KEYS = frozenset(("partitions", "stages", "executors", "sampleRate"))
_IDLE_LINE = _HELLO + b"IDLE\n"
_BAKED_NOTE = "; this worker selects tasks by the settings the job was submitted with"


def _parse_ids_list(name, value):
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError("%s: not a list" % name)
    if len(value) > _MAX_SELECT_IDS:
        raise ValueError("%s: more than %d ids" % (name, _MAX_SELECT_IDS))
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError("%s: %r is no id" % (name, v))
    return frozenset(value)


def _parse_executors_list(value):
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError("executors: not a list")
    if len(value) > _MAX_SELECT_EXECUTORS:
        raise ValueError("executors: more than %d" % _MAX_SELECT_EXECUTORS)
    for v in value:
        if (
            not isinstance(v, str)
            or not v
            or len(v) > _MAX_EXECUTOR_CHARS
            or any(c < " " or c == "\x7f" for c in v)
        ):
            raise ValueError("executors: %r is no executor id" % (v,))
    return frozenset(value)


def _parse_selection(data):
    """A SELECT line's JSON (bytes): None for null (the settings the job was
    submitted with), else the selection in the keys task._selected reads.
    Raises ValueError on anything else."""
    import json

    def constant(name):
        raise ValueError("%s is not JSON" % name)

    value = json.loads(data.decode("utf-8"), parse_constant=constant)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("not an object")
    if set(value) != _SELECTION_KEYS:
        raise ValueError("keys %s, want %s" % (sorted(value), sorted(_SELECTION_KEYS)))
    rate = value["sampleRate"]
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (0 < rate <= 1):
        raise ValueError("sampleRate %r is not in (0, 1]" % (rate,))
    return {
        "partitions": _parse_ids_list("partitions", value["partitions"]),
        "stages": _parse_ids_list("stages", value["stages"]),
        "executors": _parse_executors_list(value["executors"]),
        "sample_rate": float(rate),
    }


class _Watch:
    """One worker process's watch connection. Only its thread reads the
    socket and closes it; only the main thread writes to it (send)."""

    def __init__(self, st, cfg):
        import socket
        import threading

        self.st = st
        self.cfg = cfg
        host, port = cfg["proxy"]
        self.where = "proxy %s:%d" % (host, port)
        self.sock = None
        self.thread = None
        self.open = False  # the hello was accepted: the main thread may send
        self.closed = False
        self.busy = False  # a TASK line went out with no IDLE after it
        self.lock = threading.Lock()  # closed, note, and st.live with it
        # Why the watch ended, said at the end of the task (_say_watch_note)
        # unless the worker said something else since the watch started:
        # the worker's one line about an unreachable proxy is its debugger's
        # when a task was selected.
        self.note = None
        self.said_before = _said_count()
        # Set once the first selection was read, or the watch ended.
        self.ready = threading.Event()
        self.flags = getattr(socket, "MSG_DONTWAIT", 0) | getattr(socket, "MSG_NOSIGNAL", 0)

    def end(self, msg):
        """Ends the watch, once: the worker selects by its settings from now
        on. Says msg unless the watch had already ended."""
        with self.lock:
            if self.closed:
                return False
            self.closed = True
            self.open = False
            self.st.live = None
            self.note = msg or None
        self.ready.set()
        return True

    def run(self):
        try:
            self.serve()
        except Exception as exc:
            self.end("selection watch failed (%s)%s" % (_describe(exc), _BAKED_NOTE))
        finally:
            self.ready.set()
            if self.sock is not None:
                try:
                    self.sock.close()
                except Exception:
                    pass

    def serve(self):
        import socket

        cfg = self.cfg
        where = self.where
        host, port = cfg["proxy"]
        body = {
            "watch": True,
            "executorId": _executor_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "label": "",
            "sparkdapVersion": _sparkdap_version(cfg),
        }
        keep = []
        try:
            reply, _ = _hello_with_retries(
                lambda: socket.create_connection((host, port), timeout=cfg["connect_timeout"]),
                cfg["token"],
                body,
                cfg["handshake_timeout"],
                cfg["connect_timeout"],
                keep=keep,
            )
        except _ProxyUnproven:
            return self.end(
                "%s did not prove it knows the access token to the selection watch%s"
                % (where, _BAKED_NOTE)
            )
        except _NoHelloReply:
            return self.end(
                "%s accepted the selection watch but did not answer its hello within %gs%s%s"
                % (where, cfg["handshake_timeout"], _proxy_silent(cfg), _BAKED_NOTE)
            )
        except Exception as exc:
            if isinstance(exc, TimeoutError) or "timed out" in str(exc):
                return self.end(
                    "%s unreachable for the selection watch: no connection within %gs%s%s"
                    % (where, cfg["connect_timeout"], _proxy_silent(cfg), _BAKED_NOTE)
                )
            return self.end(
                "%s unreachable for the selection watch: %s%s"
                % (where, _describe(exc), _BAKED_NOTE)
            )
        sock, rest = keep
        self.sock = sock
        _proxy_heard(cfg)
        accepted, detail = _hello_accepted(reply)
        if not accepted:
            # A proxy without live selection (an older serve) says so; the
            # worker then works as it did with one, and says nothing.
            return self.end(
                None
                if "no live selection" in (detail or "")
                else "%s takes no selection watch (%s)%s" % (where, detail or reply, _BAKED_NOTE)
            )
        # Blocking from now on: this thread waits in recv, and the main
        # thread's sends pass MSG_DONTWAIT.
        sock.settimeout(None)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        except OSError:
            pass
        with self.lock:
            if self.closed:
                return None
            self.open = True
        return self.read(sock, rest)

    def read(self, sock, buf):
        """Reads SELECT lines until the watch ends."""
        while True:
            end = buf.find(b"\n")
            while 0 <= end <= _MAX_SELECT_LINE:
                line, buf = buf[:end], buf[end + 1 :]
                # Lines before the proxy's own (pydevd's) are skipped.
                if line.startswith(_HELLO) and not self.line(line[len(_HELLO) :]):
                    return None
                end = buf.find(b"\n")
            if end > _MAX_SELECT_LINE or len(buf) > _MAX_SELECT_LINE:
                return self.end(
                    "%s sent a line longer than %d bytes on the selection watch%s"
                    % (self.where, _MAX_SELECT_LINE, _BAKED_NOTE)
                )
            try:
                chunk = sock.recv(65536)
            except OSError as exc:
                return self.end(
                    "selection watch to %s broke (%s)%s" % (self.where, _describe(exc), _BAKED_NOTE)
                )
            if not chunk:
                return self.end("%s closed the selection watch%s" % (self.where, _BAKED_NOTE))
            buf += chunk

    def line(self, text):
        """One line from the proxy, less "SPARKDAP/2 ". Returns whether the
        watch goes on."""
        if not text.startswith(b"SELECT "):
            return True  # a line of a later protocol: not for this worker
        try:
            selection = _parse_selection(text[len(b"SELECT ") :])
        except Exception as exc:
            self.end(
                "%s sent a selection this worker cannot read (%s)%s"
                % (self.where, _describe(exc), _BAKED_NOTE)
            )
            return False
        with self.lock:
            if self.closed:
                return False
            self.st.live = selection
        self.ready.set()
        return True

    def send(self, data):
        """Sends data from the main thread without waiting; a send that
        would wait, or sends part, ends the watch (the proxy would read a
        broken line). Never raises."""
        try:
            sent = self.sock.send(data, self.flags)
            if sent == len(data):
                return True
            why = "sent %d of %d bytes" % (sent, len(data))
        except BlockingIOError:
            why = "the proxy does not read"
        except Exception as exc:
            why = _describe(exc)
        self.stop(
            "cannot report to %s on the selection watch (%s)%s" % (self.where, why, _BAKED_NOTE)
        )
        return False

    def stop(self, msg):
        """end, from the main thread: also wakes the watch's thread, which
        closes the socket."""
        if self.end(msg):
            try:
                self.sock.shutdown(2)  # SHUT_RDWR
            except Exception:
                pass


def _start_watch(st, cfg):
    """Starts the worker process's watch, at its first task; None when it
    does not watch: live selection turned off (SPARKDAP_LIVE_SELECTION=0),
    the proxy found silent by another worker of the executor (backoff.py),
    or no thread could start. Never raises."""
    try:
        if not cfg.get("live_selection", True) or _skip_reason(cfg) is not None:
            return None
        import socket
        import threading

        if not getattr(socket, "MSG_DONTWAIT", 0):
            return None  # no send that never waits
        watch = _Watch(st, cfg)
        thread = threading.Thread(target=watch.run, name="sparkdap-selection")
        thread.daemon = True
        # pydevd neither traces nor lists it, once a debugger attaches.
        thread.is_pydev_daemon_thread = True
        thread.pydev_do_not_trace = True
        watch.thread = thread
        thread.start()
        return watch
    except Exception as exc:
        _say("cannot watch the selection (%s)%s" % (_describe(exc), _BAKED_NOTE))
        return None


def _task_selection(st, cfg):
    """The selection the task starting now is decided by: the proxy's
    latest, else cfg. The first call of a worker process starts its watch
    and waits for the proxy's first selection, at most _FIRST_TASK_WAIT
    seconds."""
    if not st.watch_started:
        st.watch_started = True
        st.watch = _start_watch(st, cfg)
        if st.watch is not None:
            st.watch.ready.wait(_FIRST_TASK_WAIT)
    live = st.live
    return cfg if live is None else live


def _decide(st, cfg, task):
    """Whether the task starting now is debugged: by the proxy's latest
    selection, else by cfg. Fails open to cfg."""
    try:
        selection = _task_selection(st, cfg)
        if selection is not cfg:
            return _selected(selection, task)
    except Exception as exc:
        watch = st.watch
        msg = "cannot decide by the live selection (%s)%s" % (_describe(exc), _BAKED_NOTE)
        if watch is not None:
            watch.stop(msg)
        else:
            _say(msg)
        st.watch = None
    return _selected(cfg, task)


def _report_task(st, task, selected):
    """Tells the proxy which task this worker started, and whether it is
    selected. Never waits, never raises."""
    watch = st.watch
    if watch is None or not watch.open:
        return
    try:
        import json

        report = {
            "stageId": task["stageId"],
            "partitionId": task["partitionId"],
            "attemptNumber": task["attemptNumber"],
            "taskAttemptId": task["taskAttemptId"],
            "selected": bool(selected),
        }
        line = _HELLO + b"TASK " + json.dumps(report, separators=(",", ":")).encode("ascii")
    except Exception as exc:
        watch.stop(
            "cannot report the task on the selection watch (%s)%s" % (_describe(exc), _BAKED_NOTE)
        )
        return
    if watch.send(line + b"\n"):
        watch.busy = True


def _say_watch_note(st):
    """Says why the watch ended, once, at the end of a task: unless the
    worker said another line since the watch started (its debugger's
    failure names the same unreachable proxy). Never raises."""
    watch = st.watch
    if watch is None or watch.note is None:
        return
    try:
        with watch.lock:
            note, watch.note = watch.note, None
        if note and _said_count() == watch.said_before:
            _say(note)
    except Exception:
        pass


def _report_idle(st):
    """Tells the proxy the task this worker reported ended. Never waits,
    never raises."""
    watch = st.watch
    if watch is None or not watch.busy:
        return
    watch.busy = False
    if watch.open:
        watch.send(_IDLE_LINE)
