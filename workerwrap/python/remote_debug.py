# The body of remote_debug.py, the module `sparkdap wrap` generates: the
# generated file is a short settings header (workerwrap/template/header.py.tmpl,
# which defines _BAKED and documents the SPARKDAP_* variables) followed by this
# file, unchanged. It is a plain module so that its helpers can be imported
# and tested on their own (workerwrap/python/tests) and linted (ruff); it
# must keep running on every Python PySpark 3.5 supports (3.8 and later).
#
# Nothing in here may write to stdout before pyspark.daemon.manager() has
# written its port: the JVM reads that number from the daemon's stdout.

import os
import sys

# The settings header's; None when the module is imported from the
# repository (its tests, `sparkdap doctor`'s probe), where nothing was baked
# in: a worker would not know where to connect, and fails open (_config).
_BAKED = globals().get("_BAKED")


def _pycharm():
    """Whether the wrapper was generated for PyCharm (`sparkdap wrap --ide
    pycharm`): it then loads pydevd-pycharm and speaks pydevd's line protocol
    to the proxy instead of loading debugpy."""
    return isinstance(_BAKED, dict) and _BAKED.get("ide") == "pycharm"


class _State(object):
    """Per worker process state. A worker is always forked from the daemon
    parent, never from another worker, so state keyed by pid is fresh in each
    worker even though the parent's copy is inherited."""

    def __init__(self, pid):
        self.pid = pid
        self.config = None  # dict once parsed
        self.disabled = False  # config invalid or debugger unusable
        self.debugger = None  # None: not tried, "connected", "failed"
        self.task_key = None  # taskAttemptId of the task being read
        self.selected = False
        self.read_depth = 0
        self.wait_armed = False
        self.tracing = True
        self.prepared = False
        # A selected task whose debugger is not attached yet: (cfg, task).
        # Attaching waits until the task's code is unpickled (see _reader).
        self.pending = None
        self.current_task = None  # the task the debugger was last attached for
        # Source files of the code this worker unpickled for debugged tasks,
        # and the directories among them that no other root names.
        # code_dirs: the current task's first, then the most recent ones.
        self.code_files = set()
        self.code_dirs = []
        self.task_dirs = []  # the directories of the current task's code
        self.sent_dirs = None  # code_dirs as the proxy last heard them
        self.hello_nonce = ""  # PyCharm mode: the accepted hello's nonce
        self.pydevd_token = None  # the accepted hello's one-time pydevd token


_state = _State(None)


def _st():
    global _state
    pid = os.getpid()
    if _state.pid != pid:
        _state = _State(pid)
    return _state


def _say(msg):
    # One line, flushed at once: worker stderr ends up in the executor log
    # interleaved with other workers.
    try:
        sys.stderr.write("sparkdap: [pid %d] %s\n" % (os.getpid(), msg))
        sys.stderr.flush()
    except Exception:
        pass


def _unavailable(reason):
    st = _st()
    st.debugger = "failed"
    _say("debugger unavailable (%s); task runs undebugged" % reason)


# --- configuration -----------------------------------------------------------


def _parse_ids(name, text):
    text = text.strip()
    if text in ("", "all", "*"):
        return None
    ids = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        value = int(part)
        if value < 0:
            raise ValueError("%s: negative id %d" % (name, value))
        ids.append(value)
    return ids


def _parse_seconds(name, text):
    text = text.strip()
    scale = 1.0
    for suffix, factor in (("ms", 0.001), ("s", 1.0)):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    value = float(text) * scale
    if not (0 < value <= 600):
        raise ValueError("%s must be between 0 and 600 seconds" % name)
    return value


_DEFAULT_LEASE = 60.0  # workerwrap.DefaultLease

# A lease shorter than this would lapse on a proxy that is only slow: the
# proxy proves it is there every 2 s (dap.DefaultLeasePing,
# pycharm.DefaultLeasePing). workerwrap.MinLease and MaxLease say the same.
_MIN_LEASE = 10.0
_MAX_LEASE = 86400.0


