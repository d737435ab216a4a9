# `sparkdap replay CAPTURE`: runs a captured call in the
# developer's Python. `sparkdap replay` writes this file next to nothing and
# runs it as `python sparkdap_replay.py CAPTURE [--force]
# [--trust-captured-code] [--debug HOST:PORT]`; it is a plain module so that
# it can be tested on its own.
#
# The capture comes from the cluster, which is not trusted (SECURITY.md):
# an admitted executor can be hostile, and unpickling what it sent could
# run any code on this machine, or (numpy's and pandas' C reconstructors
# given hostile state) read and call memory it chose; no allowlist of
# globals makes pickle safe. So replay unpickles no byte of the capture
# unless the developer says --trust-captured-code:
#   - the call's DATA (arguments, closure values, plain-data globals) is
#     tagged JSON, decoded by Decoder: Python scalars and containers,
#     datetime, Decimal, UUID, Row, numpy arrays as .npy without pickles,
#     pandas and pyarrow values as Arrow IPC; a value of another type is a
#     placeholder, refused with its name and type (a global: left out,
#     with a note);
#   - the function comes from the developer's own source: imported from
#     their local module when it was pickled by reference (a module outside
#     the standard library and site-packages), else compiled from the local
#     file the proxy mapped its executor path to (a top-level def, a nested
#     def or a lambda, found by its qualified name and nearest line), with
#     the file's imports and defs but none of its other statements (running
#     the script would start the Spark job);
#   - with no local source it refuses, and the captured CODE (the pickled
#     function) is unpickled only with --trust-captured-code.
#
# The job's imports resolve as on the executor: sys.path starts with the
# local file's directory and the proxy's local roots (import_roots), not
# with the temporary directory this file runs from. Under --debug pydevd
# is told not to trace this file (hide_from_debugger): the developer's
# debugger shows and steps only their code.
#
# Exit status: 0 the call returned, 1 it raised, 2 the capture cannot be
# replayed (the reason is printed).

import argparse
import ast
import base64
import builtins
import datetime
import decimal
import importlib
import importlib.util
import io
import json
import keyword
import os
import pickle
import stat
import sys
import sysconfig
import traceback
import types
import uuid

FORMAT = "sparkdap-capture/3"

TRUST_FLAG = "--trust-captured-code"


class ReplayError(Exception):
    pass


class NoLocalSource(ReplayError):
    """The function has no local source: only the captured code could run
    it."""


# DATA is tagged JSON (sparkdap_capture._Encoder writes it): a JSON array
# is a list, an object is a tagged value {"$t": TAG, ...} with exactly the
# keys its tag has, and null, booleans, numbers and strings are
# themselves. Each tag is rebuilt by a loader that cannot run code or touch
# raw memory: the value's own constructor from text or numbers, numpy's
# .npy reader without pickles, pyarrow's IPC reader with every batch
# validated in full. TAGS maps a tag to its other keys.
TAGS = {
    "float": ("v",),
    "tuple": ("v",),
    "set": ("v",),
    "frozenset": ("v",),
    "dict": ("v",),
    "bytes": ("v",),
    "bytearray": ("v",),
    "datetime": ("v",),
    "date": ("v",),
    "time": ("v",),
    "timedelta": ("v",),
    "decimal": ("v",),
    "uuid": ("v",),
    "row": ("fields", "v"),
    "ndarray": ("npy",),
    "numpy-scalar": ("npy",),
    "ndarray-object": ("shape", "v"),
    "dataframe": ("arrow",),
    "series": ("name", "arrow"),
    "arrow-table": ("arrow",),
    "arrow-recordbatch": ("arrow",),
    "pickled": ("key", "where", "type"),
}

# The data document's keys.
_DOC_KEYS = ("args", "kwargs", "iterator_arg", "closure", "globals")

# How deep DATA may nest (the capture refuses deeper).
_MAX_DEPTH = 100


class _Malformed(ReplayError):
    pass


class _NeedsTrust(ReplayError):
    """A value the capture carries only pickled, without TRUST_FLAG."""


def _refuse_constant(name):
    raise _Malformed("a bare %s (the capture tags non-finite floats)" % name)


