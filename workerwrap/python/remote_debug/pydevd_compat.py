"""Every use the wrapper makes of pydevd's and debugpy's private internals:
the patches and the fields it reads, here and nowhere else.

The two guarantees that keep a debugger from holding a task forever rest
on these internals: the connect guard (_ConnectGuard: PyDB.ready_to_run,
the frames of the connecting thread) and the lease on stops (_around_stops
and _reader_socket: PyDB.do_wait_suspend, the reader's socket, _let_go);
output batching rests on pydevd's output redirection. support.py lists
each internal they need and gives the verdict on the loaded debugger:
_load_debugger raises _UnsupportedDebugger for one that lacks any, so the
worker runs undebugged and says what is missing in one line
(SPARKDAP_UNTESTED_DEBUGGER=1 on the executors tries it anyway), and a
release outside the tested ranges that has them all is debugged with one
line naming it untested. Each patch also checks what it touches, and when
that is not there (forced, or a behaviour the names do not show):

- connect guard: falls back to the global debugger; past the handshake
  timeout the worker tears pydevd down and runs undebugged;
- lease (_around_stops, _reader_socket): no lease, one line; the worker
  debugs as without one;
- _skip_network_start_sleep, _describe_environment_only_when_logged,
  _set_nodelay: skipped (a worker attaches a little slower);
- _trust_code_paths: skipped (breakpoints in closures pickled from the
  driver do not bind);
- _wrapper_is_library: skipped (with justMyCode, exception breakpoints
  may stop in the wrapper's frames);
- _quiet_missing_file_warnings, _QuietPydevd: skipped (pydevd's warnings
  and tracebacks reach the executor log);
- output batching (_take_output_redirects, _writer_backlog, _queue_output):
  not installed, one line; pydevd sends one output event per write;
- _hide_from_pydevd: the thread is marked by the attributes pydevd reads;
- _stop_at_frame (--wait), _send_task_event, _received_breakpoints,
  _enable_tracing, _teardown, _let_go: no-ops that never raise.
"""

import os
import sys

from .state import _say, _st
from .config import _pycharm
from .support import _forced, _missing_internals, _verdict, UNTESTED_ENV

_said = []  # the lines about the debugger this process already wrote


class _UnsupportedDebugger(Exception):
    """The debugger lacks an internal the wrapper's promises rest on."""


def _check_debugger(name, version, pycharm):
    """Takes support.py's verdict on the loaded debugger: raises
    _UnsupportedDebugger for one that lacks an internal (unless
    SPARKDAP_UNTESTED_DEBUGGER=1 asks to try it), and says once per
    process that a release outside the tested ranges is untested."""
    kind, words = _verdict(name, version, _missing_internals(pycharm))
    if kind == "supported":
        return
    if kind == "unusable":
        if not _forced():
            raise _UnsupportedDebugger("%s; %s=1 tries it anyway" % (words, UNTESTED_ENV))
        words = "%s; trying it (%s=1)" % (words, UNTESTED_ENV)
    if words not in _said:
        _said.append(words)
        _say(words)


def _load_debugger(pycharm):
    """Imports the debugger (pydevd-pycharm, or debugpy with its vendored
    pydevd), checks its version and makes the patches that take effect at
    import. Returns the module whose settrace/connect attaches; raises
    _UnsupportedDebugger, or whatever the import raises."""
    if pycharm:
        import pydevd_pycharm
        import pydevd  # pydevd-pycharm's, which _trust_code_paths patches

        _check_debugger(
            "pydevd-pycharm", str(getattr(pydevd_pycharm, "__version__", "unknown")), True
        )
        _skip_network_start_sleep()
        return pydevd_pycharm
    import debugpy

    # debugpy.connect imports debugpy.server lazily, and that import is what
    # puts debugpy's vendored pydevd on sys.path.
    from debugpy import server as _server  # noqa: F401
    import debugpy.server.api
    import pydevd  # noqa: F401

    _check_debugger("debugpy", str(getattr(debugpy, "__version__", "unknown")), False)
    _describe_environment_only_when_logged()
    _skip_network_start_sleep()
    _wrapper_is_library()
    return debugpy


def _global_debugger():
    # Only ever look at the pydevd that debugpy loaded: importing
    # _pydevd_bundle here would pick up any other copy on sys.path (the
    # pydevd-pycharm package installs one into site-packages) and shadow
    # debugpy's vendored pydevd for the rest of the process.
    constants = sys.modules.get("_pydevd_bundle.pydevd_constants")
    if constants is None:
        return None
    try:
        return constants.get_global_debugger()
    except Exception:
        return None