def _parse_lease(name, text):
    """A lease in seconds ("60", "60s", "1.5m"); 0 turns the lease off."""
    text = text.strip()
    scale = 1.0
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    value = float(text) * scale
    if value == 0:
        return 0.0
    if not (_MIN_LEASE <= value <= _MAX_LEASE):
        raise ValueError("%s must be 0 (no lease) or between %g and %g seconds" % (name, _MIN_LEASE, _MAX_LEASE))
    return value


def _parse_bool(name, text):
    text = text.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("%s: not a boolean" % name)


def _parse_rate(name, text):
    try:
        rate = float(text)
    except ValueError:
        rate = -1.0
    if not (0.0 < rate <= 1.0):
        raise ValueError("want a number in (0, 1]")
    return rate


def _parse_proxy(name, text):
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError("%s: want host:port" % name)
    port = int(port)
    if not (0 < port < 65536):
        raise ValueError("%s: port out of range" % name)
    return host, port


def _load_config():
    if not isinstance(_BAKED, dict):
        raise ValueError("no settings: this file was not generated by `sparkdap wrap`")
    cfg = dict(_BAKED)
    cfg["proxy"] = _parse_proxy("proxy", cfg["proxy"])
    # A wrapper generated before the lease existed bakes none.
    cfg.setdefault("lease", _DEFAULT_LEASE)
    env = os.environ
    overrides = (
        ("SPARKDAP_PROXY", "proxy", _parse_proxy),
        ("SPARKDAP_PARTITIONS", "partitions", _parse_ids),
        ("SPARKDAP_STAGES", "stages", _parse_ids),
        ("SPARKDAP_CONNECT_TIMEOUT", "connect_timeout", _parse_seconds),
        ("SPARKDAP_HANDSHAKE_TIMEOUT", "handshake_timeout", _parse_seconds),
        ("SPARKDAP_WAIT", "wait", _parse_bool),
        ("SPARKDAP_POST_MORTEM", "post_mortem", _parse_bool),
        ("SPARKDAP_SAMPLE_RATE", "sample_rate", _parse_rate),
        ("SPARKDAP_LEASE", "lease", _parse_lease),
    )
    for var, key, parse in overrides:
        if var in env:
            try:
                cfg[key] = parse(var, env[var])
            except ValueError as exc:
                raise ValueError("invalid %s=%r: %s" % (var, env[var], exc)) from exc
    # An empty variable counts as unset so that spark.executorEnv.X= can not
    # silently replace a baked-in token with nothing.
    cfg["token"] = env.get(cfg["token_env"]) or cfg["token"]
    return cfg


def _config():
    st = _st()
    if st.config is None and not st.disabled:
        try:
            st.config = _load_config()
        except Exception as exc:
            st.disabled = True
            _unavailable(str(exc))
    return st.config


# --- task selection ----------------------------------------------------------


def _selected(cfg, task):
    if cfg["partitions"] is not None and task["partitionId"] not in cfg["partitions"]:
        return False
    if cfg["stages"] is not None and task["stageId"] not in cfg["stages"]:
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


# --- debugger ----------------------------------------------------------------


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


class _QuietPydevd(object):
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


class _NoHelloReply(Exception):
    """The proxy accepted the connection but did not answer in time."""


_HELLO = b"SPARKDAP/2 "


class _HelloClosed(ConnectionResetError):
    """The proxy closed the connection before it answered the hello."""

    def __init__(self, received):
        ConnectionResetError.__init__(self, "proxy closed the connection without a hello reply")
        self.received = received  # what it sent instead, for diagnostics


class _ProxyUnproven(Exception):
    """Whatever answered on the executor port did not prove it knows the
    token: not the proxy (another program bound the port first), or a proxy
    with another token. The worker says nothing more and loads no debugger."""


