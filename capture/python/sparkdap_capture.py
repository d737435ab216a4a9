# The executor side of `sparkdapCapture`: captures the user
# function of a stopped frame and the arguments it holds, for
# `sparkdap replay` to run on the developer's machine.
#
# The proxy does not rely on anything being installed on the executor: it
# sends this file's source inside a DAP evaluate, run by pydevd in the
# stopped thread, which execs it into a module of its own in sys.modules
# (once per source version) and calls start(). start() encodes the call's
# DATA (arguments, closure values, plain-data globals) as tagged JSON, and
# apart from it pickles, with the cloudpickle PySpark ships, the function
# and any value DATA cannot hold (CODE); it keeps DATA+CODE here (the
# header says where DATA ends). The cluster is not trusted (SECURITY.md):
# replay unpickles nothing from it unless the developer passes
# --trust-captured-code, so DATA holds only what loaders that cannot run
# code or touch raw memory rebuild (JSON, .npy without pickles, Arrow
# IPC), the function comes from the developer's own source, and modules,
# functions and classes are named in the header's "references". A value
# DATA cannot hold is a placeholder there that names it, and a note says,
# at capture time, that replaying it takes --trust-captured-code. The
# proxy then fetches the bytes with chunk() in pieces small enough for an
# evaluate answer, and drop() forgets them. Every answer is base64 text:
# pydevd shows a str result as its repr, and base64 has nothing repr
# escapes.
#
# Nothing here runs unless the developer asks for a capture: it is their
# data. It must run on every Python PySpark 3.5 supports (3.8 and later).

import base64
import datetime
import decimal
import functools
import gc
import io
import json
import math
import sys
import types
import uuid

FORMAT = "sparkdap-capture/3"

TRUST_FLAG = "--trust-captured-code"

# How deep DATA nests containers: deeper (or a container holding itself)
# is refused rather than recursing without end.
MAX_DEPTH = 100

_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08
_CO_GENERATOR = 0x20

# Captures start() made and the proxy has not dropped yet: id -> bytes.
_held = {}
_next_id = [0]


class CaptureError(Exception):
    """Why a capture cannot be made, in words for the developer."""


def _encode(obj):
    return base64.b64encode(json.dumps(obj).encode("utf-8")).decode("ascii")


def _cloudpickle():
    try:
        from pyspark import cloudpickle

        return cloudpickle, "pyspark.cloudpickle"
    except ImportError:
        pass
    try:
        import cloudpickle

        return cloudpickle, "cloudpickle"
    except ImportError:
        raise CaptureError(
            "neither pyspark.cloudpickle nor cloudpickle can be imported on the executor"
        ) from None


def _qualified(t):
    return "%s.%s" % (t.__module__, t.__qualname__)


def _is(v, module_root, *names):
    t = type(v)
    return (t.__module__ or "").split(".")[0] == module_root and t.__name__ in names


