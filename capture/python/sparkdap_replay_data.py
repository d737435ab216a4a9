# Decoding a capture file for `sparkdap replay` (sparkdap_replay.py runs
# it): the file's header, checked for the shapes replay relies on, and the
# call's DATA, tagged JSON decoded by loaders that cannot run code or touch
# raw memory. The file is bytes an executor chose (SECURITY.md): every
# malformed part is a ReplayError, never another exception, and every
# size it declares is charged to a Budget (--max-memory) before the value
# is built. CODE (the pickled function and values) is unpickled only with
# --trust-captured-code.
#
# By role: this module reads the header and decodes DATA's tagged JSON
# (Decoder); sparkdap_replay_columnar.py loads its Arrow and .npy values;
# sparkdap_replay_budget.py holds ReplayError and the memory Budget. Their
# names replay and its tests use stay importable from here.

import base64
import datetime
import decimal
import json
import pickle
import uuid

from sparkdap_replay_budget import (  # noqa: F401 (re-exported for replay and its tests)
    _OBJ,
    _PTR,
    MAX_MEMORY_FLAG,
    Budget,
    ReplayError,
    TooLarge,
    _Malformed,
    default_budget,
    human,
    parse_size,
)
from sparkdap_replay_columnar import _arrow, _b64, _npy, _numpy, _pyarrow

FORMAT = "sparkdap-capture/3"

TRUST_FLAG = "--trust-captured-code"


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


class Decoder:
    """Decodes DATA's tagged JSON. values is None unless the developer
    trusts the capture: then it maps the keys of values the capture
    carries only pickled to their pickles."""

    def __init__(self, values=None, budget=None):
        self.values = values
        self.unpickled = 0
        # Unbounded only for a caller that bounds it otherwise.
        self.budget = budget if budget is not None else Budget(float("inf"))
        self.where = "the capture's data"

    def _charge(self, nbytes, what):
        self.budget.charge(nbytes, what, self.where)

    def document(self, raw):
        """The call's arguments, closure values and data globals from
        DATA's bytes."""
        # The JSON parser builds a Python object per value: charged before
        # it runs, counting each value's separator (base64 has none).
        items = sum(raw.count(c) for c in (b",", b":", b"[", b"{"))
        what = "its JSON of %d bytes and %d values" % (len(raw), items)
        self._charge(len(raw) + items * (_PTR + _OBJ), what)
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
            out = {"args": []}
            for i, v in enumerate(doc["args"]):
                self.where = "args[%d]" % i
                out["args"].append(self.value(v, 0))
            out["left_out"] = []
            for k in ("kwargs", "closure", "globals"):
                m = doc.get(k) or {}
                if not isinstance(m, dict):
                    raise _Malformed("%s that is no object" % k)
                out[k] = {}
                for name, v in m.items():
                    self.where = "%s[%.80r]" % (k, name)
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
            self._charge(_OBJ + _PTR * len(j), "a list of %d items" % len(j))
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
        # The list of items, then the container built of them.
        n = len(j["v"])
        self._charge(_OBJ + (_PTR + _OBJ) * n, "a %s of %d items" % (j["$t"], n))
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
        self._charge(len(str(j["v"])), "bytes of %d base64 characters" % len(str(j["v"])))
        return _b64(j["v"])

    def _bytearray(self, j, depth):
        self._charge(2 * len(str(j["v"])), "a bytearray of %d base64 characters" % len(str(j["v"])))
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
        return _npy(j["npy"], self.budget, self.where)

    def _numpy_scalar(self, j, depth):
        arr = _npy(j["npy"], self.budget, self.where)
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
        size = 1
        for n in shape:
            size *= n
        if type(j["v"]) is not list:
            raise _Malformed("a container whose items are no list")
        if size != len(j["v"]):
            raise _Malformed("an array of shape %r with %d items" % (shape, len(j["v"])))
        self._charge(_PTR * size, "a numpy object array of shape %r" % (shape,))
        items = self._items(j, depth)
        arr = np.empty(len(items), dtype=object)
        for i, x in enumerate(items):
            arr[i] = x
        return arr.reshape(shape)

    def _dataframe(self, j, depth):
        pa = _pyarrow()
        schema, batches = _arrow(j["arrow"], self.budget, self.where)
        return pa.Table.from_batches(batches, schema=schema).to_pandas()

    def _series(self, j, depth):
        pa = _pyarrow()
        name = self.value(j["name"], depth)
        schema, batches = _arrow(j["arrow"], self.budget, self.where)
        df = pa.Table.from_batches(batches, schema=schema).to_pandas()
        if list(df.columns) != ["__sparkdap_series__"]:
            raise _Malformed("a Series whose table has columns %r" % (list(df.columns)[:5],))
        s = df["__sparkdap_series__"]
        s.name = name
        return s

    def _arrow_table(self, j, depth):
        pa = _pyarrow()
        schema, batches = _arrow(j["arrow"], self.budget, self.where)
        return pa.Table.from_batches(batches, schema=schema)

    def _arrow_recordbatch(self, j, depth):
        _, batches = _arrow(j["arrow"], self.budget, self.where)
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
        return unpickle(raw)