def _mac(token, label, wn, pn):
    """HMAC-SHA256(token, label, wn, pn), hex: the hello's proofs and its
    one-time pydevd token (worker/challenge.go computes the same)."""
    import hashlib
    import hmac

    msg = "%s\n%s\n%s" % (label, wn, pn)
    return hmac.new(token.encode("utf-8"), msg.encode("utf-8"), hashlib.sha256).hexdigest()


def _hello_exchange(sock, token, body, timeout):
    """The worker's side of the hello (see worker/challenge.go): sends a
    fresh nonce, checks the proxy's proof of the token, and only then sends
    body with the worker's own proof. The token itself never crosses the
    wire. Returns (reply, pydevd_token): the proxy's last line less its
    "SPARKDAP/2 " prefix, and the one-time token the debugger presents
    instead of the real one. The whole exchange is bounded by timeout
    seconds: raises _NoHelloReply past it, _HelloClosed if the proxy closes
    the connection first, _ProxyUnproven if its proof does not hold."""
    import binascii
    import hmac
    import json
    import socket
    import time

    deadline = time.monotonic() + timeout
    buf = [b""]

    def reply_line():
        # The proxy may have sent pydevd's first request before it saw the
        # hello: skip to the next hello line.
        while True:
            data = buf[0]
            mark = data.find(_HELLO)
            end = data.find(b"\n", mark) if mark >= 0 else -1
            if end >= 0:
                buf[0] = data[end + 1:]
                return data[mark + len(_HELLO):end].decode("utf-8", "replace")
            left = deadline - time.monotonic()
            if left <= 0 or len(data) > 65536:
                raise _NoHelloReply()
            sock.settimeout(left)
            try:
                chunk = sock.recv(4096)
            except socket.timeout:
                raise _NoHelloReply() from None
            if not chunk:
                raise _HelloClosed(data)
            buf[0] = data + chunk

    token = token or ""
    wn = binascii.hexlify(os.urandom(16)).decode("ascii")
    sock.settimeout(timeout)
    sock.sendall(_HELLO + b"HELLO " + wn.encode("ascii") + b"\n")
    challenge = reply_line()
    if challenge.startswith("REFUSED "):
        return challenge, None
    parts = challenge.split(" ")
    if (
        len(parts) != 3
        or parts[0] != "CHALLENGE"
        or not hmac.compare_digest(
            parts[2].encode("utf-8"), _mac(token, "sparkdap/2 proxy", wn, parts[1]).encode("ascii")
        )
    ):
        raise _ProxyUnproven()
    pn = parts[1]
    body = dict(body, proof=_mac(token, "sparkdap/2 worker", wn, pn))
    sock.sendall(_HELLO + json.dumps(body).encode("utf-8") + b"\n")
    return reply_line(), _mac(token, "sparkdap/2 pydevd", wn, pn)


def _hello_accepted(reply):
    """Reads a hello reply: (True, nonce) if the proxy admitted the worker,
    with the nonce PyCharm mode sends ("" from a DAP proxy), else (False,
    the reason it gave)."""
    if reply == "OK" or reply.startswith("OK "):
        return True, reply[3:]
    return False, reply.replace("REFUSED ", "", 1)


def _hello(cfg, task):
    """Introduces this worker to the proxy before any debugger is loaded:
    each side proves it knows the token, then the proxy checks its session
    limit and learns the task label and where this worker loads code from
    (see worker/hello.go). Returns None if accepted, else the reason.
    Raises OSError if unreachable, _ProxyUnproven if the peer is no proxy
    of this token."""
    import socket

    host, port = cfg["proxy"]
    body = _task_body(cfg, task)
    sock = socket.create_connection((host, port), timeout=cfg["connect_timeout"])
    try:
        reply, pydevd_token = _hello_exchange(sock, cfg["token"], body, cfg["handshake_timeout"])
    finally:
        sock.close()
    accepted, detail = _hello_accepted(reply)
    if not accepted:
        return detail
    st = _st()
    # PyCharm mode: a one-time nonce that names the guard thread.
    st.hello_nonce = detail
    # What debugpy.connect presents as its access token: pydevd hands that
    # to whoever asks, so it is good for this hello only.
    st.pydevd_token = pydevd_token
    return None


