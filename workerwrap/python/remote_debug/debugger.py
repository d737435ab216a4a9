"""Loading the debugger: once in the daemon before it forks (preload), and in
each worker that attaches."""

import os
import sys

from .state import _describe, _say
from .config import _disabled_by_env, _load_config, _may_select, _pycharm
from .pydevd_compat import _QuietPydevd, _UnsupportedDebugger
from .shipped import _load_own_or_shipped


class _ImportEffects:
    """What importing the debugger changes in the process besides
    sys.modules, as measured with debugpy 1.8 and pydevd-pycharm 263:
    pydevd makes breakpoint() its own (sys.breakpointhook), adds execfile
    and runfile to builtins, debugpy sets PYDEVD_USE_FRAME_EVAL in the
    environment, and pydevd-pycharm (through IPython) raises the recursion
    limit and adds a warnings filter. In the daemon (_preload_debugger)
    every worker would inherit these, debugged or not: an unselected task's
    breakpoint() would be ignored, or with pydevd-pycharm try to connect to
    localhost:5678, instead of running pdb. So the daemon takes them back
    (undo), and a worker that attaches makes them again (the function undo
    returns), as its own import of the debugger would have."""

    def __init__(self):
        import builtins
        import warnings

        self.hook = sys.breakpointhook
        self.environ = dict(os.environ)
        self.builtins = set(builtins.__dict__)
        self.recursion = sys.getrecursionlimit()
        self.filters = list(warnings.filters)

    def undo(self):
        import builtins
        import warnings

        hook = sys.breakpointhook
        env_set = {k: v for k, v in os.environ.items() if self.environ.get(k) != v}
        env_del = [k for k in self.environ if k not in os.environ]
        added = {k: v for k, v in builtins.__dict__.items() if k not in self.builtins}
        recursion = sys.getrecursionlimit()
        filters = [f for f in warnings.filters if f not in self.filters]

        sys.breakpointhook = self.hook
        for k in env_set:
            if k in self.environ:
                os.environ[k] = self.environ[k]
            else:
                del os.environ[k]
        for k in env_del:
            os.environ[k] = self.environ[k]
        for k in added:
            del builtins.__dict__[k]
        sys.setrecursionlimit(self.recursion)
        warnings.filters[:] = [f for f in warnings.filters if f not in filters]
        _warnings_mutated()

        def redo():
            sys.breakpointhook = hook
            os.environ.update(env_set)
            for k in env_del:
                os.environ.pop(k, None)
            for k, v in added.items():
                builtins.__dict__.setdefault(k, v)
            if sys.getrecursionlimit() < recursion:
                sys.setrecursionlimit(recursion)
            for f in reversed(filters):
                if f not in warnings.filters:
                    warnings.filters.insert(0, f)
            _warnings_mutated()

        return redo


def _warnings_mutated():
    # What warnings.filterwarnings() calls after changing warnings.filters,
    # so that the warnings already cached are looked up again.
    import warnings

    for name in ("_filters_mutated", "_filters_mutated_lock_held"):
        f = getattr(warnings, name, None)
        if f is not None:
            try:
                f()
            except Exception:
                continue
            return


# Set by _preload_debugger in the daemon: makes in a worker the changes the
# debugger's import made in the daemon and the daemon took back.
_preload_redo = None

# Set by _preload_debugger in the daemon when the debugger cannot be used
# at all (not installed, or lacking an internal): why, in words. Workers
# inherit it through fork and tell the proxy instead of trying again.
_preload_problem = None


def _debugger_problem():
    """Why this worker's debugger cannot be used, as the daemon found when
    it loaded it; None when it loaded or was not tried."""
    return _preload_problem


def _import_debugger(in_daemon=False):
    """Imports the debugger this wrapper was generated for, inside _QuietPydevd
    so that its import-time chatter stays off stderr: the executors' own,
    or the one shipped with the job (shipped.py), which only the daemon
    unpacks (in_daemon). Returns the module whose settrace/connect
    attaches, or raises."""
    global _preload_redo
    if _preload_redo is not None:
        redo, _preload_redo = _preload_redo, None
        redo()
    return _load_own_or_shipped(_pycharm(), in_daemon)


