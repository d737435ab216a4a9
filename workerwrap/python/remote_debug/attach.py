"""Attaching a selected task's worker to the proxy: hello, debugger, handshake,
each bounded in time and failing open."""

from .state import _describe, _say, _st, _unavailable
from .config import _pycharm
from .backoff import _proxy_heard, _proxy_silent, _skip_reason
from .pydevd_compat import (
    _breakpoint_files,
    _ConnectGuard,
    _debugger_alive,
    _enable_tracing,
    _hide_from_pydevd,
    _pydevd_connect_env,
    _quiet_missing_file_warnings,
    _QuietPydevd,
    _send_custom_event,
    _set_nodelay,
    _teardown,
    _trust_code_paths,
    _UnsupportedDebugger,
)
from .task import _expose_task, _read_archive_sources, _task_body
from .hello import _hello, _NoHelloReply, _ProxyUnproven
from .debugger import _debugger_problem, _import_debugger
from .lease import _hold_stops_on_lease
from .output import _batch_output


def _connect(cfg, task):
    """Connects this worker process to the proxy, once. Never raises, never
    blocks longer than connect_timeout + 2 * handshake_timeout. A proxy
    that let this worker wait out a timeout is skipped by the executor's
    other workers for a while (backoff.py); one that fails at once is not."""
    st = _st()
    pycharm = _pycharm()
    host, port = cfg["proxy"]
    where = "proxy %s:%d" % (host, port)
    connect_timeout = cfg["connect_timeout"]
    handshake_timeout = cfg["handshake_timeout"]

    skip = _skip_reason(cfg)
    if skip is not None:
        return _unavailable(skip)

    problem = _debugger_problem()
    if problem is not None:
        # Worth the hello: serve and the IDE learn why this worker runs
        # undebugged, not only this executor's log. Whatever happens to
        # the hello, the line is about the debugger.
        try:
            _hello(cfg, task, undebugged=problem)
        except Exception:
            pass
        return _unavailable(problem)

    try:
        refused = _hello(cfg, task)
    except _ProxyUnproven:
        return _unavailable(
            "%s did not prove it knows the access token (another program on that port, or another "
            "token?)" % (where,)
        )
    except _NoHelloReply:
        return _unavailable(
            "%s accepted the connection but did not finish the debug handshake within %gs%s"
            % (where, handshake_timeout, _proxy_silent(cfg))
        )
    except Exception as exc:
        if isinstance(exc, TimeoutError) or "timed out" in str(exc):
            return _unavailable(
                "%s unreachable: no connection within %gs%s"
                % (where, connect_timeout, _proxy_silent(cfg))
            )
        return _unavailable("%s unreachable: %s" % (where, _describe(exc)))
    # The proxy answered: whoever found it silent, it is not now.
    _proxy_heard(cfg)
    if refused is not None:
        return _unavailable("%s refused this worker: %s" % (where, refused))

    # With PyCharm, the proxy answered the hello, so it is listening:
    # pydevd-pycharm's own connect (10 s timeout) and handshake are bounded by
    # the connect guard below (_ConnectGuard).
    if not pycharm:
        _pydevd_connect_env(connect_timeout)

    quiet = _QuietPydevd()
    try:
        with quiet:
            debugger = _import_debugger()
            _trust_code_paths()
            if pycharm:
                _quiet_missing_file_warnings()
            _read_archive_sources()
    except _UnsupportedDebugger as exc:
        quiet.restore()
        return _unavailable(str(exc))
    except BaseException as exc:
        quiet.restore()
        if pycharm:
            return _unavailable(
                "cannot import pydevd_pycharm (pip install pydevd-pycharm~=<your PyCharm build>): "
                "%s" % (_describe(exc),)
            )
        return _unavailable("cannot import debugpy: %s" % (_describe(exc),))

    import threading

    # pydevd's own connect and handshake, bounded by the guard.
    bound = _ConnectGuard(threading.get_ident(), pycharm, connect_timeout + handshake_timeout)
    done, outcome = bound.done, bound.outcome

    error = None
    try:
        with quiet:
            if pycharm:
                # Named with the hello's nonce: the proxy finds it in pydevd's
                # thread list and so ties this connection to the hello.
                guard = threading.Thread(
                    target=bound.run, name="sparkdap-connect-guard " + st.hello_nonce
                )
                guard.daemon = True
                guard.start()
                try:
                    # suspend=False: breakpoints stop the task, settrace does not.
                    # patch_multiprocessing=False: a worker's own subprocesses
                    # would each block in a handshake.
                    debugger.settrace(
                        host=host,
                        port=port,
                        stdout_to_server=True,
                        stderr_to_server=True,
                        suspend=False,
                        trace_only_current_thread=False,
                        patch_multiprocessing=False,
                    )
                finally:
                    done.set()
            else:
                # A worker's own subprocesses would each block in a handshake.
                debugger.configure(subProcess=False)
                guard = threading.Thread(target=bound.run, name="sparkdap-connect-guard")
                guard.daemon = True
                # pydevd would list it, and pause it in a pause-all: it is no
                # thread of the job. (PyCharm's proxy needs it listed to find
                # the hello, and keeps it out of PyCharm itself.)
                _hide_from_pydevd(guard)
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
            "%s accepted the connection but did not finish the debug handshake within %gs%s"
            % (where, handshake_timeout, _proxy_silent(cfg))
        )
    if isinstance(error, TimeoutError) or "timed out" in str(error):
        return _unavailable(
            "%s unreachable: no connection within %gs%s"
            % (where, connect_timeout, _proxy_silent(cfg))
        )
    if isinstance(error, OSError):
        return _unavailable("%s unreachable: %s" % (where, _describe(error)))
    call = "pydevd_pycharm.settrace" if pycharm else "debugpy.connect"
    return _unavailable("%s to %s failed: %s" % (call, where, _describe(error)))


def _set_tracing(on):
    st = _st()
    if st.tracing == on:
        return
    if _enable_tracing(on):
        st.tracing = on


def _send_task_event(cfg, task):
    try:
        body = _task_body(cfg, task)
    except Exception:
        return
    _send_custom_event(body)


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
    _expose_task(task)
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
    if not _breakpoint_files():
        # No breakpoint set anywhere (or, with pydevd-pycharm, no table of
        # them to look at): the proxy has nothing to resend.
        return
    import time

    prefixes = tuple(d.rstrip("/") + "/" for d in dirs)
    deadline = time.monotonic() + _RESEND_TIMEOUT
    while time.monotonic() < deadline:
        files = _breakpoint_files()
        if files is None or any(f.startswith(prefixes) for f in files):
            return
        time.sleep(0.01)
    _say(
        "the proxy sent no breakpoints for %s within %gs; the task runs on"
        % (", ".join(dirs), _RESEND_TIMEOUT)
    )