def _roots():
    """Where this worker loads code from, for the proxy's path mapping."""
    st = _st()
    roots = {"cwd": os.getcwd(), "sysPath": [p for p in sys.path if p]}
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
            or any(ext in filename for ext in (".zip/", ".egg/", ".whl/"))  # sys.path names archives
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
    st.code_dirs = (st.task_dirs + [d for d in st.code_dirs if d not in st.task_dirs])[:_MAX_CODE_DIRS]


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
                return os.path.normpath(name) in _st().code_files or (prefix is not None and name.startswith(prefix))
            except Exception:
                return False

        exists._sparkdap = True
        pydevd_file_utils.exists = exists
    except Exception:
        pass


# What pydevd-pycharm writes to the worker's stderr (the job's output) for
# a breakpoint in a file this executor does not have.
_MISSING_FILE_WARNING = "pydev debugger: warning: trying to add breakpoint to file that does not exist"


class _StderrWithoutMissingFileWarnings(object):
    """sys.stderr as pydevd's command processor sees it: the same stream,
    minus its warnings about breakpoints in files that do not exist."""

    def write(self, s):
        if isinstance(s, str) and s.startswith(_MISSING_FILE_WARNING):
            return len(s)
        return sys.stderr.write(s)

    def __getattr__(self, name):
        return getattr(sys.stderr, name)


class _SysWithoutMissingFileWarnings(object):
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
                    text = archive.read(filename[i + len(ext):]).decode("utf-8", "replace")
            except Exception:
                return lines
            lines = text.splitlines(True)
            # mtime None: checkcache leaves loader-style entries alone.
            linecache.cache[filename] = (len(text), None, lines, filename)
            return lines
        return lines

    updatecache._sparkdap = True
    linecache.updatecache = updatecache


class _ImportEffects(object):
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


def _import_debugger():
    """Imports the debugger this wrapper was generated for, inside _QuietPydevd
    so that its import-time chatter stays off stderr. Returns the module
    whose settrace/connect attaches, or raises."""
    global _preload_redo
    if _preload_redo is not None:
        redo, _preload_redo = _preload_redo, None
        redo()
    if _pycharm():
        import pydevd_pycharm
        import pydevd  # pydevd-pycharm's, which _trust_code_paths patches

        _skip_network_start_sleep()
        return pydevd_pycharm
    import debugpy

    # debugpy.connect imports debugpy.server lazily, and that import is what
    # puts debugpy's vendored pydevd on sys.path.
    from debugpy import server as _server  # noqa: F401
    import debugpy.server.api
    import pydevd  # noqa: F401

    _describe_environment_only_when_logged()
    _skip_network_start_sleep()
    return debugpy


class _TimeWithoutStartSleep(object):
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
    if code is None or 0.1 not in code.co_consts or "sleep" not in code.co_names or "time" not in code.co_names:
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


def _describe(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0]) if text else type(exc).__name__


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


# --- the lease on stops --------------------------------------------------------
#
# A worker stopped at a breakpoint waits for the IDE, through the proxy, as
# long as it takes. A proxy that vanishes without closing the connection (a
# closed laptop lid, a dropped VPN, a firewall that starts dropping packets,
# `serve` stopped with SIGSTOP) sends no FIN and no RST: pydevd would wait
# forever and the task hold its executor slot. So every stop is held on a
# lease. While a thread of this worker is stopped, the proxy sends pydevd a
# request without side effects every 2 s (pydevdSystemInfo; with PyCharm,
# CMD_LIST_THREADS), which pydevd's reader thread takes off the socket
# however long the stop and whatever the IDE does. The wrapper counts the
# reads that brought bytes (_HeardSocket), and a guard thread, asleep while
# no thread is stopped, looks at that count every tick while one is. When
# nothing came for the lease, it lets the worker go: breakpoints cleared,
# every stopped thread resumed, the connection shut down and pydevd disposed
# (what the proxy's closing the connection would do), one line on stderr.
# The worker then runs on undebugged and never connects again.