def _arrow_ipc(table_or_batch):
    """An Arrow IPC stream of one table or record batch."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table_or_batch.schema) as w:
        w.write(table_or_batch)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def _npy(arr):
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


class _Encoder:
    """Encodes values as DATA's tagged JSON (sparkdap_replay.Decoder reads
    it back, and documents the tags). A JSON array is a list, an object a tagged value
    {"$t": tag, ...}; None, bool, int, str and finite floats are
    themselves. A value of another type is pickled apart (pickled, key ->
    bytes: CODE carries them) and a placeholder names where it was and its
    type; notes say so."""

    def __init__(self, cp):
        self.cp = cp
        self.pickled = {}
        self.notes = []

    def encode(self, v, where):
        return self._enc(v, where, 0)

    def _enc(self, v, where, depth):
        if depth > MAX_DEPTH:
            raise CaptureError(
                "%s nests containers deeper than %d (or holds itself): the capture cannot carry it"
                % (where, MAX_DEPTH)
            )
        t = type(v)
        if v is None or t in (bool, int, str):
            return v
        if t is float:
            return v if math.isfinite(v) else {"$t": "float", "v": repr(v)}
        d = depth + 1
        if t is list:
            return [self._enc(x, "%s[%d]" % (where, i), d) for i, x in enumerate(v)]
        if t in (tuple, set, frozenset):
            items = v if t is tuple else sorted(v, key=repr)
            return {
                "$t": t.__name__,
                "v": [self._enc(x, "%s[%d]" % (where, i), d) for i, x in enumerate(items)],
            }
        if t is dict:
            return {
                "$t": "dict",
                "v": [
                    [
                        self._enc(k, "%s key %r" % (where, k), d),
                        self._enc(x, "%s[%r]" % (where, k), d),
                    ]
                    for k, x in v.items()
                ],
            }
        if t in (bytes, bytearray):
            return {"$t": t.__name__, "v": base64.b64encode(bytes(v)).decode("ascii")}
        if (
            t in (datetime.datetime, datetime.time)
            and v.tzinfo is not None
            and not isinstance(v.tzinfo, datetime.timezone)
        ):
            off = v.utcoffset()
            if off is None:
                return self._pickled(v, where, "its time zone %r has no fixed offset" % (v.tzinfo,))
            self.notes.append(
                "%s: its time zone %s was captured as the fixed offset %s" % (where, v.tzinfo, off)
            )
            v = v.replace(tzinfo=datetime.timezone(off))
        if t in (datetime.datetime, datetime.date, datetime.time):
            return {"$t": t.__name__, "v": v.isoformat()}
        if t is datetime.timedelta:
            return {"$t": "timedelta", "v": [v.days, v.seconds, v.microseconds]}
        if t is decimal.Decimal:
            return {"$t": "decimal", "v": str(v)}
        if t is uuid.UUID:
            return {"$t": "uuid", "v": str(v)}
        if _is(v, "pyspark", "Row") and isinstance(v, tuple):
            fields = getattr(v, "__fields__", None)
            return {
                "$t": "row",
                "fields": list(fields) if fields is not None else None,
                "v": [self._enc(x, "%s[%d]" % (where, i), d) for i, x in enumerate(tuple(v))],
            }
        try:
            if (t.__module__ or "").split(".")[0] == "numpy":
                import numpy as np

                if t is np.ndarray and v.dtype.kind == "O":
                    # Each element on its own, as JSON: .npy would pickle them.
                    return {
                        "$t": "ndarray-object",
                        "shape": list(v.shape),
                        "v": [
                            self._enc(x, "%s.flat[%d]" % (where, i), d)
                            for i, x in enumerate(v.flat)
                        ],
                    }
                if (t is np.ndarray or isinstance(v, np.generic)) and not v.dtype.hasobject:
                    return {
                        "$t": "ndarray" if t is np.ndarray else "numpy-scalar",
                        "npy": _npy(np.asarray(v)),
                    }
            if _is(v, "pandas", "DataFrame"):
                import pyarrow as pa

                return {"$t": "dataframe", "arrow": _arrow_ipc(pa.Table.from_pandas(v))}
            if _is(v, "pandas", "Series"):
                import pyarrow as pa

                return {
                    "$t": "series",
                    "name": self._enc(v.name, "%s.name" % where, d),
                    "arrow": _arrow_ipc(
                        pa.Table.from_pandas(v.to_frame(name="__sparkdap_series__"))
                    ),
                }
            if _is(v, "pyarrow", "Table", "RecordBatch"):
                return {"$t": "arrow-" + t.__name__.lower(), "arrow": _arrow_ipc(v)}
        except CaptureError:
            raise
        except Exception as exc:
            return self._pickled(v, where, "encoding it failed: %s: %s" % (type(exc).__name__, exc))
        return self._pickled(v, where, None)

    def _pickled(self, v, where, why):
        tname = _qualified(type(v))
        try:
            raw = self.cp.dumps(v)
        except Exception as exc:
            raise CaptureError(
                "%s is a %s, which a capture carries only pickled, and it cannot be pickled: %s: %s"
                % (where, tname, type(exc).__name__, exc)
            ) from None
        key = "p%d" % len(self.pickled)
        self.pickled[key] = raw
        self.notes.append(
            "%s is a %s%s: the capture carries it only pickled, and replay unpickles nothing from "
            "the cluster unless you pass %s "
            "(only for a capture from a cluster you trust)"
            % (where, tname, " (%s)" % why if why else "", TRUST_FLAG)
        )
        return {"$t": "pickled", "key": key, "where": where, "type": tname}


def _function_of(frame):
    """The function object whose code the frame runs. A frame names only
    its code object; the function is whatever refers to that code. Several
    functions can share one code (a lambda made in a loop): the first is
    taken; their code is the same and the one whose closure matches the
    frame's free variables is preferred."""
    code = frame.f_code
    if _is_pyspark_file(code.co_filename):
        # Its function, if any, is no code of the developer's: replay
        # would find no local source for it.
        raise CaptureError(
            "%s (%s line %d) is PySpark's own code, not your function: select the frame of "
            "your function (the UDF, lambda or function your job gave Spark) in the call "
            "stack, and !capture there" % (code.co_name, code.co_filename, frame.f_lineno)
        )
    # A module body is no function, though Python 3.11+ runs it as one
    # (exec makes a function object of the module's code).
    found = (
        [
            o
            for o in gc.get_referrers(code)
            if isinstance(o, types.FunctionType) and o.__code__ is code
        ]
        if code.co_name != "<module>"
        else []
    )
    if not found:
        raise CaptureError(
            "no function object runs %s (%s line %d): the frame is module or class body code, not "
            "a function; select the frame of the function you want in the call stack, and "
            "!capture there" % (code.co_name, code.co_filename, frame.f_lineno)
        )
    if len(found) > 1 and code.co_freevars:
        for f in found:
            try:
                cells = dict(zip(code.co_freevars, (c.cell_contents for c in f.__closure__ or ())))
            except ValueError:  # an empty cell
                continue
            if all(frame.f_locals.get(k, cells.get(k)) is cells.get(k) for k in cells):
                return f
    return found[0]