class _QuietPydevd:
    """Routes pydevd's always-on error log away from stderr while connecting:
    a refused connection would otherwise print a traceback per worker, and
    the contract is one line."""

    def __enter__(self):
        self.saved = None
        if os.environ.get("SPARKDAP_VERBOSE"):
            return self
        # debugpy's pydevd only, once loaded: see _global_debugger.
        pydev_log = sys.modules.get("_pydev_bundle.pydev_log")
        if pydev_log is None:
            return self
        try:
            import io

            g = pydev_log._LoggingGlobals
            self.saved = (g, g._debug_stream, g._debug_stream_initialized)
            g._debug_stream = io.StringIO()
            g._debug_stream_initialized = True
        except Exception:
            self.saved = None
        return self

    def restore(self):
        if self.saved is not None:
            g, stream, initialized = self.saved
            g._debug_stream, g._debug_stream_initialized = stream, initialized
            self.saved = None

    def __exit__(self, *exc):
        return False


def _trust_code_paths():
    """Functions pickled by value (from the driver's script, a notebook, a
    Spark Connect client) keep the driver's path as co_filename, which does
    not exist here. pydevd refuses breakpoints in files it cannot see, so
    they would never bind: let the files of the code this worker unpickled,
    and any file under SPARKDAP_DRIVER_DIR, count as existing."""
    pydevd_file_utils = sys.modules.get("pydevd_file_utils")  # the debugger's, loaded by pydevd
    if pydevd_file_utils is None:
        return
    try:
        orig = pydevd_file_utils.exists
        if getattr(orig, "_sparkdap", False):
            return
        driver_dir = os.environ.get("SPARKDAP_DRIVER_DIR", "").rstrip("/")
        prefix = driver_dir + "/" if driver_dir else None

        def exists(filename):
            if orig(filename):
                return True
            try:
                name = str(filename)
                return os.path.normpath(name) in _st().code_files or (
                    prefix is not None and name.startswith(prefix)
                )
            except Exception:
                return False

        exists._sparkdap = True
        pydevd_file_utils.exists = exists
    except Exception:
        pass


# What pydevd-pycharm writes to the worker's stderr (the job's output) for
# a breakpoint in a file this executor does not have.
_MISSING_FILE_WARNING = (
    "pydev debugger: warning: trying to add breakpoint to file that does not exist"
)


class _StderrWithoutMissingFileWarnings:
    """sys.stderr as pydevd's command processor sees it: the same stream,
    minus its warnings about breakpoints in files that do not exist."""

    def write(self, s):
        if isinstance(s, str) and s.startswith(_MISSING_FILE_WARNING):
            return len(s)
        return sys.stderr.write(s)

    def __getattr__(self, name):
        return getattr(sys.stderr, name)


class _SysWithoutMissingFileWarnings:
    """The sys module, for one module of pydevd: everything is the real
    sys's, except that stderr drops the missing-file warnings."""

    def __init__(self, real):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_stderr", _StderrWithoutMissingFileWarnings())

    def __getattr__(self, name):
        if name == "stderr":
            return self._stderr
        return getattr(self._real, name)

    def __setattr__(self, name, value):
        setattr(self._real, name, value)


def _quiet_missing_file_warnings():
    """The proxy sends each breakpoint to every path its file may have on
    this executor (which one Spark used is only known once the code runs),
    and pydevd-pycharm writes a warning to this worker's stderr, the job's
    output, for each of those paths that does not exist here: noise that
    says nothing to the user. Only the module that writes them sees a
    stderr that drops them; nothing else of the process changes."""
    try:
        mod = sys.modules.get("_pydevd_bundle.pydevd_process_net_command")
        if mod is None:
            import importlib

            mod = importlib.import_module("_pydevd_bundle.pydevd_process_net_command")
        if getattr(mod, "sys", None) is sys:
            mod.sys = _SysWithoutMissingFileWarnings(sys)
    except Exception:
        pass