def _unique_keys(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Malformed("the key %r twice in one object" % (k,))
        out[k] = v
    return out


def _b64(s):
    if not isinstance(s, str):
        raise _Malformed("base64 text that is no string")
    try:
        return base64.b64decode(s.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise _Malformed("text that is not base64") from None


def _pyarrow():
    try:
        import pyarrow as pa
    except ImportError:
        raise ReplayError(
            "the capture holds Arrow data (a pandas or pyarrow value): replay needs pyarrow here "
            "(pip install pyarrow)"
        ) from None
    v = tuple(int(p) if p.isdigit() else 0 for p in pa.__version__.split(".")[:3])
    if v < (14, 0, 1):
        # Before 14.0.1 its IPC reader unpickles arrow.py_extension_type.
        raise ReplayError(
            "the capture holds Arrow data, and pyarrow %s here would unpickle parts of it: replay "
            "needs pyarrow 14.0.1 or later" % pa.__version__
        )
    return pa


def _arrow(s):
    """The schema and record batches of an Arrow IPC stream, each batch
    validated in full (offsets, lengths, UTF-8) before any of it is read."""
    pa = _pyarrow()
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(_b64(s)))
        batches = []
        for b in reader:
            b.validate(full=True)
            batches.append(b)
        return reader.schema, batches
    except Exception as exc:  # whatever the reader raises on bad bytes
        raise _Malformed(
            "an Arrow stream that does not read: %s: %s" % (type(exc).__name__, exc)
        ) from None


def _numpy():
    try:
        import numpy as np
    except ImportError:
        raise ReplayError(
            "the capture holds numpy data: replay needs numpy here (pip install numpy)"
        ) from None
    return np


def _npy(s):
    np = _numpy()
    try:
        arr = np.load(io.BytesIO(_b64(s)), allow_pickle=False)
    except Exception as exc:  # whatever the reader raises on bad bytes
        raise _Malformed(
            "a .npy array that does not read: %s: %s" % (type(exc).__name__, exc)
        ) from None
    if type(arr) is not np.ndarray or arr.dtype.hasobject:
        raise _Malformed("a .npy value that is no plain array")
    return arr


class Decoder:
    """Decodes DATA's tagged JSON. values is None unless the developer
    trusts the capture: then it maps the keys of values the capture
    carries only pickled to their pickles."""

    def __init__(self, values=None):
        self.values = values
        self.unpickled = 0

    def document(self, raw):
        """The call's arguments, closure values and data globals from
        DATA's bytes."""
        try:
            doc = json.loads(
                raw.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
            )
        except (UnicodeDecodeError, ValueError) as exc:
            raise ReplayError(
                "the capture's data is not the JSON this replay reads (%s): a capture made by "
                "another sparkdap, or not by sparkdap" % (exc,)
            ) from None
        except RecursionError:
            raise ReplayError("the capture's data nests too deep") from None
        except _Malformed as exc:
            raise ReplayError("the capture's data is malformed: %s" % exc) from None
        try:
            if (
                not isinstance(doc, dict)
                or set(doc) - set(_DOC_KEYS)
                or not isinstance(doc.get("args"), list)
            ):
                raise _Malformed("no call's arguments")
            out = {"args": [self.value(v, 0) for v in doc["args"]]}
            out["left_out"] = []
            for k in ("kwargs", "closure", "globals"):
                m = doc.get(k) or {}
                if not isinstance(m, dict):
                    raise _Malformed("%s that is no object" % k)
                out[k] = {}
                for name, v in m.items():
                    try:
                        out[k][name] = self.value(v, 0)
                    except _NeedsTrust as exc:
                        if k != "globals":
                            raise
                        # The local file may define it; the call may not
                        # need it.
                        out["left_out"].append(
                            "%s; it was left out: the call fails if it needs it" % exc
                        )
            it = doc.get("iterator_arg")
            if it is not None and (type(it) is not int or not 0 <= it < len(out["args"])):
                raise _Malformed("iterator_arg %r" % (it,))
            out["iterator_arg"] = it
            return out
        except _Malformed as exc:
            raise ReplayError("the capture's data is malformed: %s" % exc) from None
        except RecursionError:
            raise ReplayError("the capture's data nests too deep") from None

    def value(self, j, depth):
        if depth > _MAX_DEPTH:
            raise _Malformed("values nested deeper than %d" % _MAX_DEPTH)
        if j is None or type(j) in (bool, int, float, str):
            return j
        if type(j) is list:
            return [self.value(x, depth + 1) for x in j]
        if type(j) is not dict or not isinstance(j.get("$t"), str) or j["$t"] not in TAGS:
            raise _Malformed("an object that is no tagged value: %.80r" % (j,))
        tag = j["$t"]
        if set(j) != set(TAGS[tag]) | {"$t"}:
            raise _Malformed("a %s with keys %s" % (tag, ", ".join(sorted(j))))
        try:
            return getattr(self, "_" + tag.replace("-", "_"))(j, depth + 1)
        except (ReplayError, RecursionError):
            raise
        except Exception as exc:  # a constructor refusing its parts
            raise _Malformed(
                "a %s that does not decode: %s: %s" % (tag, type(exc).__name__, exc)
            ) from None

    def _items(self, j, depth):
        if type(j["v"]) is not list:
            raise _Malformed("a container whose items are no list")
        return [self.value(x, depth) for x in j["v"]]

    def _float(self, j, depth):
        if j["v"] not in ("nan", "inf", "-inf"):
            raise _Malformed("a float %r" % (j["v"],))
        return float(j["v"])

    def _tuple(self, j, depth):
        return tuple(self._items(j, depth))

    def _set(self, j, depth):
        return set(self._items(j, depth))

    def _frozenset(self, j, depth):
        return frozenset(self._items(j, depth))

    def _dict(self, j, depth):
        out = {}
        for kv in self._items(j, depth):
            if type(kv) is not list or len(kv) != 2:
                raise _Malformed("a dict item that is no [key, value]")
            out[kv[0]] = kv[1]
        return out

    def _bytes(self, j, depth):
        return _b64(j["v"])

    def _bytearray(self, j, depth):
        return bytearray(_b64(j["v"]))

    def _text(self, j):
        if type(j["v"]) is not str:
            raise _Malformed("a %s that is no string" % j["$t"])
        return j["v"]

    def _datetime(self, j, depth):
        return datetime.datetime.fromisoformat(self._text(j))

    def _date(self, j, depth):
        return datetime.date.fromisoformat(self._text(j))

    def _time(self, j, depth):
        return datetime.time.fromisoformat(self._text(j))

    def _timedelta(self, j, depth):
        v = j["v"]
        if type(v) is not list or len(v) != 3 or any(type(x) is not int for x in v):
            raise _Malformed("a timedelta that is no [days, seconds, microseconds]")
        return datetime.timedelta(days=v[0], seconds=v[1], microseconds=v[2])

    def _decimal(self, j, depth):
        try:
            return decimal.Decimal(self._text(j))
        except decimal.InvalidOperation:
            raise _Malformed("a decimal %.40r" % (j["v"],)) from None

    def _uuid(self, j, depth):
        return uuid.UUID(self._text(j))

    def _row(self, j, depth):
        try:
            from pyspark.sql.types import Row
        except ImportError:
            raise ReplayError(
                "the capture holds a pyspark Row: replay needs pyspark here (pip install pyspark)"
            ) from None
        values = self._items(j, depth)
        fields = j["fields"]
        if fields is None:
            return Row(*values)
        if (
            type(fields) is not list
            or len(fields) != len(values)
            or any(type(f) is not str for f in fields)
        ):
            raise _Malformed("a Row whose fields are no names of its values")
        row = Row(*values)
        row.__fields__ = list(fields)  # as pyspark's own _create_row
        return row

    def _ndarray(self, j, depth):
        return _npy(j["npy"])

    def _numpy_scalar(self, j, depth):
        arr = _npy(j["npy"])
        if arr.shape != ():
            raise _Malformed("a numpy scalar of shape %r" % (arr.shape,))
        return arr[()]

    def _ndarray_object(self, j, depth):
        np = _numpy()
        shape = j["shape"]
        if (
            type(shape) is not list
            or any(type(n) is not int or n < 0 for n in shape)
            or len(shape) > 32
        ):
            raise _Malformed("an array shape %r" % (shape,))
        items = self._items(j, depth)
        size = 1
        for n in shape:
            size *= n
        if size != len(items):
            raise _Malformed("an array of shape %r with %d items" % (shape, len(items)))
        arr = np.empty(len(items), dtype=object)
        for i, x in enumerate(items):
            arr[i] = x
        return arr.reshape(shape)

    def _dataframe(self, j, depth):
        pa = _pyarrow()
        schema, batches = _arrow(j["arrow"])
        return pa.Table.from_batches(batches, schema=schema).to_pandas()

    def _series(self, j, depth):
        pa = _pyarrow()
        name = self.value(j["name"], depth)
        schema, batches = _arrow(j["arrow"])
        df = pa.Table.from_batches(batches, schema=schema).to_pandas()
        if list(df.columns) != ["__sparkdap_series__"]:
            raise _Malformed("a Series whose table has columns %r" % (list(df.columns)[:5],))
        s = df["__sparkdap_series__"]
        s.name = name
        return s

    def _arrow_table(self, j, depth):
        pa = _pyarrow()
        schema, batches = _arrow(j["arrow"])
        return pa.Table.from_batches(batches, schema=schema)

    def _arrow_recordbatch(self, j, depth):
        _, batches = _arrow(j["arrow"])
        if len(batches) != 1:
            raise _Malformed("a record batch stream of %d batches" % len(batches))
        return batches[0]

    def _pickled(self, j, depth):
        where, tname = str(j["where"]), str(j["type"])
        if self.values is None:
            raise _NeedsTrust(
                "%s is a %s, which the capture carries only pickled, and replay unpickles nothing "
                "from the cluster unless you pass %s "
                "(only for a capture from a cluster you trust)" % (where, tname, TRUST_FLAG)
            )
        raw = self.values.get(j["key"]) if isinstance(j["key"], str) else None
        if not isinstance(raw, bytes):
            raise _Malformed("%s's pickle is missing" % where)
        self.unpickled += 1
        return _unpickle(raw)


def load(path):
    with open(path, encoding="utf-8") as f:
        cap = json.load(f)
    if not isinstance(cap, dict) or cap.get("format") != FORMAT:
        have = cap.get("format") if isinstance(cap, dict) else None
        why = ""
        if have in ("sparkdap-capture/1", "sparkdap-capture/2"):
            why = (
                ": its data is a pickle, which replay no longer reads from a cluster; "
                "capture the call again"
            )
        raise ReplayError(
            "%s is not a sparkdap capture this replay reads (format %r, want %r)%s"
            % (path, have, FORMAT, why)
        )
    # The executor wrote most of it: check the shapes replay relies on.
    info = cap.get("function")
    ok = (
        isinstance(info, dict)
        and isinstance(info.get("firstLine", 0), int)
        and isinstance(info.get("qualname", ""), str)
    )
    ok = ok and all(isinstance(v, str) for v in info.get("freeVars") or [])
    ok = (
        ok
        and isinstance(cap.get("references", {}), dict)
        and all(isinstance(p, str) for p in cap.get("parameters") or [])
    )
    ok = (
        ok
        and isinstance(cap.get("data", ""), str)
        and isinstance(cap.get("code", ""), str)
        and isinstance(cap.get("localFile", ""), str)
        and isinstance(cap.get("localRoots", []), list)
        and all(isinstance(r, str) for r in cap.get("localRoots") or [])
    )
    imp = info.get("importable") if isinstance(info, dict) else None
    ok = ok and (
        imp is None
        or (
            isinstance(imp, dict)
            and isinstance(imp.get("module"), str)
            and isinstance(imp.get("qualname"), str)
        )
    )
    if not ok:
        raise ReplayError("%s is not a well-formed sparkdap capture" % path)
    return cap


def check_python(cap, force, trust):
    """A warning when the capture was made by another Python major.minor,
    or ReplayError: its pickles (loaded only with TRUST_FLAG) need the same
    one unless forced; the data and your local source do not."""
    want = str(cap.get("versions", {}).get("python", ""))
    have = "%d.%d" % sys.version_info[:2]
    if ".".join(want.split(".")[:2]) == have:
        return None
    msg = "the capture was made by Python %s and this is Python %s" % (want, sys.version.split()[0])
    if not trust:
        return "warning: %s: your function may behave differently here" % msg
    msg += ": the capture's pickles need the same major.minor"
    if not force:
        raise ReplayError(
            msg + " (run replay with that Python, --python, or --force to try anyway)"
        )
    return "warning: " + msg


def _unpickle(raw):
    """Unpickles bytes from the capture: run only with TRUST_FLAG, as a
    pickle runs whatever code it names."""
    try:
        return pickle.loads(raw)
    except ModuleNotFoundError as exc:
        raise ReplayError(
            "unpickling the capture needs module %r here (pip install it, or put your code on "
            "PYTHONPATH)" % exc.name
        ) from None
    except Exception as exc:
        raise ReplayError(
            "the capture's pickle cannot be unpickled: %s: %s" % (type(exc).__name__, exc)
        ) from None


def load_code(cap):
    """CODE, unpickled: {"function": pickle or None, "values": {key:
    pickle}}. Only with TRUST_FLAG."""
    code = _unpickle(base64.b64decode(cap.get("code", "")))
    if not isinstance(code, dict) or not isinstance(code.get("values"), dict):
        raise ReplayError("the capture's code is not what sparkdap captures")
    return code


def load_data(cap, code=None):
    """The call's arguments, closure values and data globals, and how many
    values were unpickled (only with code, the trusted CODE)."""
    dec = Decoder(code["values"] if code is not None else None)
    try:
        raw = base64.b64decode(cap.get("data", "").encode("ascii"), validate=True)
    except ValueError:
        raise ReplayError("the capture's data is not base64") from None
    return dec.document(raw), dec.unpickled


def _system_dirs():
    """Where the standard library and installed packages live: a module from
    there is not the developer's code, and the cluster must not pick one
    for replay to call."""
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p))
    for p in sys.path:
        if os.path.basename(p) in ("site-packages", "dist-packages"):
            dirs.add(os.path.realpath(p))
    return dirs


