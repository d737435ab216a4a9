"""The hooks in PySpark's daemon and worker that run the wrapper at the right
moments of a task."""

import sys

from .state import _describe, _say, _st
from .config import _config, _disabled_by_env
from .task import _absolute_sys_path, _expose_task, _record_code
from .selection import _decide, _report_idle, _report_task, _say_watch_note
from .output import _flush_output
from .attach import _announce, _attach, _set_tracing
from .wait import _arm_wait, _disarm_wait


def _task_started():
    """Runs when the worker first reads the task's code: the TaskContext is
    set, no user code has run. Decides whether the task is debugged; the
    debugger attaches once its code is unpickled (_task_code_read)."""
    st = _st()
    st.pending = None
    try:
        from pyspark.taskcontext import TaskContext

        tc = TaskContext.get()
    except Exception:
        tc = None
    if tc is None:
        return
    key = tc.taskAttemptId()
    if key == st.task_key:
        return
    st.task_key = key
    st.selected = False
    st.task_dirs = []
    cfg = _config()
    if cfg is None:
        return
    task = {
        "stageId": tc.stageId(),
        "partitionId": tc.partitionId(),
        "attemptNumber": tc.attemptNumber(),
        "taskAttemptId": tc.taskAttemptId(),
    }
    selected = _decide(st, cfg, task)
    _report_task(st, task, selected)
    if not selected:
        # A worker that debugged an earlier task stays connected; stop
        # tracing so breakpoints do not fire in this one.
        if st.debugger == "connected":
            _set_tracing(False)
            _expose_task(None)
        return
    if st.debugger in (None, "connected"):
        st.pending = (cfg, task)


def _task_code_read(command):
    """Runs each time a debugged task's command has been unpickled, before
    any of it runs. The first time, attaches the debugger: its hello and
    task event then name the directories of the code just unpickled, so the
    proxy's breakpoints in them arrive (and pydevd accepts them) before the
    code runs. Later commands of the task (a UDF per column) may add more."""
    st = _st()
    if command is not None:
        try:
            _record_code(command)
        except Exception as exc:
            _say(
                "cannot read the paths of the task's code (%s); breakpoints bind only in files "
                "present here" % (_describe(exc),)
            )
    if st.pending is not None:
        cfg, task = st.pending
        st.pending = None
        _attach(cfg, task)
    elif st.selected and st.debugger == "connected" and st.sent_dirs != st.code_dirs:
        _announce(st.config, st.current_task)


def _wrap_reader(module, name):
    orig = getattr(module, name, None)
    if orig is None or getattr(orig, "_sparkdap_orig", None) is not None:
        return

    def reader(*args, **kwargs):
        st = _st()
        if st.read_depth == 0:
            try:
                _absolute_sys_path()
            except Exception as exc:
                _say(
                    "cannot make sys.path absolute (%s); breakpoints in --py-files archives may "
                    "not bind" % (_describe(exc),)
                )
        if st.read_depth == 0 and not st.disabled:
            try:
                _task_started()
            except Exception as exc:
                _say("internal error, task runs undebugged: %s" % (_describe(exc),))
                st.disabled = True
        st.read_depth += 1
        try:
            result = orig(*args, **kwargs)
        finally:
            st.read_depth -= 1
        # read_command unpickles one command; read_udfs and read_udtf call
        # it. A read that unpickled nothing we saw attaches at its end.
        if (
            (st.pending is not None or st.selected)
            and not st.disabled
            and (name == "read_command" or st.read_depth == 0)
        ):
            try:
                _task_code_read(result if name == "read_command" else None)
            except Exception as exc:
                _say("internal error, task runs undebugged: %s" % (_describe(exc),))
                st.disabled = True
                st.pending = None
        # Arm once, when the outer read returns, so that unpickling is not
        # mistaken for user code.
        if st.read_depth == 0 and st.selected and not st.wait_armed and st.config["wait"]:
            st.selected = False
            _arm_wait()
        return result

    reader._sparkdap_orig = orig
    reader.__name__ = getattr(orig, "__name__", name)
    reader.__doc__ = getattr(orig, "__doc__", None)
    setattr(module, name, reader)


def _wrap_main(orig):
    if orig is None or getattr(orig, "_sparkdap_orig", None) is not None:
        return orig

    def main(*args, **kwargs):
        try:
            return orig(*args, **kwargs)
        finally:
            try:
                # A task with no user call (empty partition) must not leave the
                # hook armed for the next, maybe unselected, task of this worker.
                _disarm_wait()
                _st().task_key = None
                _flush_output()
            finally:
                _report_idle(_st())
                _say_watch_note(_st())

    main._sparkdap_orig = orig
    main.__name__ = getattr(orig, "__name__", "main")
    main.__doc__ = getattr(orig, "__doc__", None)
    return main


def _prepare_child():
    """Installs the task hooks in a forked worker, once per process."""
    st = _st()
    if st.prepared:
        return
    st.prepared = True
    if _disabled_by_env():
        return
    import importlib
    from pyspark import daemon

    # Spark 4.x passes the worker module as argv[1]; pyspark.daemon itself
    # imports it after fork on recent versions, and at import time on 3.5 as
    # daemon.worker_main. Patch both places.
    if len(sys.argv) > 1 and sys.argv[1].startswith("pyspark"):
        modname = sys.argv[1]
    else:
        modname = "pyspark.worker"
    modules = [importlib.import_module(modname)]
    if modname != "pyspark.worker":
        modules.append(importlib.import_module("pyspark.worker"))
    for module in modules:
        if hasattr(module, "main"):
            module.main = _wrap_main(module.main)
        for name in ("read_command", "read_udfs", "read_udtf"):
            _wrap_reader(module, name)
    if hasattr(daemon, "worker_main"):
        daemon.worker_main = _wrap_main(daemon.worker_main)


def _install(daemon):
    orig = daemon.worker
    if getattr(orig, "_sparkdap_orig", None) is not None:
        return

    def worker(sock, authenticated, *args, **kwargs):
        # Runs in the forked child, for every task the worker process is
        # reused for. Never let sparkdap break the worker.
        try:
            _prepare_child()
        except Exception as exc:
            _st().disabled = True
            _say("internal error, worker runs undebugged: %s" % (_describe(exc),))
        return orig(sock, authenticated, *args, **kwargs)

    worker._sparkdap_orig = orig
    daemon.worker = worker
