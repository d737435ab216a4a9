"""The debugger the job brings: a debugpy wheel that `sparkdap submit`,
`conf` and `wrap` ship next to this file (--ship-debugger), used when the
executors' Python has no debugpy or one the wrapper calls unusable; for
PyCharm (--pycharm-build), a zip of the pydevd-pycharm of the user's build,
used when the executors' Python has no pydevd-pycharm or an unusable one.

The daemon unpacks it once, before it forks (_preload_debugger), into a
private directory that it removes as it exits, and puts that first on
sys.path; its workers inherit the loaded modules. A worker never unpacks
it: one that finds the daemon did not only says why."""

import os
import re
import sys

from .state import _describe, _say
from .support import _version_tuple
from .pydevd_compat import _library_root, _load_debugger, _UnsupportedDebugger

# What an executor variable says about the shipped debugger
# (workerwrap.EnvShipDebugger): "always" prefers it to the executors' own,
# "never" ignores it; anything else uses it only when the own one fails.
_SHIP_ENV = "SPARKDAP_SHIP_DEBUGGER"

# Only pure-Python debugpy wheels: a compiled one would have to match the
# executors' platform, which the submitting machine cannot know.
_WHEEL_RE = re.compile(r"^debugpy-([0-9][0-9.]*)-py2\.py3-none-any\.whl$")

# The zip `sparkdap submit --ide-kind pycharm --pycharm-build BUILD` builds
# from pydevd-pycharm's sdist (workerwrap.PyCharmArchiveName): its Python
# only, without the optional Cython speedups, so pydevd runs in pure-Python
# mode on any platform.
_PYCHARM_RE = re.compile(r"^pydevd_pycharm-([0-9]+(?:\.[0-9]+)+)-sparkdap\.zip$")

# The directory, inside the private one, that the pydevd-pycharm zip is
# unpacked into and that goes on sys.path. pydevd's trace dispatch skips
# its Cython speedups without a word, and without asking PyCharm to offer
# building them, when the directory holding its packages ends in ".egg"
# (pydevd_trace_dispatch.py, made so for the pure-Python pydevd-pycharm.egg
# of PyCharm's remote debugging). PYDEVD_USE_CYTHON=NO would do the same,
# but then pydevd 253 to 263 print, on Python 3.8 to 3.10, that their frame
# evaluator is off too, into the executor's log.
_PYCHARM_EGG = "pydevd_pycharm.egg"

# Modules of a debugpy and the pydevd it vendors, or of a pydevd-pycharm:
# what an unusable copy left in sys.modules, which would shadow the
# shipped one.
_DEBUGGER_PREFIXES = ("debugpy", "pydevd", "_pydevd", "_pydev", "pydev_", "pydevconsole")

_shipped_dir = None  # the daemon's private directory, the shipped debugger in it
_shipped_path = None  # where in it the debugger's modules are, first on sys.path
_shipped_owner = None  # the pid that made _shipped_dir, the one to remove it
_shipped_failure = None  # why the daemon could not use the shipped wheel


class _ShippedDebuggerError(_UnsupportedDebugger):
    """The shipped debugger cannot be used; the worker runs undebugged."""


def _ship_mode():
    mode = os.environ.get(_SHIP_ENV, "").strip().lower()
    return mode if mode in ("always", "never") else "auto"


def _wheel_dirs():
    """Where the job's debugger may be: the wrapper's own directory (the
    one PYTHONPATH names in local mode, the working directory on
    standalone and Kubernetes executors), and the working directory, where
    YARN puts spark.yarn.dist.files and every --py-files entry but .py
    files, which go in __pyfiles__."""
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    try:
        cwd = os.getcwd()
    except OSError:
        return dirs
    if cwd not in dirs:
        dirs.append(cwd)
    return dirs


def _archive_re(pycharm):
    return _PYCHARM_RE if pycharm else _WHEEL_RE


def _trusted_file(path, uid=None):
    """Whether path is a regular file that only this user (or root) can
    change: the file itself, or what a symlink names. YARN localizes every
    file it ships as a link into its own cache, owned by the container's
    user; a link to a file another user could rewrite is refused."""
    import stat

    uid = os.getuid() if uid is None else uid
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_uid in (uid, 0)
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _find_wheels(dirs, pycharm=False):
    """The pure-Python debugpy wheels in dirs (pycharm: the pydevd-pycharm
    zips), each once: regular files that only this user or root can
    change, directly or through a link (_trusted_file)."""
    name_re = _archive_re(pycharm)
    found = []
    seen = set()
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if not name_re.match(name) or name in seen:
                continue
            path = os.path.join(d, name)
            if _trusted_file(path):
                found.append(path)
                seen.add(name)
    return found


