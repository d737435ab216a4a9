"""Which debuggers the wrapper debugs with: the releases it is tested with,
and, for any release, whether the pydevd internals that keep a worker from
being held forever are there.

The wrapper's promises (a connect that always ends, a lease on stops,
output batched rather than sent line by line) rest on private parts of
pydevd (pydevd_compat.py). Their names have held from debugpy 1.5 to now
and across PyCharm's builds; what moves is behaviour, which the debugger
matrix tests each supported release for (requirements-debuggers.txt). So
the verdict on a debugger is taken from what it has, not from its version
string:

- every internal there, release in SUPPORTED_RANGES: supported;
- every internal there, release outside: debugged, one line naming the
  release as untested;
- an internal missing: the worker runs undebugged, one line naming it;
  SPARKDAP_UNTESTED_DEBUGGER=1 on the executors tries it anyway.

Standalone on purpose (the standard library only, no relative imports):
`sparkdap doctor` runs this file's source with the executors' Python
(`python -c`, then _report) to tell the user the same verdict a worker
would reach.
"""

import os
import sys

# The releases the debugger matrix tests, as (first, last) version tuples
# compared on their leading numbers: debugpy 1.6.7, 1.7.0 and every 1.8.x;
# pydevd-pycharm of every PyCharm build from 2025.3 (253.*) to 2026.3
# (263.*). doctor's SupportedDebuggers (doctor) says the same.
SUPPORTED_RANGES = {
    "debugpy": ((1, 6, 7), (1, 8, 999999)),
    "pydevd-pycharm": ((253,), (263, 999999, 999999)),
}

# Where the words for each range come from, for the lines people read.
SUPPORTED_WORDS = {
    "debugpy": "debugpy 1.6.7 to 1.8.x",
    "pydevd-pycharm": "pydevd-pycharm 253.* to 263.* (PyCharm 2025.3 to 2026.3)",
}

UNTESTED_ENV = "SPARKDAP_UNTESTED_DEBUGGER"


def _version_tuple(version):
    """The leading numbers of a version string: "1.6.7.post1" -> (1, 6, 7)."""
    out = []
    for part in str(version).split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(out)


def _in_supported_range(name, version):
    v = _version_tuple(version)
    if not v:
        return False
    first, last = SUPPORTED_RANGES[name]
    return first <= v <= last


def _has_attr(module_name, path):
    """Whether sys.modules[module_name] has the dotted attribute path. Only
    modules already loaded are looked at: importing a _pydevd_bundle module
    here could load another pydevd copy from sys.path."""
    obj = sys.modules.get(module_name)
    if obj is None:
        return False
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return True


def _code_names(module_name, path):
    """The names a function of a loaded module uses (co_names and
    co_varnames), or an empty set."""
    obj = sys.modules.get(module_name)
    for part in path.split("."):
        obj = getattr(obj, part, None)
    code = getattr(obj, "__code__", None)
    if code is None:
        return frozenset()
    return frozenset(code.co_names) | frozenset(code.co_varnames)


def _uses(module_name, path, *names):
    found = _code_names(module_name, path)
    return all(n in found for n in names)