def _under(path, dirs):
    path = os.path.realpath(path)
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def _import_local(imp):
    """The function named by {"module", "qualname"} from the developer's
    own module (not the standard library, not site-packages: importing runs
    the module, and the cluster chose its name). Returns (fn, file) or
    (None, why)."""
    mod_name, qual = imp.get("module") or "", imp.get("qualname") or ""
    parts = mod_name.split(".")
    if not all(p.isidentifier() for p in parts) or not all(
        q.isidentifier() for q in qual.split(".")
    ):
        return None, "%r / %r is not a module and function name" % (mod_name, qual)
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: imports nothing
    except (ImportError, ValueError):
        spec = None
    origin = getattr(spec, "origin", None) if spec else None
    if spec is None or not origin:
        return None, "module %s is not importable here" % mod_name
    if origin in ("built-in", "frozen") or _under(origin, _system_dirs()):
        return (
            None,
            "module %s here is %s, in the standard library or site-packages, not your source"
            % (mod_name, origin),
        )
    if _under(origin, {os.path.dirname(os.path.realpath(__file__))}):
        # sparkdap's own Python (this file's main would replay any file).
        return None, "module %s here is %s, sparkdap's own code, not your source" % (
            mod_name,
            origin,
        )
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:
        return None, "importing your module %s failed: %s: %s" % (mod_name, type(exc).__name__, exc)
    obj = mod
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if not callable(obj) or getattr(obj, "__module__", None) != mod_name:
        return None, "your module %s has no function %s" % (mod_name, qual)
    return obj, getattr(mod, "__file__", "?")