class _Lease(object):
    """A worker's lease on its stops, apart from pydevd and from real time
    so that it can be tested with a fake clock.

    The lease runs from the start of a stop (the first thread stopping
    while none was) and from each read that brought the proxy's bytes; it
    lapses when `seconds` pass without one while a thread is stopped.

    Threads: heard is written by pydevd's reader thread alone (hear), an int
    the guard only compares, so a received message takes no lock. _lock
    guards the rest; stopping threads (enter, leave) and the guard (due,
    wait_for_stop) take it briefly, and nothing is called under it."""

    def __init__(self, seconds, clock=None, tick=None):
        import threading
        import time

        self.seconds = seconds
        self.clock = clock or time.monotonic
        # How often the guard looks while a thread is stopped.
        self.tick = tick if tick is not None else min(1.0, seconds / 10.0)
        self.heard = 0  # reads of the proxy's bytes so far
        self.suspended = 0  # threads inside pydevd's do_wait_suspend
        self.lapsed = False
        self.closed = False
        self._since = 0.0  # when the proxy was last heard, or the stop began
        self._seen = 0  # heard, as of _since
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)

    def hear(self):
        """pydevd's reader received bytes from the proxy."""
        self.heard += 1

    def enter(self):
        """A thread stops."""
        with self._lock:
            self.suspended += 1
            if self.suspended == 1:
                self._since = self.clock()
                self._seen = self.heard
                self._wake.notify_all()

    def leave(self):
        """A stopped thread runs again."""
        with self._lock:
            self.suspended -= 1

    def due(self):
        """Whether the lease lapsed now: a thread is stopped and the proxy
        was not heard for `seconds`. True once; the lease is over then."""
        with self._lock:
            if self.lapsed or self.closed or self.suspended <= 0:
                return False
            now = self.clock()
            if self.heard != self._seen:
                self._seen = self.heard
                self._since = now
                return False
            if now - self._since < self.seconds:
                return False
            self.lapsed = True
            return True

    def wait_for_stop(self):
        """Blocks while no thread is stopped. False once the lease is over."""
        with self._lock:
            while self.suspended <= 0 and not self.closed and not self.lapsed:
                self._wake.wait()
            return not self.closed and not self.lapsed

    def close(self):
        with self._lock:
            self.closed = True
            self._wake.notify_all()

    def run(self, expire, sleep):
        """The guard's loop: asleep while no thread is stopped, a look every
        tick while one is; calls expire once, when the lease lapses."""
        while self.wait_for_stop():
            sleep(self.tick)
            if self.due():
                expire()
                return


