# The executor side of `sparkdapCapture` (issue 17): captures the user
# function of a stopped frame and the arguments it holds, for
# `sparkdap replay` to run on the developer's machine.
#
# The proxy does not rely on anything being installed on the executor: it
# sends this file's source inside a DAP evaluate, run by pydevd in the
# stopped thread, which execs it into a module of its own in sys.modules
# (once per source version) and calls start(). start() pickles the function
# and its arguments with the cloudpickle PySpark ships and keeps the bytes
# here; the proxy then fetches them with chunk() in pieces small enough for
# an evaluate answer, and drop() forgets them. Every answer is base64 text:
# pydevd shows a str result as its repr, and base64 has nothing repr
# escapes.
#
# Nothing here runs unless the developer asks for a capture: it is their
# data. It must run on every Python PySpark 3.5 supports (3.8 and later).

import base64
import gc
import json
import sys
import types

FORMAT = "sparkdap-capture/1"

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
        raise CaptureError("neither pyspark.cloudpickle nor cloudpickle can be imported on the executor") from None


def _function_of(frame):
    """The function object whose code the frame runs. A frame names only
    its code object; the function is whatever refers to that code. Several
    functions can share one code (a lambda made in a loop): the first is
    taken; their code is the same and the one whose closure matches the
    frame's free variables is preferred."""
    code = frame.f_code
    found = [o for o in gc.get_referrers(code) if isinstance(o, types.FunctionType) and o.__code__ is code]
    if not found:
        raise CaptureError(
            "no function object runs %s (%s line %d): the frame is module or class body code, not a function" % (code.co_name, code.co_filename, frame.f_lineno)
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
            raise CaptureError("argument %r of %s has no value in the frame (deleted before the stop)" % (n, code.co_name))
    args = [loc[n] for n in names]
    if varargs:
        args.extend(loc[varargs])
    kwargs = dict((n, loc[n]) for n in kwonly)
    if varkw:
        kwargs.update(loc[varkw])
    shown = names + (["*" + varargs] if varargs else []) + kwonly + (["**" + varkw] if varkw else [])
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
        if mod.split(".")[0] in ("pandas", "pyarrow") and type(v).__name__ in ("DataFrame", "Series", "RecordBatch", "Table"):
            out.append((name, v))
    return out


def _versions():
    v = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for mod in ("pyspark", "pandas", "numpy", "pyarrow"):
        m = sys.modules.get(mod)
        if m is not None and getattr(m, "__version__", None):
            v[mod] = str(m.__version__)
    return v


def capture_frame(frame, max_bytes):
    """Pickles the function frame runs and its arguments; returns (header
    dict, payload bytes). Raises CaptureError with the reason."""
    cp, cp_name = _cloudpickle()
    fn = _function_of(frame)
    args, kwargs, shown = _arguments(frame)
    code = frame.f_code
    notes = []
    iterator_arg = None
    if code.co_flags & _CO_GENERATOR:
        # mapInPandas / mapPartitions: the iterator it was given cannot be
        # pickled (and is partly consumed); the batch in hand can.
        for i, a in enumerate(args):
            if _is_iterator(a):
                batches = _current_batches(frame, shown)
                if len(batches) != 1:
                    raise CaptureError(
                        "%s takes an iterator (argument %r): the capture needs the one batch it holds now, and found %d batch locals (%s)"
                        % (code.co_name, shown[i], len(batches), ", ".join(n for n, _ in batches) or "none")
                    )
                args[i] = [batches[0][1]]
                iterator_arg = i
                notes.append("argument %r was an iterator; captured as an iterator over the batch the function held (local %r)" % (shown[i], batches[0][0]))
                break
    for i, a in enumerate(args):
        try:
            cp.dumps(a)
        except Exception as exc:
            name = shown[i] if i < len(shown) else "*args[%d]" % i
            raise CaptureError("argument %r (%s) cannot be pickled: %s: %s" % (name, type(a).__name__, type(exc).__name__, exc)) from None
    try:
        payload = cp.dumps({"function": fn, "args": args, "kwargs": kwargs, "iterator_arg": iterator_arg})
    except Exception as exc:
        raise CaptureError("%s cannot be pickled: %s: %s" % (code.co_name, type(exc).__name__, exc)) from None
    if max_bytes and len(payload) > max_bytes:
        raise CaptureError(
            "the capture is %d bytes, over the cap of %d bytes: nothing was sent (raise the cap with sparkdapCapture's maxBytes or serve --capture-max-bytes)"
            % (len(payload), max_bytes)
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
            "isGenerator": bool(code.co_flags & _CO_GENERATOR),
        },
        "parameters": shown,
        "argumentTypes": [type(a).__name__ for a in args] + ["%s=%s" % (k, type(v).__name__) for k, v in kwargs.items()],
        "notes": notes,
        "versions": _versions(),
        "pickler": cp_name,
        "payloadBytes": len(payload),
    }
    return header, payload


def _find_frame(frame_id):
    """The frame the DAP client knows as frame_id. pydevd's DAP ids are
    its own object ids translated (BaseSchema keeps the table)."""
    pydevd = sys.modules.get("pydevd")
    if pydevd is None:
        raise CaptureError("pydevd is not loaded in this process")
    schema = sys.modules.get("_pydevd_bundle._debug_adapter.pydevd_base_schema")
    obj_id = frame_id
    if schema is not None:
        try:
            obj_id = schema.BaseSchema._translate_id_from_dap(frame_id)
        except KeyError:
            raise CaptureError("frame %d is unknown to pydevd" % frame_id) from None
    py_db = pydevd.get_global_debugger()
    mgr = py_db.suspended_frames_manager
    thread_id = mgr.get_thread_id_for_variable_reference(obj_id)
    frame = py_db.find_frame(thread_id, obj_id) if thread_id is not None else None
    if frame is None:
        raise CaptureError("frame %d is not a frame of a stopped thread (the thread resumed?)" % frame_id)
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
    return _encode({"id": cid, "chunks": (len(payload) + chunk_bytes - 1) // chunk_bytes, "header": header})


def chunk(cid, i):
    """Piece i of capture cid, base64."""
    payload, size = _held[cid]
    return base64.b64encode(payload[i * size : (i + 1) * size]).decode("ascii")


def drop(cid):
    _held.pop(cid, None)
    return ""