def _param_names(args):
    out = [a.arg for a in getattr(args, "posonlyargs", [])] + [a.arg for a in args.args]
    if args.vararg:
        out.append("*" + args.vararg.arg)
    out.extend(a.arg for a in args.kwonlyargs)
    if args.kwarg:
        out.append("**" + args.kwarg.arg)
    return out


def _functions(tree):
    """Every def and lambda in tree with the __qualname__ Python gives it."""
    out = []
    inlined = sys.version_info >= (3, 12)  # PEP 709: comprehensions are no functions

    def visit(node, prefix):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            q = prefix + (node.name if not isinstance(node, ast.Lambda) else "<lambda>")
            out.append((q, node))
            for d in getattr(node, "decorator_list", []):
                visit(d, prefix)
            visit(node.args, prefix)
            for stmt in node.body if isinstance(node.body, list) else [node.body]:
                visit(stmt, q + ".<locals>.")
            return
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                visit(d, prefix)
            for stmt in node.body:
                visit(stmt, prefix + node.name + ".")
            return
        comp = {
            ast.ListComp: "<listcomp>",
            ast.SetComp: "<setcomp>",
            ast.DictComp: "<dictcomp>",
            ast.GeneratorExp: "<genexpr>",
        }.get(type(node))
        if comp and not (inlined and comp != "<genexpr>"):
            for child in ast.iter_child_nodes(node):
                visit(child, prefix + comp + ".")
            return
        for child in ast.iter_child_nodes(node):
            visit(child, prefix)

    for stmt in tree.body:
        visit(stmt, "")
    return out