def _preload_debugger():
    """Imports the debugger once in the daemon, before it forks workers, so
    that a worker that attaches pays only for pydevd's settrace and the
    handshake, not for importing debugpy and pydevd (~0.1 s with debugpy,
    ~0.4 s with pydevd-pycharm, in every worker that attaches).

    Only the import: importing debugpy, debugpy.server.api and pydevd (or
    pydevd_pycharm) starts no thread, opens no file or socket, sets no trace
    function and installs no signal or fork handler (tests check it), so a
    fork after it is as safe as before; what else it changes in the
    process (sys.breakpointhook, builtins, ...: _ImportEffects) is taken
    back here and made again by the workers that attach; pydevd creates
    its threads and its socket in settrace, which only a worker calls.
    Fails open: a worker then imports the debugger itself, as without this.
    Returns whether the debugger is loaded."""
    if _disabled_by_env():
        return False
    try:
        cfg = _load_config()
    except Exception:
        return False  # every worker that reads a task says why (_config)
    if not _may_select(cfg):
        return False
    # pydevd reads PYDEVD_DISABLE_FILE_VALIDATION when it is imported, and
    # _connect sets it before its import: set it around this one, and leave
    # the environment of the workers as it was.
    set_env = not _pycharm() and "PYDEVD_DISABLE_FILE_VALIDATION" not in os.environ
    global _preload_redo
    quiet = _QuietPydevd()
    effects = None
    try:
        effects = _ImportEffects()
        if set_env:
            os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        with quiet:
            _import_debugger(in_daemon=True)
        loaded = True
    except BaseException as exc:
        quiet.restore()
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        global _preload_problem
        if isinstance(exc, _UnsupportedDebugger):
            _preload_problem = str(exc)
        elif isinstance(exc, ModuleNotFoundError) and exc.name in _DEBUGGER_MODULES:
            _preload_problem = _not_installed(exc)
        else:  # each worker that attaches says it
            _say(
                "could not load the debugger in the daemon (%s); each worker that attaches loads it"
                % (_describe(exc),)
            )
        loaded = False
    finally:
        if set_env:
            os.environ.pop("PYDEVD_DISABLE_FILE_VALIDATION", None)
    if effects is not None:
        try:
            redo = effects.undo()
            if loaded:
                _preload_redo = redo
        except Exception as exc:
            _say(
                "could not undo what loading the debugger changed in the daemon (%s)"
                % (_describe(exc),)
            )
    if loaded:
        _freeze_for_fork()
    return loaded


# The modules whose absence means the debugger is not installed, rather
# than broken.
_DEBUGGER_MODULES = ("debugpy", "pydevd_pycharm", "pydevd")


def _not_installed(exc):
    """The words for a debugger that is not installed where the workers'
    Python looks (exc: the ImportError)."""
    if _pycharm():
        what, fix = "pydevd_pycharm", "pip install 'pydevd-pycharm~=<your PyCharm build>'"
    else:
        what, fix = "debugpy", "pip install 'debugpy>=1.6.7,<1.9'"
    return "%s is not installed in %s (%s): %s" % (what, sys.executable, _describe(exc), fix)


def _freeze_for_fork():
    """Takes what the daemon holds now out of the garbage collector's walks.
    The debugger's import leaves ~20,000 more objects that the collector
    tracks (debugpy; more with pydevd-pycharm), and every forked worker
    inherits them: each full collection in a worker walks them all, and
    touching their headers copies the daemon's memory pages into the
    worker. That made a CPU-bound UDF in tasks nobody debugs ~15 % slower
    (bench, worker overhead). gc.freeze() moves them to the permanent generation,
    which collections skip, as Python's documentation advises before a
    fork() without exec(); what the daemon holds then lives as long as it
    does anyway (modules, functions, classes)."""
    import gc

    freeze = getattr(gc, "freeze", None)
    if freeze is None:
        return
    try:
        gc.collect()
        freeze()
    except Exception as exc:
        _say(
            "could not freeze the daemon's objects before fork (%s); workers run as they would, a "
            "little slower" % (_describe(exc),)
        )