class _HeardSocket(object):
    """pydevd's reader's socket, telling the lease of each read that
    brought bytes. Only the reader thread reads it; the writer has the
    socket itself."""

    def __init__(self, sock, lease):
        self._sock = sock
        self._lease = lease

    def recv(self, *args):
        data = self._sock.recv(*args)
        if data:
            self._lease.hear()
        return data

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _hold_stops_on_lease(cfg):
    """Puts this worker's stops on the lease (cfg["lease"] seconds; 0 for
    none), once connected. Never raises: without it, the worker debugs as
    before and says so."""
    seconds = cfg.get("lease") or 0
    if seconds <= 0:
        return None
    try:
        import threading
        import time

        pydb = _global_debugger()
        reader = getattr(pydb, "reader", None)
        sock = getattr(reader, "sock", None)
        if sock is None:
            raise ValueError("pydevd's reader has no socket")
        lease = _Lease(seconds)
        orig = pydb.do_wait_suspend

        # pydevd's tracers (settrace, Cython, sys.monitoring; debugpy's and
        # pydevd-pycharm's) call do_wait_suspend as an attribute of the
        # PyDB: an instance attribute takes effect.
        def do_wait_suspend(*args, **kwargs):
            lease.enter()
            try:
                return orig(*args, **kwargs)
            finally:
                lease.leave()
                if lease.lapsed:
                    _stop_tracing_here()

        def expire():
            _lease_lapsed(pydb, sock, seconds)

        guard = threading.Thread(target=lease.run, args=(expire, time.sleep), name="sparkdap-lease")
        guard.daemon = True
        _hide_from_pydevd(guard)
        pydb.do_wait_suspend = do_wait_suspend
        reader.sock = _HeardSocket(sock, lease)
        guard.start()
        return lease
    except Exception as exc:
        _say("no lease on stops (%s): a stopped task waits for the proxy as long as it is away" % (_describe(exc),))
        return None


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


def _lease_lapsed(pydb, sock, seconds):
    """The guard's action when the lease lapses: let the worker go, never
    to connect again, and say why in one line."""
    _st().debugger = "failed"
    _let_go(pydb, sock)
    _say(
        "no word from the proxy for %gs while stopped at a breakpoint (--lease); "
        "breakpoints cleared, the task resumed and runs on undebugged" % (seconds,)
    )


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
            "label": "stage %d \u00b7 partition %d \u00b7 attempt %d"
            % (task["stageId"], task["partitionId"], task["attemptNumber"]),
            "postMortem": bool(cfg["post_mortem"]),
            "wait": bool(cfg["wait"]),
            "roots": _roots(),
        }
    )
    return body


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


# --- stop at the first line of user code (--wait) ----------------------------

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


def _wait_profile(frame, event, arg):
    if event != "call" or not _is_user_file(frame.f_code.co_filename):
        return
    sys.setprofile(None)
    _st().wait_armed = False
    if not _debugger_alive():
        # settrace() without a live debugger would start a new connection.
        return
    try:
        import pydevd

        # What debugpy.breakpoint() does, but stopping in the user's frame:
        # pydevd steps over until the next line event of stop_at_frame, which
        # is the first line of the user's function.
        kwargs = {}
        if not _pycharm():
            kwargs["notify_stdin"] = False  # debugpy's pydevd only
        pydevd.settrace(
            suspend=True,
            trace_only_current_thread=True,
            patch_multiprocessing=False,
            stop_at_frame=frame,
            **kwargs
        )
    except Exception:
        pass


def _arm_wait():
    st = _st()
    st.wait_armed = True
    sys.setprofile(_wait_profile)


def _disarm_wait():
    st = _st()
    if st.wait_armed:
        st.wait_armed = False
        if sys.getprofile() is _wait_profile:
            sys.setprofile(None)


# --- hooks -------------------------------------------------------------------


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
    if not _selected(cfg, task):
        # A worker that debugged an earlier task stays connected; stop
        # tracing so breakpoints do not fire in this one.
        if st.debugger == "connected":
            _set_tracing(False)
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
            _say("cannot read the paths of the task's code (%s); breakpoints bind only in files present here" % (_describe(exc),))
    if st.pending is not None:
        cfg, task = st.pending
        st.pending = None
        _attach(cfg, task)
    elif st.selected and st.debugger == "connected" and st.sent_dirs != st.code_dirs:
        _announce(st.config, st.current_task)


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
                _say("cannot make sys.path absolute (%s); breakpoints in --py-files archives may not bind" % (_describe(exc),))
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
        if (st.pending is not None or st.selected) and not st.disabled and (name == "read_command" or st.read_depth == 0):
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
            # A task with no user call (empty partition) must not leave the
            # hook armed for the next, maybe unselected, task of this worker.
            _disarm_wait()
            _st().task_key = None
            _flush_output()

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