# How deep the capture file's JSON may nest, outside DATA: the proxy
# refuses an executor's header deeper than 32 (capture.MaxHeaderDepth),
# and its own fields add nothing deeper.
MAX_HEADER_DEPTH = 32


def _depth(v):
    """How deep v nests (a scalar is 0), without recursion: the header is
    the executor's, and may nest as deep as the parser let it."""
    deepest, todo = 0, [(v, 1)]
    while todo:
        v, d = todo.pop()
        kids = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if kids is None:
            continue
        deepest = max(deepest, d)
        if d > MAX_HEADER_DEPTH:
            break
        todo.extend((k, d + 1) for k in kids)
    return deepest


def _is_str_list(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _well_formed(cap):
    """Whether the executor-written parts of the header have the shapes
    replay relies on: every field replay reads is checked here, so that
    nothing later fails on a shape with anything but a ReplayError."""
    info = cap.get("function")
    if not isinstance(info, dict):
        return False
    first = info.get("firstLine", 0)
    imp = info.get("importable")
    versions = cap.get("versions", {})
    return (
        type(first) is int
        and 0 <= first < 1 << 31
        and all(isinstance(info.get(k, ""), str) for k in ("qualname", "name", "file"))
        and isinstance(info.get("isGenerator", False), bool)
        and _is_str_list(info.get("freeVars") or [])
        and (
            imp is None
            or (
                isinstance(imp, dict)
                and isinstance(imp.get("module"), str)
                and isinstance(imp.get("qualname"), str)
            )
        )
        and isinstance(versions, dict)
        and isinstance(versions.get("python", ""), str)
        and isinstance(cap.get("references", {}), dict)
        and _is_str_list(cap.get("parameters") or [])
        and isinstance(cap.get("data", ""), str)
        and isinstance(cap.get("code", ""), str)
        and isinstance(cap.get("localFile", ""), str)
        and _is_str_list(cap.get("localRoots", []))
    )


def load(path):
    """The capture file at path, its header checked; ReplayError for
    anything that is not a capture this replay reads (OSError when the
    file cannot be read)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        cap = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise ReplayError(
            "%s is not a well-formed sparkdap capture: it nests deeper than %d"
            % (path, MAX_HEADER_DEPTH)
        ) from None
    except (ValueError, _Malformed) as exc:  # UnicodeDecodeError is a ValueError
        raise ReplayError("%s is not a sparkdap capture (not JSON: %s)" % (path, exc)) from None
    if not isinstance(cap, dict) or cap.get("format") != FORMAT:
        have = cap.get("format") if isinstance(cap, dict) else None
        why = ""
        if have in ("sparkdap-capture/1", "sparkdap-capture/2"):
            why = (
                ": its data is a pickle, which replay no longer reads from a cluster; "
                "capture the call again"
            )
        raise ReplayError(
            "%s is not a sparkdap capture this replay reads (format %.40r, want %r)%s"
            % (path, have, FORMAT, why)
        )
    if _depth(cap) > MAX_HEADER_DEPTH:
        raise ReplayError(
            "%s is not a well-formed sparkdap capture: it nests deeper than %d"
            % (path, MAX_HEADER_DEPTH)
        )
    # The executor wrote most of it: check the shapes replay relies on.
    if not _well_formed(cap):
        raise ReplayError("%s is not a well-formed sparkdap capture" % path)
    return cap


def unpickle(raw):
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
    try:
        raw = base64.b64decode(cap.get("code", "").encode("ascii"), validate=True)
    except ValueError:  # UnicodeEncodeError is one
        raise ReplayError("the capture's code is not base64") from None
    code = unpickle(raw)
    if not isinstance(code, dict) or not isinstance(code.get("values"), dict):
        raise ReplayError("the capture's code is not what sparkdap captures")
    return code


def load_data(cap, code=None, budget=None):
    """The call's arguments, closure values and data globals, and how many
    values were unpickled (only with code, the trusted CODE), each value
    charged to budget before it is built (default: default_budget of the
    capture's data and code)."""
    if budget is None:
        budget = Budget(default_budget(len(cap.get("data", "")) + len(cap.get("code", ""))))
    dec = Decoder(code["values"] if code is not None else None, budget)
    try:
        raw = base64.b64decode(cap.get("data", "").encode("ascii"), validate=True)
    except ValueError:  # UnicodeEncodeError is one
        raise ReplayError("the capture's data is not base64") from None
    return dec.document(raw), dec.unpickled