def _first_line(node):
    """co_firstlineno of the code node compiles to: a decorated def's
    starts at its first decorator."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def find_local(tree, info, params):
    """The def or lambda in tree that the captured function is: its
    qualified name, its parameters when that leaves any, and the nearest
    first line (an edit moves lines). Returns (node, why) or raises
    ReplayError when two are equally near."""
    qual = info.get("qualname") or info.get("name") or ""
    cands = [n for q, n in _functions(tree) if q == qual]
    if not cands:
        return None, "no def or lambda %s" % qual
    same = [n for n in cands if _param_names(n.args) == params]
    if same:
        cands = same
    want = int(info.get("firstLine") or 0)
    cands.sort(key=lambda n: abs(_first_line(n) - want))
    best = abs(_first_line(cands[0]) - want)
    tied = [n for n in cands if abs(_first_line(n) - want) == best]
    if len(tied) > 1:
        raise ReplayError(
            "%d functions in your local file match %s (parameters %s) equally near the captured "
            "line %d (lines %s): "
            "replay cannot tell which one ran; give one of them a name of its own (a def)"
            % (
                len(tied),
                qual,
                ", ".join(params) or "none",
                want,
                ", ".join(str(_first_line(n)) for n in tied),
            )
        )
    return cands[0], None


# The file name of the code replay generates around the developer's.
_GENERATED = "<sparkdap replay>"


def _compile_functions_as(mod, path, depth):
    """mod compiled with only the code at depth (the developer's defs and
    lambdas: 1 in a module, 2 in the generated closure wrapper) and below
    filed under path; the levels above are replay's own, and filed apart.
    pydevd matches breakpoints by file and line: were the module statement
    or the wrapper filed under path, a breakpoint on a lambda's line (or a
    def's) would first stop there, in <module>, before the call."""

    def refile(code, level):
        consts = tuple(
            refile(c, level + 1) if isinstance(c, types.CodeType) else c for c in code.co_consts
        )
        return code.replace(co_filename=path if level >= depth else _GENERATED, co_consts=consts)

    return refile(compile(mod, path, "exec"), 0)


