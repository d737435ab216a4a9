"""Which tasks are debugged, and where their code lives: the task's labels, the
source files of the code it unpickled, the roots the proxy maps paths with."""

import os
import sys

from .state import _st
from .shipped import _is_shipped_path


def _selected(cfg, task):
    if cfg["partitions"] is not None and task["partitionId"] not in cfg["partitions"]:
        return False
    if cfg["stages"] is not None and task["stageId"] not in cfg["stages"]:
        return False
    # The live selection's (selection.py); settings never name executors.
    executors = cfg.get("executors")
    if executors is not None and _executor_id() not in executors:
        return False
    rate = cfg["sample_rate"]
    if rate < 1.0:
        # Deterministic per (stage, partition): a retried attempt of a
        # sampled task is sampled again, and every run picks the same tasks.
        import zlib

        key = ("%d:%d" % (task["stageId"], task["partitionId"])).encode("ascii")
        if zlib.crc32(key) / 4294967296.0 >= rate:
            return False
    return True


_TaskNames = None


def _task_names_class():
    global _TaskNames
    if _TaskNames is None:
        import collections

        class _TaskNames(
            collections.namedtuple(
                "sparkdap", ("stage", "partition", "attempt", "executor", "task_attempt_id")
            )
        ):
            """The task a debugged worker runs, as a breakpoint condition,
            log message, watch or the debug console names it:
            `sparkdap.partition == 37`. Read-only; a name it lacks raises
            AttributeError, which the IDE shows as the expression's error."""

            __slots__ = ()

    return _TaskNames


def _expose_task(task):
    """Puts the task's names in builtins as `sparkdap` while the worker
    debugs it, so that every frame of the task sees them without an
    import; a name the task's own code binds shadows it, as it would any
    builtin. task None takes them away (the worker runs a task that is not
    debugged). A `sparkdap` builtin the wrapper did not make is left alone."""
    import builtins

    names = _task_names_class()
    current = getattr(builtins, "sparkdap", None)
    if current is not None and not isinstance(current, names):
        return
    if task is None:
        if current is not None:
            del builtins.sparkdap
        return
    builtins.sparkdap = names(
        stage=task["stageId"],
        partition=task["partitionId"],
        attempt=task["attemptNumber"],
        executor=_executor_id(),
        task_attempt_id=task["taskAttemptId"],
    )


def _executor_id():
    env = os.environ
    if env.get("SPARK_EXECUTOR_ID"):  # Kubernetes
        return env["SPARK_EXECUTOR_ID"]
    if env.get("CONTAINER_ID"):  # YARN
        return env["CONTAINER_ID"]
    url = env.get("SPARK_LOG_URL_STDERR", "")  # standalone
    if "executorId=" in url:
        return url.split("executorId=", 1)[1].split("&", 1)[0]
    try:
        # Standalone work dir: <worker dir>/<app id>/<executor id>
        parent, leaf = os.path.split(os.getcwd())
        if leaf.isdigit() and os.path.basename(parent).startswith("app-"):
            return leaf
    except OSError:
        pass
    # Local mode: the driver is the only executor.
    return "driver"


def _roots():
    """Where this worker loads code from, for the proxy's path mapping."""
    st = _st()
    # The shipped debugger is never the user's code: leave it out of the
    # roots the proxy maps paths with.
    roots = {"cwd": os.getcwd(), "sysPath": [p for p in sys.path if p and not _is_shipped_path(p)]}
    try:
        from pyspark.files import SparkFiles

        if SparkFiles._root_directory:
            roots["sparkFiles"] = SparkFiles._root_directory
    except Exception:
        pass
    if st.code_dirs:
        roots["codeDirs"] = list(st.code_dirs)
    if os.environ.get("SPARKDAP_DRIVER_DIR"):
        roots["driverDir"] = os.environ["SPARKDAP_DRIVER_DIR"]
    elif st.code_dirs:
        # Where closures pickled by value (the driver's script, a notebook,
        # a Spark Connect client) claim to live.
        roots["driverDir"] = st.code_dirs[0]
    return roots