def _python_fits(requires, version_info):
    """Whether version_info meets a Requires-Python line made of
    comparisons (">=3.8", ">=3.8,<4", "!=3.9.*"); a clause it cannot read
    counts as met, as pip's markers are what the wheel's authors test."""
    have = tuple(version_info[:3])
    for clause in requires.split(","):
        m = re.match(r"^\s*(>=|<=|==|!=|>|<|~=)\s*([0-9][0-9.]*)(\.\*)?\s*$", clause)
        if not m:
            continue
        op, want = m.group(1), _version_tuple(m.group(2))
        if m.group(3) or op == "~=":
            prefix = have[: len(want)] if op != "~=" else have[: len(want) - 1]
            want_prefix = want if op != "~=" else want[:-1]
            equal = prefix == want_prefix
            if op == "==" and not equal or op == "!=" and equal:
                return False
            if op == "~=" and not (equal and have[: len(want)] >= want):
                return False
            continue
        cmp_have = have[: len(want)]
        ok = {
            ">=": cmp_have >= want,
            "<=": cmp_have <= want,
            ">": cmp_have > want,
            "<": cmp_have < want,
            "==": cmp_have == want,
            "!=": cmp_have != want,
        }[op]
        if not ok:
            return False
    return True


def _requires_python(path):
    """The wheel's Requires-Python ("" if none)."""
    import zipfile

    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.count("/") == 1 and name.endswith(".dist-info/METADATA"):
                for line in zf.read(name).decode("utf-8", "replace").splitlines():
                    if not line.strip():
                        break  # the headers end; the description follows
                    if line.lower().startswith("requires-python:"):
                        return line.split(":", 1)[1].strip()
                return ""
    raise ValueError("%s has no METADATA" % (os.path.basename(path),))


def _choose_wheel(paths, version_info, pycharm=False):
    """The newest of the wheels whose Requires-Python this Python meets:
    (path, None), or (None, why none fits). pycharm: the newest
    pydevd-pycharm zip (one, unless the user shipped several builds): it
    has no metadata, and pydevd-pycharm runs on every Python Spark does."""
    best, best_version, refused = None, None, []
    if pycharm:
        for path in paths:
            version = _version_tuple(_PYCHARM_RE.match(os.path.basename(path)).group(1))
            if best is None or version > best_version:
                best, best_version = path, version
        return (best, None) if best else (None, "no pydevd-pycharm shipped")
    for path in paths:
        name = os.path.basename(path)
        try:
            requires = _requires_python(path)
        except Exception as exc:
            refused.append("%s unreadable (%s)" % (name, _describe(exc)))
            continue
        if not _python_fits(requires, version_info):
            refused.append("%s needs Python %s" % (name, requires))
            continue
        version = _version_tuple(_WHEEL_RE.match(name).group(1))
        if best is None or version > best_version:
            best, best_version = path, version
    if best is None:
        return None, "; ".join(refused) or "no debugpy wheel shipped"
    return best, None


def _private_dir(base=None):
    """A new directory only this user can enter: mkdtemp creates it 0700
    under a random name with mkdir, which fails on anything already there,
    a planted symlink included. Checked again before use."""
    import stat
    import tempfile

    path = tempfile.mkdtemp(prefix="sparkdap-debugger-", dir=base)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError("%s is not a private directory" % (path,))
    return path


def _extract(wheel, base=None, into=None):
    """Unpacks wheel into a new private directory (into: a new directory of
    that name inside it) and returns the private directory. Member names
    that would leave it (absolute, "..") refuse the whole wheel; every
    directory and file is created new (O_EXCL, O_NOFOLLOW), so nothing is
    written through a link. On an error nothing is left."""
    import shutil
    import zipfile

    private = _private_dir(base)
    target = private
    try:
        if into is not None:
            target = os.path.join(private, into)
            os.mkdir(target, 0o700)
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = info.filename
                parts = name.split("/")
                if (
                    name.startswith("/")
                    or "\\" in name
                    or any(p in ("..", ".") for p in parts)
                    or ":" in parts[0]
                ):
                    raise ValueError("unsafe member %r in %s" % (name, os.path.basename(wheel)))
                path = target
                for d in parts[:-1]:
                    if not d:
                        continue
                    path = os.path.join(path, d)
                    if not os.path.isdir(path) or os.path.islink(path):
                        os.mkdir(path, 0o700)
                if name.endswith("/"):
                    continue
                path = os.path.join(path, parts[-1])
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                    shutil.copyfileobj(src, out)
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    return private


def _purge_debugger():
    """Forgets an unusable debugpy or pydevd-pycharm: its modules, and the
    sys.path entries under debugpy's directory (debugpy puts its vendored
    pydevd there)."""
    old = sys.modules.get("debugpy")
    old_dir = None
    if old is not None and getattr(old, "__file__", None):
        old_dir = os.path.dirname(os.path.abspath(old.__file__)) + os.sep
    for name in list(sys.modules):
        if name.startswith(_DEBUGGER_PREFIXES):
            del sys.modules[name]
    if old_dir is not None:
        sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and p.startswith(old_dir))]