def _is_pyspark_file(path):
    """Whether path is a file of PySpark itself (pyspark/daemon.py,
    pyspark/worker.py, in a pyspark.zip or an installed pyspark)."""
    parts = path.replace("\\", "/").split("/")
    return "pyspark" in parts[:-1] or any(p.startswith("pyspark.zip") for p in parts)


def _arguments(frame):
    """The frame's arguments by the code's parameter names, as they are now
    (a parameter the function reassigned before the stop has its new
    value): (positional list, keyword dict, names)."""
    code = frame.f_code
    loc = frame.f_locals
    names = list(code.co_varnames[: code.co_argcount])
    kwonly = list(code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount])
    i = code.co_argcount + code.co_kwonlyargcount
    varargs = varkw = None
    if code.co_flags & _CO_VARARGS:
        varargs = code.co_varnames[i]
        i += 1
    if code.co_flags & _CO_VARKEYWORDS:
        varkw = code.co_varnames[i]
    for n in names + kwonly + [v for v in (varargs, varkw) if v]:
        if n not in loc:
            raise CaptureError(
                "argument %r of %s has no value in the frame (deleted before the stop)"
                % (n, code.co_name)
            )
    args = [loc[n] for n in names]
    if varargs:
        args.extend(loc[varargs])
    kwargs = dict((n, loc[n]) for n in kwonly)
    if varkw:
        kwargs.update(loc[varkw])
    shown = (
        names + (["*" + varargs] if varargs else []) + kwonly + (["**" + varkw] if varkw else [])
    )
    return args, kwargs, shown


def _is_iterator(v):
    return hasattr(v, "__next__") and hasattr(v, "__iter__")


def _current_batches(frame, params):
    """For a generator function over an iterator (mapInPandas,
    mapPartitions): the batch it holds now, the locals that are not its
    parameters and look like a batch (a pandas DataFrame or Series, a
    pyarrow RecordBatch or Table)."""
    out = []
    for name, v in frame.f_locals.items():
        if name in params:
            continue
        mod = type(v).__module__ or ""
        if mod.split(".")[0] in ("pandas", "pyarrow") and type(v).__name__ in (
            "DataFrame",
            "Series",
            "RecordBatch",
            "Table",
        ):
            out.append((name, v))
    return out


def _versions():
    v = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for mod in ("pyspark", "pandas", "numpy", "pyarrow"):
        m = sys.modules.get(mod)
        if m is not None and getattr(m, "__version__", None):
            v[mod] = str(m.__version__)
    return v


def _global_names(code):
    """The names code (and the code of the functions and lambdas nested in
    it) looks up as globals. co_names also holds attribute names; one that
    happens to be a global too is captured needlessly, never missed."""
    names, todo, seen = set(), [code], set()
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        names.update(c.co_names)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def _reference(v):
    """How a module, function or class is named instead of pickled: such a
    value is code, which replay takes from the developer's machine, never
    from the capture. None for a plain value."""
    if isinstance(v, types.ModuleType):
        return "module %s" % v.__name__
    if isinstance(v, type):
        return "class %s.%s" % (v.__module__, v.__qualname__)
    if callable(v):
        # A function, a builtin, a numpy ufunc, a UDF wrapper, a partial.
        f = getattr(v, "func", v) if isinstance(v, functools.partial) else v
        mod = getattr(f, "__module__", None) or type(f).__module__
        return "function %s.%s" % (
            mod,
            getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__,
        )
    return None