# --- output batching -----------------------------------------------------------
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


class _OutputBatcher(object):
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

    def __init__(self, pydb, interval=_OUTPUT_INTERVAL, batch=_OUTPUT_BATCH, cap=_OUTPUT_CAP, queued=_OUTPUT_QUEUED, event=_OUTPUT_EVENT, thread=True):
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
            try:
                # Hidden from the IDE's thread list and never traced.
                from _pydevd_bundle.pydevd_daemon_thread import mark_as_pydevd_daemon_thread

                mark_as_pydevd_daemon_thread(self._thread)
            except Exception:
                pass
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
        writer = getattr(self._pydb, "writer", None)
        q = getattr(writer, "_cmd_queue", None)
        try:
            return q is not None and q.qsize() > self.queued
        except Exception:
            return False

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
                    note = "[sparkdap: %d bytes of output dropped: the debugger connection could not keep up]\n" % (self._dropped,)
                    segments.append([self._dropped_ctx, [note]])
                    self._dropped = 0
            pydb = self._pydb
            writer = getattr(pydb, "writer", None)
            if not segments or writer is None or getattr(pydb, "pydb_disposed", False):
                return True  # pydevd itself drops output once disconnected
            for ctx, parts in segments:
                for text in _split_output("".join(parts), self.event):
                    try:
                        writer.add_command(pydb.cmd_factory.make_io_message(text, ctx))
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


def _output_redirects():
    """pydevd's redirections of stdout and stderr, as (ctx, name,
    IORedirector, RedirectToPyDBIoMessages) tuples; empty without
    redirectOutput."""
    try:
        from _pydevd_bundle import pydevd_io
    except Exception:
        return []
    found = []
    holder = pydevd_io._RedirectionsHolder
    for ctx, std in ((1, "stdout"), (2, "stderr")):
        info = getattr(holder, "_pydevd_%s_redirect_" % std, None)
        redirector = getattr(info, "redirect_to", None)
        for target in getattr(redirector, "_redirect_to", ()):
            if isinstance(target, pydevd_io.RedirectToPyDBIoMessages):
                found.append((ctx, std, redirector, target))
    return found


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
        if os.environ.get("SPARKDAP_OUTPUT_BATCHING", "").strip().lower() in ("0", "false", "no", "off"):
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

        for ctx, std, redirector, target in redirects:
            target._on_write = hook(ctx)
            target.flush = batcher.request_flush
            buf = getattr(target, "buffer", None)
            if buf is not None:
                buf._on_write = target._on_write
                buf.flush = batcher.request_flush
            orig = redirector._redirect_to[0]
            if getattr(sys, std) is redirector and orig is not None:
                stream = _tee_stream(orig, batcher, ctx)
                batcher.streams.append(stream)
                setattr(sys, std, stream)
        _flush_before_stops(pydb, batcher)
        _output = (os.getpid(), batcher)
        return batcher
    except Exception as exc:
        _say("output batching unavailable, output goes to the debugger unbatched: %s" % (_describe(exc),))
        return None


def _flush_before_stops(pydb, batcher):
    # pydevd queues the stopped event in do_wait_suspend; the tracer calls it
    # as an attribute of the PyDB, so an instance attribute takes effect.
    orig = pydb.do_wait_suspend

    def do_wait_suspend(*args, **kwargs):
        batcher.flush()
        return orig(*args, **kwargs)

    pydb.do_wait_suspend = do_wait_suspend


def _flush_output():
    """At the end of a task: its output reaches the debugger before the
    next task's (and before the worker may exit)."""
    if _output is not None and _output[0] == os.getpid():
        try:
            _output[1].flush()
        except Exception:
            pass


# --- `sparkdap doctor`'s test worker ------------------------------------------