# Each internal the wrapper's promises need: (what needs it, the internal as
# people would look it up, the test). pydevd_compat.py uses exactly these.
def _internals(pycharm):
    comm = "_pydevd_bundle.pydevd_comm"
    consts = "_pydevd_bundle.pydevd_constants"
    checks = [
        (
            "the connect guard",
            "pydevd_constants.get_global_debugger",
            lambda: _has_attr(consts, "get_global_debugger"),
        ),
        (
            "the connect guard",
            "PyDB.pydb_disposed",
            lambda: _uses("pydevd", "PyDB.__init__", "pydb_disposed"),
        ),
    ]
    if pycharm:
        checks.append(
            (
                "the connect guard",
                "pydevd._locked_settrace spinning on py_db.ready_to_run",
                lambda: _uses("pydevd", "_locked_settrace", "py_db", "ready_to_run"),
            )
        )
    else:
        checks.append(
            (
                "the connect guard",
                "PyDB.wait_for_ready_to_run",
                lambda: _uses("pydevd", "PyDB.wait_for_ready_to_run", "ready_to_run"),
            )
        )
    checks += [
        (
            "the lease on stops",
            "PyDB.do_wait_suspend",
            lambda: _has_attr("pydevd", "PyDB.do_wait_suspend"),
        ),
        (
            "the lease on stops",
            "ReaderThread.sock",
            lambda: _uses(comm, "ReaderThread.__init__", "sock"),
        ),
        (
            "the lease on stops",
            "PyDB.dispose_and_kill_all_pydevd_threads",
            lambda: _has_attr("pydevd", "PyDB.dispose_and_kill_all_pydevd_threads"),
        ),
        (
            "the lease on stops",
            "PyDB.on_breakpoints_changed",
            lambda: _has_attr("pydevd", "PyDB.on_breakpoints_changed"),
        ),
        ("the lease on stops", "pydevd.stoptrace", lambda: _has_attr("pydevd", "stoptrace")),
    ]
    if not pycharm:
        io = "_pydevd_bundle.pydevd_io"
        checks += [
            (
                "output batching",
                "pydevd_io._RedirectionsHolder",
                lambda: _has_attr(io, "_RedirectionsHolder"),
            ),
            (
                "output batching",
                "RedirectToPyDBIoMessages._on_write",
                lambda: _uses(io, "RedirectToPyDBIoMessages.__init__", "_on_write"),
            ),
            (
                "output batching",
                "WriterThread._cmd_queue",
                lambda: _uses(comm, "WriterThread.__init__", "_cmd_queue"),
            ),
        ]
    return checks


def _missing_internals(pycharm):
    """The internals the loaded debugger lacks, as "internal (for what)"."""
    missing = []
    for need, name, present in _internals(pycharm):
        try:
            ok = present()
        except Exception:
            ok = False
        if not ok:
            missing.append("%s (for %s)" % (name, need))
    return missing


def _forced():
    return os.environ.get(UNTESTED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _verdict(name, version, missing):
    """(kind, words) for a loaded debugger: kind is "supported",
    "untested" (debugged all the same) or "unusable" (undebugged unless
    forced); words say why, in one line."""
    tested = _in_supported_range(name, version)
    if missing:
        shown = ", ".join(missing[:3])
        if len(missing) > 3:
            shown += " and %d more" % (len(missing) - 3)
        what = "%s %s lacks %s" % (name, version, shown)
        if not tested:
            what += "; sparkdap supports %s" % SUPPORTED_WORDS[name]
        return "unusable", what
    if tested:
        return "supported", "%s %s" % (name, version)
    return (
        "untested",
        "%s %s is untested (sparkdap supports %s); it has every internal the wrapper uses"
        % (
            name,
            version,
            SUPPORTED_WORDS[name],
        ),
    )


def _import_for_probe(pycharm):
    """Imports the debugger as a worker would; returns (name, version)."""
    if pycharm:
        import pydevd_pycharm
        import pydevd

        return "pydevd-pycharm", str(getattr(pydevd_pycharm, "__version__", "unknown"))
    import debugpy
    from debugpy import server as _server  # noqa: F401
    import debugpy.server.api
    import pydevd  # noqa: F401

    return "debugpy", str(getattr(debugpy, "__version__", "unknown"))


def _report(pycharm, out=None):
    """doctor's entry: imports the debugger and writes one line,
    `<kind> <name> <version> <python> <words>` (kind: supported,
    untested, unusable, or absent with the import's error), tab-separated.
    Returns the exit status."""
    out = out or sys.stdout
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    python = sys.version.split()[0]
    name = "pydevd-pycharm" if pycharm else "debugpy"
    try:
        name, version = _import_for_probe(pycharm)
    except BaseException as exc:
        out.write(
            "\t".join(["absent", name, "-", python, "%s: %s" % (type(exc).__name__, exc)]) + "\n"
        )
        return 0
    kind, words = _verdict(name, version, _missing_internals(pycharm))
    out.write("\t".join([kind, name, version, python, words.replace("\t", " ")]) + "\n")
    return 0
