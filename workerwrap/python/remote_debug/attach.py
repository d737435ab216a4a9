"""Attaching a selected task's worker to the proxy: hello, debugger, handshake,
each bounded in time and failing open."""

import os
import sys

from .state import _describe, _say, _st, _unavailable
from .config import _pycharm
from .pydevd_compat import (
    _QuietPydevd,
    _debugger_alive,
    _global_debugger,
    _quiet_missing_file_warnings,
    _set_nodelay,
    _teardown,
    _trust_code_paths,
)
from .task import _read_archive_sources, _task_body
from .hello import _NoHelloReply, _ProxyUnproven, _hello
from .debugger import _import_debugger
from .lease import _hold_stops_on_lease
from .output import _batch_output


def _connect(cfg, task):
    """Connects this worker process to the proxy, once. Never raises, never
    blocks longer than connect_timeout + 2 * handshake_timeout."""
    st = _st()
    pycharm = _pycharm()
    host, port = cfg["proxy"]
    where = "proxy %s:%d" % (host, port)
    connect_timeout = cfg["connect_timeout"]
    handshake_timeout = cfg["handshake_timeout"]

    try:
        refused = _hello(cfg, task)
    except _ProxyUnproven:
        return _unavailable(
            "%s did not prove it knows the access token (another program on that port, or another token?)" % (where,)
        )
    except _NoHelloReply:
        return _unavailable(
            "%s accepted the connection but did not finish the debug handshake within %gs"
            % (where, handshake_timeout)
        )
    except Exception as exc:
        if isinstance(exc, TimeoutError) or "timed out" in str(exc):
            return _unavailable("%s unreachable: no connection within %gs" % (where, connect_timeout))
        return _unavailable("%s unreachable: %s" % (where, _describe(exc)))
    if refused is not None:
        return _unavailable("%s refused this worker: %s" % (where, refused))

    # With PyCharm, the proxy answered the hello, so it is listening:
    # pydevd-pycharm's own connect (10 s timeout) and handshake are bounded by
    # the watchdog below.
    if not pycharm:
        # pydevd reads both when it connects. PYDEVD_CONNECT_TIMEOUT is parsed
        # with int(): round up so that a sub-second timeout does not become 0.
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        os.environ["PYDEVD_CONNECT_TIMEOUT"] = str(max(1, int(-(-connect_timeout // 1))))

    quiet = _QuietPydevd()
    try:
        with quiet:
            debugger = _import_debugger()
            _trust_code_paths()
            if pycharm:
                _quiet_missing_file_warnings()
            _read_archive_sources()
    except BaseException as exc:
        quiet.restore()
        if pycharm:
            return _unavailable("cannot import pydevd_pycharm (pip install pydevd-pycharm~=<your PyCharm build>): %s" % (_describe(exc),))
        return _unavailable("cannot import debugpy: %s" % (_describe(exc),))

    import threading
    import time

    done = threading.Event()
    outcome = []
    connecting = threading.get_ident()

    def find_pydb():
        # The PyDB that debugpy.connect() spins on. Not the global debugger:
        # pydevd unregisters that when the proxy closes the connection, and
        # the spinning thread would then wait on an object nobody can reach.
        frame = sys._current_frames().get(connecting)
        while frame is not None:
            if frame.f_code.co_name == "wait_for_ready_to_run":
                return frame.f_locals.get("self")
            if pycharm and frame.f_code.co_name == "_locked_settrace" and frame.f_locals.get("py_db") is not None:
                # pydevd-pycharm spins on py_db.ready_to_run inline.
                return frame.f_locals.get("py_db")
            frame = frame.f_back
        return _global_debugger()

    def watchdog():
        # debugpy.connect() returns only once the proxy sent configurationDone
        # (PyDB.wait_for_ready_to_run spins on ready_to_run), and
        # pydevd_pycharm.settrace() only once the proxy relayed PyCharm's
        # CMD_RUN (it spins on py_db.ready_to_run); neither ever does if the
        # proxy closes the connection before (wrong token, session refused)
        # or stays silent. Setting that flag is the only way out short of
        # killing the task.
        deadline = time.monotonic() + connect_timeout + handshake_timeout
        while not done.wait(0.05):
            pydb = find_pydb()
            if not outcome:
                if pydb is not None and getattr(pydb, "pydb_disposed", False):
                    outcome.append("closed")
                elif time.monotonic() >= deadline:
                    outcome.append("timeout")
            if outcome and pydb is not None:
                pydb.ready_to_run = True

    error = None
    try:
        with quiet:
            if pycharm:
                # Named with the hello's nonce: the proxy finds it in pydevd's
                # thread list and so ties this connection to the hello.
                guard = threading.Thread(target=watchdog, name="sparkdap-connect-guard " + st.hello_nonce)
                guard.daemon = True
                guard.start()
                try:
                    # suspend=False: breakpoints stop the task, settrace does not.
                    # patch_multiprocessing=False: a worker's own subprocesses
                    # would each block in a handshake.
                    debugger.settrace(
                        host=host,
                        port=port,
                        stdout_to_server=False,
                        stderr_to_server=False,
                        suspend=False,
                        trace_only_current_thread=False,
                        patch_multiprocessing=False,
                    )
                finally:
                    done.set()
            else:
                # A worker's own subprocesses would each block in a handshake.
                debugger.configure(subProcess=False)
                guard = threading.Thread(target=watchdog, name="sparkdap-connect-guard")
                guard.daemon = True
                guard.start()
                try:
                    debugger.connect((host, port), access_token=st.pydevd_token)
                finally:
                    done.set()
    except BaseException as exc:
        error = exc
    if error is None and not outcome:
        quiet.restore()
        st.debugger = "connected"
        _set_nodelay()
        if not pycharm:
            _batch_output()
        _hold_stops_on_lease(cfg)
        return
    _teardown()
    if error is None and outcome[0] == "closed":
        return _unavailable(
            "%s closed the connection during the debug handshake; "
            "wrong token or session limit reached?" % (where,)
        )
    if error is None:
        return _unavailable(
            "%s accepted the connection but did not finish the debug handshake within %gs"
            % (where, handshake_timeout)
        )
    if isinstance(error, TimeoutError) or "timed out" in str(error):
        return _unavailable("%s unreachable: no connection within %gs" % (where, connect_timeout))
    if isinstance(error, OSError):
        return _unavailable("%s unreachable: %s" % (where, _describe(error)))
    call = "pydevd_pycharm.settrace" if pycharm else "debugpy.connect"
    return _unavailable("%s to %s failed: %s" % (call, where, _describe(error)))


def _set_tracing(on):
    st = _st()
    if st.tracing == on:
        return
    pydb = _global_debugger()
    if pydb is None:
        return
    try:
        if on:
            pydb.enable_tracing()
        else:
            pydb.disable_tracing()
        st.tracing = on
    except Exception:
        pass


def _send_task_event(cfg, task):
    try:
        if _pycharm():
            # pydevd's line protocol has no custom events: a command id of
            # sparkdap's own (pycharm.CmdSparkdapTask) that the proxy consumes.
            import json
            from _pydevd_bundle.pydevd_comm import NetCommand

            _global_debugger().writer.add_command(NetCommand(7901, 0, json.dumps(_task_body(cfg, task))))
        else:
            import pydevd

            pydevd.send_json_message({"type": "event", "event": "sparkdapTask", "body": _task_body(cfg, task)})
    except Exception:
        pass


def _attach(cfg, task):
    st = _st()
    if st.debugger is None:
        _connect(cfg, task)
        # The hello named the roots; the proxy set the breakpoints with them.
        st.sent_dirs = list(st.code_dirs)
    if st.debugger != "connected":
        return
    if not _debugger_alive():
        st.debugger = "failed"
        _say("debugger session closed by the proxy; tasks in this worker run undebugged")
        return
    _set_tracing(True)
    st.selected = True
    st.current_task = task
    _announce(cfg, task)


def _announce(cfg, task):
    """Sends the task event. When it names code directories the proxy has
    not mapped this session's breakpoints against, the proxy resends them:
    wait (bounded) for that before the task's code runs."""
    st = _st()
    new = [d for d in st.code_dirs if d not in (st.sent_dirs or ())]
    _send_task_event(cfg, task)
    st.sent_dirs = list(st.code_dirs)
    if new:
        _await_breakpoints(new)


_RESEND_TIMEOUT = 2.0


def _await_breakpoints(dirs):
    pydb = _global_debugger()
    received = getattr(pydb, "api_received_breakpoints", None)  # debugpy's pydevd only
    if not received:
        # No breakpoint set anywhere: the proxy has nothing to resend.
        return
    import time

    prefixes = tuple(d.rstrip("/") + "/" for d in dirs)
    deadline = time.monotonic() + _RESEND_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if any(str(key[0]).startswith(prefixes) for key in list(received)):
                return
        except Exception:
            return
        time.sleep(0.01)
    _say(
        "the proxy sent no breakpoints for %s within %gs; the task runs on"
        % (", ".join(dirs), _RESEND_TIMEOUT)
    )