_PROBE_FLAG = "--sparkdap-probe"
_PROBE_TIMEOUT = 10.0


def _probe(host, port, stdin, out):
    """The worker side of `sparkdap doctor`'s test connection: the hello a
    worker sends, then debugpy.connect, then it stays connected until stdin
    closes. The token is stdin's first line, never on a command line. Each
    outcome is one line on out that doctor reads: UNREACHABLE, NOHELLO,
    UNPROVEN, REFUSED, NODEBUGPY or CONNECTED <pid>. Returns the exit
    status."""
    import socket

    def say(line):
        out.write(line + "\n")
        out.flush()

    token = stdin.readline().strip()
    body = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "executorId": "doctor",
        "label": "sparkdap doctor test connection",
        "roots": {"cwd": os.getcwd(), "sysPath": []},
    }
    try:
        sock = socket.create_connection((host, port), timeout=_PROBE_TIMEOUT)
    except OSError as exc:
        say("UNREACHABLE %s:%d: %s" % (host, port, exc))
        return 3
    try:
        reply, pydevd_token = _hello_exchange(sock, token, body, _PROBE_TIMEOUT)
    except _ProxyUnproven:
        say("UNPROVEN whatever listens on %s:%d did not prove it knows the token: not sparkdap serve, or another token" % (host, port))
        return 3
    except _NoHelloReply:
        say("NOHELLO proxy accepted the connection but did not answer the hello within %gs" % (_PROBE_TIMEOUT,))
        return 3
    except _HelloClosed as exc:
        say(
            "NOHELLO proxy closed the connection without answering the hello (it sent %d bytes: %r)"
            % (len(exc.received), exc.received[:120])
        )
        return 3
    finally:
        sock.close()
    accepted, detail = _hello_accepted(reply)
    if not accepted:
        say("REFUSED " + detail)
        return 3
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    os.environ.setdefault("PYDEVD_CONNECT_TIMEOUT", "%d" % _PROBE_TIMEOUT)
    try:
        import debugpy
    except ImportError as exc:
        say("NODEBUGPY %s: %s" % (sys.executable, exc))
        return 3
    debugpy.connect((host, port), access_token=pydevd_token)
    say("CONNECTED %d" % os.getpid())
    stdin.read()
    return 0


def _disabled_by_env():
    return os.environ.get("SPARKDAP_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")


def _may_select(cfg):
    """Whether some task could be selected under cfg: an empty list of
    partitions or stages (SPARKDAP_PARTITIONS=",") selects none."""
    return cfg["partitions"] != [] and cfg["stages"] != []


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
            _import_debugger()
        loaded = True
    except BaseException as exc:
        quiet.restore()
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        _say("could not load the debugger in the daemon (%s); each worker that attaches loads it" % (_describe(exc),))
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
            _say("could not undo what loading the debugger changed in the daemon (%s)" % (_describe(exc),))
    if loaded:
        _freeze_for_fork()
    return loaded


def _freeze_for_fork():
    """Takes what the daemon holds now out of the garbage collector's walks.
    The debugger's import leaves ~20,000 more objects that the collector
    tracks (debugpy; more with pydevd-pycharm), and every forked worker
    inherits them: each full collection in a worker walks them all, and
    touching their headers copies the daemon's memory pages into the
    worker. That made a CPU-bound UDF in tasks nobody debugs ~15 % slower
    (bench section 5). gc.freeze() moves them to the permanent generation,
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
        _say("could not freeze the daemon's objects before fork (%s); workers run as they would, a little slower" % (_describe(exc),))


def _main(argv):
    if argv[1:2] == [_PROBE_FLAG] and len(argv) == 4:
        sys.exit(_probe(argv[2], int(argv[3]), sys.stdin, sys.stdout))
    from pyspark import daemon

    _install(daemon)
    _preload_debugger()
    daemon.manager()


if __name__ == "__main__":
    _main(sys.argv)