class _TimeWithoutStartSleep:
    """pydevd's `time` while one thread runs PyDB.initialize_network: the
    same module, except that this thread's sleep(0.1) returns at once."""

    def __init__(self, real, thread):
        self._real = real
        self._thread = thread

    def sleep(self, seconds):
        import threading

        if seconds == 0.1 and threading.get_ident() == self._thread:
            return None
        return self._real.sleep(seconds)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _skip_network_start_sleep():
    """pydevd's PyDB.initialize_network starts its reader and writer threads
    and then sleeps 0.1 s "to give threads time to start" (debugpy's and
    pydevd-pycharm's alike): a tenth of a second in every worker that
    attaches, and about a third of what attaching costs once the debugger is
    loaded. Thread.start() already returns only once the thread runs, and
    whatever pydevd sends meanwhile waits in the writer's queue. Skip that
    sleep, in the connecting thread only; a pydevd whose
    initialize_network no longer sleeps 0.1 s is left alone."""
    pydevd = sys.modules.get("pydevd")
    pydb = getattr(pydevd, "PyDB", None)
    orig = getattr(pydb, "initialize_network", None)
    if orig is None or getattr(orig, "_sparkdap", False):
        return
    code = getattr(orig, "__code__", None)
    if (
        code is None
        or 0.1 not in code.co_consts
        or "sleep" not in code.co_names
        or "time" not in code.co_names
    ):
        return

    def initialize_network(self, *args, **kwargs):
        import threading

        real = pydevd.time
        pydevd.time = _TimeWithoutStartSleep(real, threading.get_ident())
        try:
            return orig(self, *args, **kwargs)
        finally:
            pydevd.time = real

    initialize_network._sparkdap = True
    initialize_network.__wrapped__ = orig
    pydb.initialize_network = initialize_network


def _describe_environment_only_when_logged():
    """debugpy describes the whole environment (the metadata of every
    installed distribution: 0.1-0.3 s with a few hundred packages) the first
    time it configures logging, and logs it at info level, which nothing
    records unless DEBUGPY_LOG_DIR or debugpy.log_to asked for it. Every
    worker that connects pays that before its task runs: build the text only
    when some log takes info lines, as debugpy would have written it then."""
    try:
        from debugpy.common import log
    except Exception:
        return
    original = getattr(log, "describe_environment", None)
    if original is None or getattr(original, "_sparkdap", False):
        return

    def describe_environment(header):
        if log.log_dir is not None or "info" in getattr(log, "_levels", ("info",)):
            return original(header)
        return None

    describe_environment._sparkdap = True
    log.describe_environment = describe_environment


def _teardown():
    pydb = _global_debugger()
    if pydb is None:
        return
    try:
        import pydevd

        pydevd.stoptrace()
    except Exception:
        pass
    try:
        pydb.dispose_and_kill_all_pydevd_threads(wait=False)
    except Exception:
        pass


def _set_nodelay():
    # pydevd writes header and body of each message in two sends; without
    # TCP_NODELAY, Nagle holds every body for the peer's delayed ACK (~40 ms).
    try:
        import socket

        if _pycharm():
            sock = getattr(getattr(_global_debugger(), "writer", None), "sock", None)
        else:
            sock = getattr(_global_debugger(), "_client_socket", None)
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except Exception:
        pass


def _hide_from_pydevd(thread):
    """Marks one of the wrapper's threads as pydevd's own: never traced,
    never listed to the IDE, never suspended by a suspend-all."""
    mod = sys.modules.get("_pydevd_bundle.pydevd_daemon_thread")  # the loaded debugger's
    mark = getattr(mod, "mark_as_pydevd_daemon_thread", None)
    try:
        if mark is not None:
            mark(thread)
            return
    except Exception:
        pass
    thread.pydev_do_not_trace = True
    thread.is_pydev_daemon_thread = True