def _importable(fn):
    """{"module", "qualname"} when the function can be imported by name
    from a module that is not the driver script (cloudpickle pickles it by
    reference); else None."""
    mod_name = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", "")
    mod = sys.modules.get(mod_name or "")
    if mod is None or mod_name == "__main__" or "<locals>" in qual:
        return None
    obj = mod
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is not fn:
        return None
    return {"module": mod_name, "qualname": qual}


def _data_and_references(fn, code, enc):
    """The function's closure values and the globals its code reads that
    are plain data (what the call saw), encoded, and the names of the
    modules, functions and classes it refers to (code: recorded by name
    only)."""
    refs, closure, glob, notes = {}, {}, {}, []
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            v = cell.cell_contents
        except ValueError:  # not assigned yet
            continue
        ref = _reference(v)
        if ref:
            refs[name] = ref
        else:
            closure[name] = enc.encode(v, "closure variable %r" % name)
    g = getattr(fn, "__globals__", {})
    for name in sorted(_global_names(code)):
        if name not in g:
            continue  # a builtin or an attribute name
        v = g[name]
        ref = _reference(v)
        if ref:
            refs[name] = ref
            continue
        try:
            glob[name] = enc.encode(v, "global %r" % name)
        except CaptureError as exc:
            notes.append("%s; it was left out" % exc)
    return closure, glob, refs, notes


def _argument_names(code, args, shown):
    """How the notes name args[i]: its parameter, or *name[j]."""
    n = code.co_argcount
    star = next((p[1:] for p in shown if p.startswith("*") and not p.startswith("**")), "args")
    return [
        "argument %r" % shown[i] if i < n else "argument '*%s'[%d]" % (star, i - n)
        for i in range(len(args))
    ]