# Bounds on what one worker process remembers of the code it unpickled, and
# on the objects walked per command to find it.
_MAX_CODE_FILES = 256
_MAX_CODE_DIRS = 8
_MAX_WALK = 4000
_MAX_ITEMS = 256


def _code_files(command):
    """Source files of the code objects reachable from an unpickled task
    command: its functions, their nested code, closures, defaults and the
    globals they name (cloudpickle ships a by-value function's globals with
    it), methods of the classes it holds. Bounded by _MAX_WALK objects."""
    import functools
    import types

    files = []
    seen = set()
    stack = [command]
    budget = _MAX_WALK
    leaves = (str, bytes, bytearray, int, float, complex, bool, type(None), types.ModuleType)
    while stack and budget > 0:
        obj = stack.pop()
        if isinstance(obj, leaves) or id(obj) in seen:
            continue
        seen.add(id(obj))
        budget -= 1
        if isinstance(obj, types.CodeType):
            files.append(obj.co_filename)
            stack.extend(c for c in obj.co_consts if isinstance(c, types.CodeType))
        elif isinstance(obj, types.FunctionType):
            code = obj.__code__
            stack.append(code)
            for cell in obj.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
            stack.extend(obj.__defaults__ or ())
            stack.extend((obj.__kwdefaults__ or {}).values())
            stack.extend(obj.__dict__.values())  # __wrapped__ of a decorated function
            names, codes = set(), [code]
            while codes and len(names) < _MAX_ITEMS:
                c = codes.pop()
                names.update(c.co_names)
                codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
            g = obj.__globals__
            stack.extend(g[n] for n in names if n in g)
        elif isinstance(obj, (types.MethodType, staticmethod, classmethod)):
            stack.append(obj.__func__)
        elif isinstance(obj, functools.partial):
            stack.append(obj.func)
            stack.extend(obj.args[:_MAX_ITEMS])
            stack.extend(list((obj.keywords or {}).values())[:_MAX_ITEMS])
        elif isinstance(obj, (tuple, list)):
            stack.extend(obj[:_MAX_ITEMS])
        elif isinstance(obj, (set, frozenset)):
            stack.extend(list(obj)[:_MAX_ITEMS])
        elif isinstance(obj, dict):
            stack.extend(list(obj.values())[:_MAX_ITEMS])
        elif isinstance(obj, type):
            if obj.__module__ != "builtins":
                stack.extend(list(vars(obj).values())[:_MAX_ITEMS])
        else:
            # An instance: its class's methods, and its attributes (a
            # callable object or a UDF wrapper holds the user's function).
            cls = type(obj)
            if cls.__module__ != "builtins":
                stack.append(cls)
                try:
                    attrs = object.__getattribute__(obj, "__dict__")
                except Exception:
                    attrs = None
                if isinstance(attrs, dict):
                    stack.append(attrs)
    return files


def _record_code(command):
    """Trusts the source files of the functions a task unpickled, and puts
    their directories that are no other root first among the code roots:
    the proxy maps this task's paths against them, and resends the
    breakpoints when they change."""
    st = _st()
    known = None
    for filename in _code_files(command):
        if (
            not isinstance(filename, str)
            or not os.path.isabs(filename)
            or not _is_user_file(filename)
            or any(
                ext in filename for ext in (".zip/", ".egg/", ".whl/")
            )  # sys.path names archives
        ):
            continue
        filename = os.path.normpath(filename)
        if filename not in st.code_files:
            if len(st.code_files) >= _MAX_CODE_FILES:
                continue
            st.code_files.add(filename)
        directory = os.path.dirname(filename)
        if directory in st.task_dirs or len(st.task_dirs) >= _MAX_CODE_DIRS:
            continue
        if known is None:
            roots = _roots()
            known = set(roots["sysPath"]) | {roots["cwd"], roots.get("sparkFiles")}
        if directory not in known:
            st.task_dirs.append(directory)
    st.code_dirs = (st.task_dirs + [d for d in st.code_dirs if d not in st.task_dirs])[
        :_MAX_CODE_DIRS
    ]