def _local_namespace(path, tree, target):
    """The globals the local function runs with: the file's top-level
    imports (also in a try that only imports), defs and classes (their
    decorators kept; the target's own top-level def is compiled apart), and
    nothing else of the file: running its other statements would start the
    Spark job. Returns (ns, notes)."""
    ns = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
    notes = []
    for node in tree.body:
        if node is target:
            continue
        # A try whose body only imports is an import with a fallback.
        guarded = isinstance(node, ast.Try) and all(
            isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body
        )
        if guarded or isinstance(
            node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            try:
                exec(_compile_functions_as(ast.Module(body=[node], type_ignores=[]), path, 1), ns)
            except Exception as exc:  # one the replayed call may not need
                notes.append(
                    "%s line %d failed here (%s: %s); the call fails if it needs it"
                    % (os.path.basename(path), node.lineno, type(exc).__name__, exc)
                )
    return ns, notes


def compile_local(path, node, tree, info, data, refs):
    """Compiles the local def or lambda node inside a generated outer
    function whose parameters are its captured free variables, so that
    its closure binds to the captured closure values; globals from
    _local_namespace, then the captured data globals for names still
    missing. Returns (fn, notes)."""
    free = list(info.get("freeVars") or [])
    closure = data.get("closure") or {}
    own = getattr(node, "name", None)  # a nested def that calls itself
    for v in free:
        if not isinstance(v, str) or not v.isidentifier() or keyword.iskeyword(v):
            raise ReplayError(
                "the capture names a free variable %r, which is no Python name" % (v,)
            )
        if v == own and v not in closure:
            closure[v] = None  # the def below binds it, in the outer function
        if v not in closure:
            what = refs.get(v, "not captured")
            raise NoLocalSource(
                "its closure variable %r is %s, and replay rebuilds a closure from captured data "
                "only" % (v, what)
            )
    ns, notes = _local_namespace(path, tree, node)
    for name, value in (data.get("globals") or {}).items():
        ns.setdefault(name, value)
    for name, ref in sorted(refs.items()):
        if name not in ns and name not in free and name not in vars(builtins):
            notes.append(
                "global %r (%s on the executor) is not defined by %s's top-level imports and "
                "defs: the call fails if it uses it" % (name, ref, os.path.basename(path))
            )
    if isinstance(node, ast.Lambda):
        stmt = ast.Assign(targets=[ast.Name(id="__sparkdap_fn__", ctx=ast.Store())], value=node)
        ast.copy_location(stmt, node)
        fn_name = "__sparkdap_fn__"
    else:
        node.decorator_list = []  # a @udf would wrap it
        stmt, fn_name = node, node.name
    ret = ast.Return(value=ast.Name(id=fn_name, ctx=ast.Load()))
    ast.copy_location(ret, node)
    outer = ast.parse("def __sparkdap_outer__():\n    pass\n").body[0]
    outer.args.args = [ast.arg(arg=v) for v in free]
    outer.body = [stmt, ret]
    ast.copy_location(outer, node)
    mod = ast.Module(body=[outer], type_ignores=[])
    ast.fix_missing_locations(mod)
    exec(_compile_functions_as(mod, path, 2), ns)
    fn = ns.pop("__sparkdap_outer__")(*[closure[v] for v in free])
    if info.get("qualname"):
        fn.__qualname__ = info["qualname"]
    if node in tree.body:
        ns[own] = fn  # a top-level def that calls itself finds itself
    return fn, notes


def _regular_py(path):
    try:
        st = os.stat(path)
    except OSError as exc:
        return "cannot read %s: %s" % (path, exc.strerror)
    if not stat.S_ISREG(st.st_mode) or not path.endswith(".py"):
        return "%s is not a regular .py file" % path
    return None


def local_function(cap, data):
    """The function to run, from the developer's own source, and a line
    saying which one it is; NoLocalSource when there is none."""
    info = cap.get("function", {})
    refs = cap.get("references") or {}
    whys = []
    imp = info.get("importable")
    if imp:
        fn, where = _import_local(imp)
        if fn is not None:
            if info.get("freeVars"):
                raise ReplayError(
                    "%s.%s is importable but the capture says it has a closure"
                    % (imp.get("module"), imp.get("qualname"))
                )
            return (
                fn,
                "using %s from %s (imported from your local module %s)"
                % (imp.get("qualname"), where, imp.get("module")),
                [],
            )
        whys.append(where)
    local = cap.get("localFile") or ""
    if not local:
        whys.append(
            "its file %s is not mapped to a local file (serve --root, --map)"
            % info.get("file", "?")
        )
        raise NoLocalSource("; ".join(whys))
    bad = _regular_py(local)
    if bad:
        whys.append(bad)
        raise NoLocalSource("; ".join(whys))
    with open(local, encoding="utf-8") as f:
        src = f.read()
    try:
        tree = ast.parse(src, filename=local)
    except SyntaxError as exc:
        raise ReplayError("your local file %s does not parse: %s" % (local, exc)) from None
    node, why = find_local(tree, info, list(cap.get("parameters") or []))
    if node is None:
        whys.append("%s has %s" % (local, why))
        raise NoLocalSource("; ".join(whys))
    fn, notes = compile_local(local, node, tree, info, data, refs)
    kind = "lambda" if isinstance(node, ast.Lambda) else "def"
    return (
        fn,
        "using %s (a %s) from %s:%d (your local source)"
        % (info.get("qualname"), kind, local, node.lineno),
        notes,
    )


def _package_root(local, module):
    """The directory a module whose local file is local is imported from:
    the file's own directory, or for pkg.sub.mod (pkg/sub/mod.py, or
    pkg/sub/mod/__init__.py) the directory above pkg."""
    d = os.path.dirname(os.path.abspath(local))
    parts = (module or "").split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return d
    if os.path.basename(local) == "__init__.py":
        d = os.path.dirname(d)
    for pkg in reversed(parts[:-1]):
        if os.path.basename(d) != pkg:
            return os.path.dirname(os.path.abspath(local))
        d = os.path.dirname(d)
    return d


def import_roots(cap):
    """Where the job's own imports are found here: the directory of the
    captured function's local file (as `python script.py` puts the script's
    directory first; for a module of a package, the directory above the
    package), then the local roots the proxy maps the executor's code to
    (serve --root: the local counterparts of the job's --py-files). Both
    are the proxy's mapping, never a path the executor named."""
    out = []
    local = cap.get("localFile") or ""
    if local and os.path.isfile(local):
        imp = cap.get("function", {}).get("importable") or {}
        out.append(_package_root(local, imp.get("module") or ""))
    for r in cap.get("localRoots") or []:
        if isinstance(r, str) and os.path.isabs(r) and os.path.isdir(r):
            out.append(r)
    seen, uniq = set(), []
    for d in out:
        d = os.path.normpath(d)
        if d not in seen:
            seen.add(d)
            uniq.append(d)
    return uniq


def set_import_path(cap):
    """sys.path as the job had it: import_roots first, in place of this
    script's own (temporary) directory."""
    own = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if not (p and os.path.realpath(p) == own)]
    roots = import_roots(cap)
    sys.path[:] = roots + [p for p in rest if p not in roots]
    importlib.invalidate_caches()