def _own_problem(pycharm=False):
    """Loads the executors' own debugpy (pycharm: pydevd-pycharm):
    (module, None), or (None, why it cannot be used)."""
    import importlib.util

    module, what = ("pydevd_pycharm", "pydevd-pycharm") if pycharm else ("debugpy", "debugpy")
    try:
        spec = importlib.util.find_spec(module)
    except Exception as exc:
        spec, why = None, _describe(exc)
    else:
        why = "this Python has no %s" % (what,)
    if spec is None:
        return None, why
    try:
        return _load_debugger(pycharm), None
    except _UnsupportedDebugger as exc:
        return None, str(exc)
    except Exception as exc:
        return None, "its %s fails to load (%s)" % (what, _describe(exc))


def _use_shipped(why, in_daemon, dirs=None, version_info=None, base=None, pycharm=False):
    """Loads the shipped debugpy (pycharm: pydevd-pycharm), unpacking it
    first in the daemon; why is the reason the executors' own is not used.
    Raises _ShippedDebuggerError with one clear line when it cannot."""
    global _shipped_dir, _shipped_path, _shipped_owner, _shipped_failure
    if _shipped_dir is None:
        if not in_daemon:
            raise _ShippedDebuggerError(
                _shipped_failure or "%s, and the daemon did not unpack the shipped debugger" % why
            )
        wheels = _find_wheels(_wheel_dirs() if dirs is None else dirs, pycharm)
        wheel, none_fits = _choose_wheel(wheels, version_info or sys.version_info, pycharm)
        if wheel is None:
            _shipped_failure = "%s, and no shipped debugger fits: %s" % (why, none_fits)
            raise _ShippedDebuggerError(_shipped_failure)
        into = _PYCHARM_EGG if pycharm else None
        try:
            _shipped_dir = _extract(wheel, base, into)
        except Exception as exc:
            _shipped_failure = "%s, and the shipped %s could not be unpacked (%s)" % (
                why,
                os.path.basename(wheel),
                _describe(exc),
            )
            raise _ShippedDebuggerError(_shipped_failure) from exc
        _shipped_owner = os.getpid()
        _shipped_path = os.path.join(_shipped_dir, into) if into else _shipped_dir
        _purge_debugger()
        sys.path.insert(0, _shipped_path)
        try:
            module = _load_debugger(pycharm)
        except Exception as exc:
            _shipped_failure = "%s, and the shipped %s does not load (%s)" % (
                why,
                os.path.basename(wheel),
                _describe(exc),
            )
            _purge_debugger()
            raise _ShippedDebuggerError(_shipped_failure) from exc
        _library_root(_shipped_dir)
        _say(
            "using %s %s shipped with the job (%s)"
            % (
                "pydevd-pycharm" if pycharm else "debugpy",
                getattr(module, "__version__", "?"),
                why,
            )
        )
        return module
    if not sys.path or sys.path[0] != _shipped_path:
        sys.path.insert(0, _shipped_path)
    return _load_debugger(pycharm)


def _is_shipped_archive(path):
    name = os.path.basename(path.rstrip("/"))
    return bool(_WHEEL_RE.match(name) or _PYCHARM_RE.match(name))


def _load_own_or_shipped(pycharm, in_daemon):
    """The debugger a worker attaches with: the executors' own if usable
    (or with --ship-debugger always, the shipped one first), else the one
    the job shipped. in_daemon: the daemon's preload, the only place that
    unpacks a wheel."""
    if _ship_mode() == "never":
        return _load_debugger(pycharm)
    # Spark puts every --py-files entry on a worker's sys.path, the wheel
    # and the pydevd-pycharm zip too, and the debugger would import from
    # inside the zip, which pydevd cannot run from.
    sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and _is_shipped_archive(p))]
    if _shipped_dir is not None:
        return _use_shipped("", in_daemon, pycharm=pycharm)
    if not _find_wheels(_wheel_dirs(), pycharm):
        return _load_debugger(pycharm)
    if _ship_mode() == "always":
        return _use_shipped("--ship-debugger always", in_daemon, pycharm=pycharm)
    module, why = _own_problem(pycharm)
    if module is not None:
        return module
    return _use_shipped(why, in_daemon, pycharm=pycharm)


def _is_shipped_path(path):
    """Whether path is the shipped debugger (its wheel or zip, which Spark
    puts on sys.path with the --py-files, or where it was unpacked): never
    the user's code."""
    if not isinstance(path, str):
        return False
    if _is_shipped_archive(path):
        return True
    return _shipped_dir is not None and (
        path == _shipped_dir or path.startswith(_shipped_dir + os.sep)
    )


def _close_shipped():
    """Removes the unpacked wheel as the daemon exits; a worker forked from
    it leaves it alone."""
    global _shipped_dir, _shipped_path
    if _shipped_dir is None or _shipped_owner != os.getpid():
        return
    try:
        import shutil

        shutil.rmtree(_shipped_dir, ignore_errors=True)
    except Exception:
        pass
    _shipped_dir = _shipped_path = None