def _read_archive_sources():
    """pydevd serves code the IDE has no copy of (PySpark's own frames, a
    --py-files zip) from linecache, which cannot read a file inside a zip
    without the module's loader at hand. Teach it to read the archive."""
    import linecache

    orig = linecache.updatecache
    if getattr(orig, "_sparkdap", False):
        return

    def updatecache(filename, module_globals=None):
        lines = orig(filename, module_globals)
        if lines or not isinstance(filename, str):
            return lines
        for ext in (".zip/", ".egg/", ".whl/"):
            i = filename.find(ext)
            if i < 0:
                continue
            try:
                import zipfile

                with zipfile.ZipFile(filename[: i + len(ext) - 1]) as archive:
                    text = archive.read(filename[i + len(ext) :]).decode("utf-8", "replace")
            except Exception:
                return lines
            lines = text.splitlines(True)
            # mtime None: checkcache leaves loader-style entries alone.
            linecache.cache[filename] = (len(text), None, lines, filename)
            return lines
        return lines

    updatecache._sparkdap = True
    linecache.updatecache = updatecache


def task_label(task):
    """The task as people read it: the partition first, since that is what
    tells the workers of one stage apart where an IDE cuts a name short
    (VS Code's CALL STACK at its default width), then the stage; the
    attempt only for a retry."""
    label = "partition %d \u00b7 stage %d" % (task["partitionId"], task["stageId"])
    if task["attemptNumber"]:
        label += " \u00b7 attempt %d" % task["attemptNumber"]
    return label


def _task_body(cfg, task):
    """The worker's and task's description, as the hello and the sparkdapTask
    event carry it."""
    import socket

    body = dict(task)
    body.update(
        {
            "executorId": _executor_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "label": task_label(task),
            "postMortem": bool(cfg["post_mortem"]),
            "wait": bool(cfg["wait"]),
            "roots": _roots(),
        }
    )
    return body


_library_prefixes = None
_user_file_cache = {}


def _is_user_file(filename):
    cached = _user_file_cache.get(filename)
    if cached is not None:
        return cached
    global _library_prefixes
    if _library_prefixes is None:
        import sysconfig

        prefixes = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                prefixes.add(os.path.realpath(path) + os.sep)
                prefixes.add(path + os.sep)
        if __package__:
            # The repository's package (tests, the benchmark): its modules
            # are the wrapper's own files, as the one shipped file is.
            prefixes.add(os.path.dirname(os.path.abspath(__file__)) + os.sep)
        for mod in ("pyspark", "py4j", "debugpy"):
            m = sys.modules.get(mod)
            if m is not None and getattr(m, "__file__", None):
                d = os.path.dirname(os.path.dirname(os.path.abspath(m.__file__)))
                prefixes.add(os.path.join(d, mod) + os.sep)
        _library_prefixes = tuple(prefixes)
    user = not (
        filename.startswith("<")
        or filename == __file__
        or os.path.abspath(filename) == os.path.abspath(__file__)
        or "pyspark.zip" in filename
        or "py4j-" in filename
        or "cloudpickle" in filename
        or filename.startswith(_library_prefixes)
    )
    _user_file_cache[filename] = user
    return user


def _absolute_sys_path():
    """Spark's worker puts the --py-files archives on sys.path relative to
    the executor's working directory ("./deps.zip" on YARN and standalone,
    where SparkFiles' root is "."), so code imported from them gets a
    relative co_filename. pydevd cannot resolve a relative path inside an
    archive (os.path.exists is false for it): it falls back to a wrong
    absolute path, and breakpoints there never bind though the IDE shows
    them verified. Make the entries absolute before the task's code is
    unpickled; the worker never changes directory, so they name the same
    files. "" (the working directory by design) is left alone, and
    duplicates are dropped: Spark adds the relative entry again for every
    task of a reused worker."""
    cwd = None
    seen = set()
    paths = []
    changed = False
    for p in sys.path:
        if isinstance(p, str) and p and not os.path.isabs(p):
            if cwd is None:
                cwd = os.getcwd()
            p = os.path.normpath(os.path.join(cwd, p))
            changed = True
        if isinstance(p, str) and p in seen:
            changed = True
            continue
        if isinstance(p, str):
            seen.add(p)
        paths.append(p)
    if changed:
        sys.path[:] = paths