def run(cap, force=False, trust=False, out=None):
    """Replays the call; returns the exit status."""
    out = out or sys.stdout
    notes = []
    try:
        warn = check_python(cap, force, trust)
        if warn:
            out.write(warn + "\n")
        code = load_code(cap) if trust else None
        data, unpickled = load_data(cap, code)
        try:
            fn, which, notes = local_function(cap, data)
        except NoLocalSource as exc:
            if not trust:
                raise ReplayError(
                    "no local source for %s (%s): running it would take its code from the "
                    "capture, that is from the cluster; "
                    "map its file to your copy (serve --root / --map), or if you trust the "
                    "cluster that made the capture, pass %s"
                    % (cap.get("function", {}).get("qualname"), exc, TRUST_FLAG)
                ) from None
            if code.get("function") is None:
                raise ReplayError(
                    "no local source for %s (%s), and the capture holds no pickled function"
                    % (cap.get("function", {}).get("qualname"), exc)
                ) from None
            out.write(
                "warning: %s: running the captured function, code from the cluster (%s)\n"
                % (TRUST_FLAG, exc)
            )
            fn = _unpickle(code["function"])
            which = "using the captured %s" % cap.get("function", {}).get("qualname")
    except ReplayError as exc:
        out.write("sparkdap replay: %s\n" % exc)
        return 2
    if unpickled:
        out.write(
            "warning: %s: unpickled %d value(s) of the capture's data, code from the cluster\n"
            % (TRUST_FLAG, unpickled)
        )
    args = list(data["args"])
    it = data.get("iterator_arg")
    if it is not None:
        args[it] = iter(args[it])
    out.write("sparkdap replay: %s\n" % which)
    for n in data["left_out"] + notes:
        out.write("sparkdap replay: note: %s\n" % n)
    out.flush()
    try:
        result = fn(*args, **data["kwargs"])
        if info_is_generator(cap) or (hasattr(result, "__next__") and hasattr(result, "__iter__")):
            result = list(result)
    except BaseException as exc:  # the user's exception is the answer
        out.write("sparkdap replay: raised %s: %s\n" % (type(exc).__name__, exc))
        out.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return 1
    out.write("sparkdap replay: returned %s\n" % (result if _is_frame(result) else repr(result),))
    return 0