def _let_go(pydb, sock):
    """What a DAP disconnect does in pydevd (breakpoints cleared, every
    stopped thread resumed) and what the proxy's closing the connection
    does (pydevd disposes itself), without waiting on the network. Works
    on debugpy's pydevd and pydevd-pycharm alike (the same names in both).
    Never raises."""
    import socket
    import threading

    constants = sys.modules.get("_pydevd_bundle.pydevd_constants")
    state_run = getattr(constants, "STATE_RUN", 1)
    # Breakpoints first, so that no thread stops again on its way out.
    for name in (
        "api_received_breakpoints",
        "breakpoints",
        "file_to_id_to_line_breakpoint",
        "file_to_id_to_plugin_breakpoint",
        "django_breakpoints",
        "jinja2_breakpoints",
        "break_on_caught_exceptions",
        "break_on_uncaught_exceptions",
        "break_on_user_uncaught_exceptions",
    ):
        table = getattr(pydb, name, None)
        if isinstance(table, dict):
            try:
                table.clear()
            except Exception:
                pass
    try:
        pydb.on_breakpoints_changed(removed=True)
    except Exception:
        pass
    # The reader gets an end of file now, not when a silent peer speaks;
    # writes are left alone: pydevd-pycharm prints a line on stdout (the
    # task's) for a write that fails.
    try:
        sock.shutdown(socket.SHUT_RD)
    except Exception:
        pass
    # Disposed before the threads resume, so that they queue nothing more
    # for a proxy that is not there; a disposed pydevd traces nothing, and
    # closes the connection.
    try:
        pydb.dispose_and_kill_all_pydevd_threads(wait=False)
    except Exception:
        pass
    for thread in threading.enumerate():
        info = getattr(thread, "additional_info", None)
        if info is None:
            continue
        try:
            info.pydev_step_cmd = -1
            if hasattr(info, "pydev_original_step_cmd"):
                info.pydev_original_step_cmd = -1
            info.pydev_step_stop = None
            info.pydev_state = state_run
        except Exception:
            pass


def _stop_tracing_here():
    """In a thread the lease let go, on its way back to the task: stops
    pydevd's tracing (this thread's settrace, sys.monitoring for all), as
    _teardown does."""
    pydevd = sys.modules.get("pydevd")
    try:
        pydevd.stoptrace()
    except Exception:
        pass


def _debugger_alive():
    pydb = _global_debugger()
    return pydb is not None and not getattr(pydb, "pydb_disposed", False)


def _output_redirects():
    """pydevd's redirections of stdout and stderr, as (ctx, name,
    IORedirector, writer to the debugger) tuples; empty without them.
    debugpy's pydevd keeps them in pydevd_io._RedirectionsHolder, its
    writer a RedirectToPyDBIoMessages; pydevd-pycharm's settrace
    (stdout_to_server) puts the IORedirector on sys.stdout/sys.stderr,
    its writer the _CustomWriter in sys._pydevd_out_buffer_ /
    _pydevd_err_buffer_. Both writers call their _on_write instead of
    sending, once it is set."""
    try:
        from _pydevd_bundle import pydevd_io
    except Exception:
        return []
    found = []
    holder = getattr(pydevd_io, "_RedirectionsHolder", None)
    for ctx, std in ((1, "stdout"), (2, "stderr")):
        info = getattr(holder, "_pydevd_%s_redirect_" % std, None)
        redirector = getattr(info, "redirect_to", None)
        kind = getattr(pydevd_io, "RedirectToPyDBIoMessages", None)
        for target in getattr(redirector, "_redirect_to", ()):
            if kind is not None and isinstance(target, kind):
                found.append((ctx, std, redirector, target))
                break
        else:
            buffer = getattr(sys, "_pydevd_%s_buffer_" % ("out" if ctx == 1 else "err"), None)
            redirector = getattr(sys, std, None)
            targets = getattr(redirector, "_redirect_to", ())
            if buffer is not None and hasattr(buffer, "_on_write") and buffer in targets:
                found.append((ctx, std, redirector, buffer))
    return found