def capture_frame(frame, max_bytes):
    """Encodes the arguments of the function frame runs (DATA: the
    arguments, closure values and the plain-data globals the function
    reads, as tagged JSON) and pickles, apart, the function itself and
    any value DATA cannot hold (CODE, which replay unpickles only when the
    developer trusts the cluster); returns (header dict, DATA bytes + CODE
    bytes). Raises CaptureError with the reason."""
    cp, cp_name = _cloudpickle()
    fn = _function_of(frame)
    args, kwargs, shown = _arguments(frame)
    code = frame.f_code
    notes = []
    iterator_arg = None
    if code.co_flags & _CO_GENERATOR:
        # mapInPandas / mapPartitions: the iterator it was given cannot be
        # captured (and is partly consumed); the batch in hand can.
        for i, a in enumerate(args):
            if _is_iterator(a):
                batches = _current_batches(frame, shown)
                if len(batches) != 1:
                    raise CaptureError(
                        "%s takes an iterator (argument %r): the capture needs the one batch it "
                        "holds now, and found %d batch locals (%s)"
                        % (
                            code.co_name,
                            shown[i],
                            len(batches),
                            ", ".join(n for n, _ in batches) or "none",
                        )
                    )
                args[i] = [batches[0][1]]
                iterator_arg = i
                notes.append(
                    "argument %r was an iterator; captured as an iterator over the batch the "
                    "function held (local %r)" % (shown[i], batches[0][0])
                )
                break
    enc = _Encoder(cp)
    names = _argument_names(code, args, shown)
    doc = {"args": [enc.encode(a, names[i]) for i, a in enumerate(args)]}
    doc["kwargs"] = dict((k, enc.encode(v, "argument %r" % k)) for k, v in kwargs.items())
    doc["iterator_arg"] = iterator_arg
    closure, glob, refs, more = _data_and_references(fn, code, enc)
    doc["closure"], doc["globals"] = closure, glob
    notes.extend(enc.notes)
    notes.extend(more)
    try:
        data = json.dumps(doc, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:  # a bug in the encoder
        raise CaptureError(
            "the arguments of %s cannot be encoded: %s" % (code.co_name, exc)
        ) from None
    try:
        fbytes = cp.dumps(fn)
    except Exception as exc:
        # Replay from local source does not need it.
        fbytes = None
        notes.append(
            "the function itself cannot be pickled (%s: %s): replay needs your local source"
            % (type(exc).__name__, exc)
        )
    fcode = cp.dumps({"function": fbytes, "values": enc.pickled})
    if max_bytes and len(data) + len(fcode) > max_bytes:
        raise CaptureError(
            "the capture is %d bytes, over the cap of %d bytes: nothing was sent (raise the cap "
            "with sparkdapCapture's maxBytes or serve --capture-max-bytes)"
            % (len(data) + len(fcode), max_bytes)
        )
    header = {
        "format": FORMAT,
        "function": {
            "name": code.co_name,
            "qualname": getattr(fn, "__qualname__", code.co_name),
            "module": getattr(fn, "__module__", None),
            "file": code.co_filename,
            "firstLine": code.co_firstlineno,
            "stoppedLine": frame.f_lineno,
            "isLambda": code.co_name == "<lambda>",
            "hasClosure": bool(code.co_freevars),
            "freeVars": list(code.co_freevars),
            "isGenerator": bool(code.co_flags & _CO_GENERATOR),
            "importable": _importable(fn),
        },
        "parameters": shown,
        "argumentTypes": [_qualified(type(a)) for a in args]
        + ["%s=%s" % (k, _qualified(type(v))) for k, v in kwargs.items()],
        "closureNames": sorted(closure),
        "globalNames": sorted(glob),
        "references": refs,
        "pickledValues": len(enc.pickled),
        "notes": notes,
        "versions": _versions(),
        "pickler": cp_name,
        "dataBytes": len(data),
        "codeBytes": len(fcode),
        "payloadBytes": len(data) + len(fcode),
    }
    return header, data + fcode


def _find_frame(frame_id):
    """The frame the IDE knows as frame_id. pydevd's DAP ids are its own
    object ids translated (BaseSchema keeps the table); pydevd-pycharm's
    are id(frame)."""
    pydevd = sys.modules.get("pydevd")
    if pydevd is None:
        raise CaptureError("pydevd is not loaded in this process")
    py_db = pydevd.get_global_debugger()
    mgr = getattr(py_db, "suspended_frames_manager", None)
    if mgr is None:
        # pydevd-pycharm (PyCharm's line protocol): a frame's id is
        # id(frame), and the evaluate runs on the stopped thread, inside
        # that frame's stack.
        f = sys._getframe(1)
        while f is not None and id(f) != frame_id:
            f = f.f_back
        if f is None:
            raise CaptureError(
                "frame %d is not a frame of this stopped thread (the thread resumed?)" % frame_id
            )
        return f
    schema = sys.modules.get("_pydevd_bundle._debug_adapter.pydevd_base_schema")
    obj_id = frame_id
    if schema is not None:
        try:
            obj_id = schema.BaseSchema._translate_id_from_dap(frame_id)
        except KeyError:
            raise CaptureError("frame %d is unknown to pydevd" % frame_id) from None
    thread_id = mgr.get_thread_id_for_variable_reference(obj_id)
    frame = py_db.find_frame(thread_id, obj_id) if thread_id is not None else None
    if frame is None:
        raise CaptureError(
            "frame %d is not a frame of a stopped thread (the thread resumed?)" % frame_id
        )
    return frame


def start(frame_id, max_bytes, chunk_bytes):
    """Captures the frame pydevd knows as frame_id. Returns base64 JSON:
    {"id", "chunks", "header"} or {"error"}."""
    try:
        header, payload = capture_frame(_find_frame(frame_id), max_bytes)
    except CaptureError as exc:
        return _encode({"error": str(exc)})
    except Exception as exc:  # a bug here must not look like the user's
        return _encode({"error": "sparkdap capture failed: %s: %s" % (type(exc).__name__, exc)})
    _next_id[0] += 1
    cid = _next_id[0]
    _held[cid] = (payload, chunk_bytes)
    return _encode(
        {"id": cid, "chunks": (len(payload) + chunk_bytes - 1) // chunk_bytes, "header": header}
    )


def chunk(cid, i):
    """Piece i of capture cid, base64."""
    payload, size = _held[cid]
    return base64.b64encode(payload[i * size : (i + 1) * size]).decode("ascii")


def drop(cid):
    _held.pop(cid, None)
    return ""