def info_is_generator(cap):
    return bool(cap.get("function", {}).get("isGenerator"))


def _is_frame(v):
    return (type(v).__module__ or "").split(".")[0] == "pandas"


def main(argv):
    ap = argparse.ArgumentParser(prog="sparkdap replay")
    ap.add_argument("capture")
    ap.add_argument("--force", action="store_true")
    ap.add_argument(TRUST_FLAG, dest="trust", action="store_true")
    ap.add_argument("--debug", metavar="HOST:PORT")
    a = ap.parse_args(argv)
    try:
        cap = load(a.capture)
    except (OSError, ValueError, ReplayError) as exc:
        sys.stdout.write("sparkdap replay: %s\n" % exc)
        return 2
    set_import_path(cap)
    if a.debug:
        host, _, port = a.debug.rpartition(":")
        try:
            import debugpy
        except ImportError:
            sys.stdout.write(
                "sparkdap replay: --debug needs debugpy in this Python (%s): pip install debugpy\n"
                % sys.executable
            )
            return 2
        debugpy.listen((host or "127.0.0.1", int(port)))
        sys.stdout.write(
            "sparkdap replay: waiting for a debugger to attach to %s:%s\n"
            % (host or "127.0.0.1", port)
        )
        sys.stdout.flush()
        hide_from_debugger()
        debugpy.wait_for_client()
    return run(cap, a.force, a.trust)


def hide_from_debugger():
    """Tells pydevd never to trace this file, so that the developer's
    debugger shows and steps only their function: no stop, step or Step
    Out lands in replay's own frames, whatever justMyCode says. It uses
    pydevd's API for files not to trace (the one its
    setDebuggerProperty request sets); when that API is missing, replay's
    frames merely show."""
    try:
        import pydevd
        from _pydevd_bundle.pydevd_api import PyDevdAPI

        py_db = pydevd.get_global_debugger()
        paths = tuple(sorted({os.path.abspath(__file__), os.path.realpath(__file__)}))
        if py_db is not None:
            PyDevdAPI().set_dont_trace_start_end_patterns(py_db, paths, ())
    except Exception:  # another debugpy: its frames show, nothing worse
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