def _pydevd_connect_env(connect_timeout):
    """debugpy's pydevd reads both when it connects. PYDEVD_CONNECT_TIMEOUT
    is parsed with int(): round up so that a sub-second timeout does not
    become 0."""
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    os.environ["PYDEVD_CONNECT_TIMEOUT"] = str(max(1, int(-(-connect_timeout // 1))))


class _ConnectGuard:
    """The way out of a connect that never ends. debugpy.connect() returns
    only once the proxy sent configurationDone (PyDB.wait_for_ready_to_run
    spins on ready_to_run), and pydevd_pycharm.settrace() only once the
    proxy relayed PyCharm's CMD_RUN (it spins on py_db.ready_to_run);
    neither ever does if the proxy closes the connection before (wrong
    token, session refused) or stays silent. Setting that flag is the only
    way out short of killing the task.

    run() is the guard thread's loop, for `seconds` at most; the connecting
    thread (ident `connecting`) sets done once its call returned. outcome
    is then empty, or holds "closed" or "timeout"; only the guard writes
    it, and the connecting thread reads it after done."""

    def __init__(self, connecting, pycharm, seconds):
        import threading

        self._connecting = connecting
        self._pycharm = pycharm
        self._seconds = seconds
        self.done = threading.Event()
        self.outcome = []

    def _pydb(self):
        # The PyDB that debugpy.connect() spins on. Not the global debugger:
        # pydevd unregisters that when the proxy closes the connection, and
        # the spinning thread would then wait on an object nobody can reach.
        frame = sys._current_frames().get(self._connecting)
        while frame is not None:
            if frame.f_code.co_name == "wait_for_ready_to_run":
                return frame.f_locals.get("self")
            if (
                self._pycharm
                and frame.f_code.co_name == "_locked_settrace"
                and frame.f_locals.get("py_db") is not None
            ):
                # pydevd-pycharm spins on py_db.ready_to_run inline.
                return frame.f_locals.get("py_db")
            frame = frame.f_back
        return _global_debugger()

    def run(self):
        import time

        deadline = time.monotonic() + self._seconds
        while not self.done.wait(0.05):
            pydb = self._pydb()
            if not self.outcome:
                if pydb is not None and getattr(pydb, "pydb_disposed", False):
                    self.outcome.append("closed")
                elif time.monotonic() >= deadline:
                    self.outcome.append("timeout")
            if self.outcome and pydb is not None:
                pydb.ready_to_run = True


def _enable_tracing(on):
    """Turns pydevd's tracing of this process on or off; whether it did."""
    pydb = _global_debugger()
    if pydb is None:
        return False
    try:
        if on:
            pydb.enable_tracing()
        else:
            pydb.disable_tracing()
        return True
    except Exception:
        return False


def _send_custom_event(body):
    """Sends the proxy sparkdap's task event, body as JSON. Never raises."""
    try:
        if _pycharm():
            # pydevd's line protocol has no custom events: a command id of
            # sparkdap's own (pycharm.CmdSparkdapTask) that the proxy consumes.
            import json

            from _pydevd_bundle.pydevd_comm import NetCommand

            _global_debugger().writer.add_command(NetCommand(7901, 0, json.dumps(body)))
        else:
            import pydevd

            pydevd.send_json_message({"type": "event", "event": "sparkdapTask", "body": body})
    except Exception:
        pass


def _breakpoint_files():
    """The files of the breakpoints the IDE set, as pydevd received them:
    a list, or None where pydevd keeps no such table (pydevd-pycharm) or
    it cannot be read."""
    received = getattr(_global_debugger(), "api_received_breakpoints", None)  # debugpy's pydevd
    if received is None:
        return None
    try:
        return [str(key[0]) for key in list(received)]
    except Exception:
        return None


def _around_stops(pydb, before=None, after=None):
    """Calls before() each time a thread stops, and after() once it runs
    again. pydevd queues the stopped event in do_wait_suspend, and its
    tracers (settrace, Cython, sys.monitoring; debugpy's and
    pydevd-pycharm's) call it as an attribute of the PyDB: an instance
    attribute takes effect. Raises AttributeError where there is none."""
    orig = pydb.do_wait_suspend

    def do_wait_suspend(*args, **kwargs):
        if before is not None:
            before()
        try:
            return orig(*args, **kwargs)
        finally:
            if after is not None:
                after()

    pydb.do_wait_suspend = do_wait_suspend


def _reader_socket(pydb):
    """The socket pydevd's reader thread reads the proxy's messages from;
    only that thread reads it. Raises ValueError where there is none."""
    sock = getattr(getattr(pydb, "reader", None), "sock", None)
    if sock is None:
        raise ValueError("pydevd's reader has no socket")
    return sock


def _swap_reader_socket(pydb, sock):
    """Makes pydevd's reader read from sock (a wrapper of its socket)."""
    pydb.reader.sock = sock


def _writer_backlog(pydb):
    """How many commands wait in pydevd's writer queue (debugpy's
    _cmd_queue, pydevd-pycharm's cmdQueue); None if unknown."""
    writer = getattr(pydb, "writer", None)
    q = getattr(writer, "_cmd_queue", None)
    if q is None:
        q = getattr(writer, "cmdQueue", None)
    try:
        return None if q is None else q.qsize()
    except Exception:
        return None


def _output_sink_gone(pydb):
    """Whether pydevd no longer takes output: no writer, or disposed."""
    return getattr(pydb, "writer", None) is None or getattr(pydb, "pydb_disposed", False)


def _queue_output(pydb, text, ctx):
    """Queues one output event (ctx 1 stdout, 2 stderr) on pydevd's writer."""
    pydb.writer.add_command(pydb.cmd_factory.make_io_message(text, ctx))


def _io_message_limit(pydb):
    """The most characters one output command of pydb's may carry, or None
    for no limit. pydevd's XML command factories (pydevd-pycharm's
    NetCommandFactory, debugpy's pydevd_net_command_factory_xml) cut a
    longer text to MAX_IO_MSG_SIZE and add "...": 1,000 characters in
    pydevd-pycharm. The JSON factory (debugpy's DAP) has no such limit,
    and its module no such name."""
    factory = getattr(pydb, "cmd_factory", None)
    module = sys.modules.get(getattr(type(factory), "__module__", ""))
    limit = getattr(module, "MAX_IO_MSG_SIZE", None)
    return limit if isinstance(limit, int) and limit > 0 else None


def _queue_marker(pydb, marker):
    """Queues a command that writes nothing (output._Delivered) behind the
    output on pydevd's writer: its send() runs on the writer thread once
    what was queued before it is written."""
    pydb.writer.add_command(marker)


def _take_output_redirects(redirects, on_write, request_flush):
    """Points pydevd's redirections (_output_redirects) at the batcher:
    their on_write hook (RedirectToPyDBIoMessages._on_write) becomes
    on_write(ctx), their flush request_flush. Returns (ctx, name,
    IORedirector, original stream) for each."""
    taken = []
    for ctx, std, redirector, target in redirects:
        target._on_write = on_write(ctx)
        target.flush = request_flush
        buf = getattr(target, "buffer", None)
        if buf is not None:
            buf._on_write = target._on_write
            buf.flush = request_flush
        taken.append((ctx, std, redirector, redirector._redirect_to[0]))
    return taken


def _stop_at_frame(frame):
    """What debugpy.breakpoint() does, but stopping in the user's frame:
    pydevd steps over until the next line event of stop_at_frame, which is
    the first line of the user's function."""
    import pydevd

    kwargs = {}
    if not _pycharm():
        kwargs["notify_stdin"] = False  # debugpy's pydevd only
    pydevd.settrace(
        suspend=True,
        trace_only_current_thread=True,
        patch_multiprocessing=False,
        stop_at_frame=frame,
        **kwargs,
    )


def _wrapper_is_library():
    """Makes the wrapper's own code library code to pydevd, before the
    worker's settrace makes the PyDB that reads the roots. Otherwise, in
    a directory that is no library root (where `sparkdap submit` writes
    it, an executor's working directory), it is the user's code: with
    justMyCode and exception breakpoints on raised exceptions, pydevd
    stops in it for any exception that passes through its frames, as the
    SystemExit a reused worker leaves through when the JVM closes its
    socket does (PySpark's worker main, then the wrapper's main, then
    pyspark.daemon.worker, which catches it). A root that is a file
    names that file alone (pydevd_filtering.in_project_roots). As
    shipped the wrapper is one file; in the repository, a package. Only
    once the debugger's pydevd is loaded (it imports pydevd_filtering):
    importing it here could load another copy (see _global_debugger)."""
    if sys.modules.get("_pydevd_bundle.pydevd_filtering") is None:
        return
    here = os.path.abspath(__file__)
    if __package__:
        here = os.path.dirname(here)
    _library_root(here)
    real = os.path.realpath(here)
    if real != here:
        _library_root(real)


def _library_root(path):
    """Makes path one of pydevd's library roots, so that with justMyCode
    its files are never the user's code (the shipped debugger, unpacked
    outside site-packages; the wrapper itself). pydevd reads LIBRARY_ROOTS when a PyDB is
    made, in the worker's settrace, and then uses it instead of its
    defaults, so the defaults go in too. Skipped, silently, if the loaded
    pydevd has no _get_default_library_roots: the shipped debugger's files
    are then only pydevd's own, which pydevd never traces anyway."""
    filtering = sys.modules.get("_pydevd_bundle.pydevd_filtering")
    if filtering is None:
        try:
            from _pydevd_bundle import pydevd_filtering as filtering
        except Exception:
            return
    try:
        current = os.environ.get("LIBRARY_ROOTS")
        if current is not None:
            roots = current.split(os.pathsep)
        else:
            roots = list(filtering.FilesFiltering._get_default_library_roots())
        if path not in roots:
            roots.append(path)
        os.environ["LIBRARY_ROOTS"] = os.pathsep.join(roots)
    except Exception:
        return
