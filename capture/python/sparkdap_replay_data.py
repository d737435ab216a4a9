# Decoding a capture file for `sparkdap replay` (sparkdap_replay.py runs
# it): the file's header, checked for the shapes replay relies on, and the
# call's DATA, tagged JSON decoded by loaders that cannot run code or touch
# raw memory. The file is bytes an executor chose (SECURITY.md): every
# malformed part is a ReplayError, never another exception, and every
# size it declares is charged to a Budget (--max-memory) before the value
# is built. CODE (the pickled function and values) is unpickled only with
# --trust-captured-code.

import base64
import datetime
import decimal
import io
import json
import pickle
import re
import struct
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


MAX_MEMORY_FLAG = "--max-memory"

# The default budget: 64 times the capture file's size (a capture's values
# built take a few times their encoded bytes; 64 leaves room for pandas'
# Python objects per row of text), at least 64 MiB (a small capture of
# text columns), at most 1 GiB (what a laptop spares without noticing).
# A larger value the developer trusts takes --max-memory.
DEFAULT_FACTOR = 64
DEFAULT_FLOOR = 64 << 20
DEFAULT_CEILING = 1 << 30

_SIZE = re.compile(r"\A([0-9]+)\s*(?:([KMGT])(?:I?B)?|B)?\Z", re.IGNORECASE)
_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def parse_size(text):
    """Bytes of a SIZE: 512MiB, 2GiB, 2G, 1048576 (K, M, G and T are
    binary, with or without iB or B); ValueError for anything else."""
    m = _SIZE.match(str(text).strip())
    if not m or int(m.group(1)) <= 0:
        raise ValueError("want a size above 0 such as 512MiB or 2GiB, got %r" % (text,))
    return int(m.group(1)) << _SHIFT[(m.group(2) or "").upper()]


def default_budget(file_size):
    return min(DEFAULT_CEILING, max(DEFAULT_FLOOR, DEFAULT_FACTOR * file_size))


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return "%.1f %s" % (n / (1 << shift), unit)
    return "%d bytes" % n


class TooLarge(ReplayError):
    """A value whose declared size is over the memory budget."""


class Budget:
    """The memory replay may spend building the capture's values: each
    value's size, as its encoding declares it, is charged before it is
    built, and a value that would go over is refused (TooLarge) instead."""

    def __init__(self, limit):
        self.limit = limit
        self.used = 0

    def charge(self, nbytes, what, where):
        nbytes = max(0, int(nbytes))
        if self.used + nbytes > self.limit:
            raise TooLarge(
                "%s: %s would take about %s here, over replay's memory budget of %s (%s of it "
                "spent); if you trust the capture, raise it with %s SIZE"
                % (
                    where,
                    what,
                    human(nbytes),
                    human(self.limit),
                    human(self.used),
                    MAX_MEMORY_FLAG,
                )
            )
        self.used += nbytes


# What a built value costs, per item, in the estimates Budget is charged:
# a pointer in a list or an object array, and a Python object (a str, a
# bytes, a dict or list of a row) beside it.
_PTR = 8
_OBJ = 56


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


class _Flat:
    """Just enough of a flatbuffer reader for an Arrow IPC message's
    metadata (format/Message.fbs), every read bounds-checked: a table's
    fields by index, scalars, sub-tables and vectors of structs."""

    def __init__(self, buf):
        self.buf = buf

    def _u(self, fmt, pos):
        if pos < 0 or pos + struct.calcsize(fmt) > len(self.buf):
            raise _Malformed("Arrow metadata that ends early")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def root(self):
        return self._u("<I", 0)

    def _field(self, table, i):
        vt = table - self._u("<i", table)
        if 4 + 2 * i >= self._u("<H", vt):
            return 0
        off = self._u("<H", vt + 4 + 2 * i)
        return table + off if off else 0

    def scalar(self, table, i, fmt, default=0):
        p = self._field(table, i)
        return self._u(fmt, p) if p else default

    def table(self, table, i):
        p = self._field(table, i)
        return p + self._u("<I", p) if p else 0

    def structs(self, table, i, fmt):
        """A vector of structs of fmt's fields."""
        v = self.table(table, i)
        if not v:
            return []
        n, size = self._u("<I", v), struct.calcsize(fmt)
        if v + 4 + n * size > len(self.buf):
            raise _Malformed("Arrow metadata whose vector runs past its end")
        return [struct.unpack_from(fmt, self.buf, v + 4 + k * size) for k in range(n)]


# Message.fbs's MessageHeader: the union's types of a batch.
_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3


def _declared(stream, budget, where):
    """Charges what reading the stream's batches allocates beyond the
    stream's own bytes, read from each message's metadata before any
    batch is: the reader reads uncompressed buffers in place (zero-copy),
    but decompresses a compressed one into its declared size. The
    capture writes none compressed; a hostile one may declare gigabytes
    in a few bytes."""
    pa = _pyarrow()
    for msg in pa.ipc.MessageReader.open_stream(stream):
        meta = _Flat(msg.metadata.to_pybytes())
        root = meta.root()
        kind = meta.scalar(root, 1, "<B")
        header = meta.table(root, 2)
        if kind == _DICTIONARY_BATCH:
            header = meta.table(header, 1)
        elif kind != _RECORD_BATCH:
            continue
        if not header or not meta.table(header, 3):  # no BodyCompression
            continue
        body = msg.body.to_pybytes() if msg.body is not None else b""
        total = 0
        for offset, length in meta.structs(header, 2, "<qq"):
            if length >= 8 and 0 <= offset and offset + 8 <= len(body):
                n = struct.unpack_from("<q", body, offset)[0]
                total += length if n == -1 else n
        budget.charge(total, "an Arrow batch's compressed buffers, decompressed,", where)


def _text_bytes(arr):
    """The bytes a view array's rows hold together, from its views (16
    bytes each, the length first), read where they lie: the views are an
    executor's, and many may name the same bytes."""
    np = _numpy()
    bufs = arr.buffers()
    if len(bufs) < 2 or bufs[1] is None:
        return 0
    views = np.frombuffer(bufs[1], dtype="<i4")
    lengths = views[: (len(views) // 4) * 4].reshape(-1, 4)[:, 0]
    lengths = lengths[arr.offset : arr.offset + len(arr)]
    return int(np.clip(lengths, 0, None).sum(dtype=np.int64))


def _ids(pa, *makers):
    """The type ids of the types these pyarrow constructors make, those
    this pyarrow has (views came in 16)."""
    out = set()
    for name, args in makers:
        make = getattr(pa, name, None)
        if make is not None:
            out.add(make(*[getattr(pa, a)() for a in args]).id)
    return out


def _list_view_items(arr):
    """The items a list view array's rows name together, from its sizes:
    rows may name the same items again and again."""
    np = _numpy()
    bufs = arr.buffers()
    if len(bufs) < 3 or bufs[2] is None:
        return 0
    width = "<i8" if arr.type.id in _ids(_pyarrow(), ("large_list_view", ["null"])) else "<i4"
    sizes = np.frombuffer(bufs[2], dtype=width)[arr.offset : arr.offset + len(arr)]
    return int(np.clip(sizes, 0, None).sum(dtype=np.int64))


def _arrow_cost(arr):
    """About the bytes arr takes built, as pandas would have it: from its
    logical length (a run-end encoded array's decoded one) and type, never
    from its buffers alone, which a null array, a run or many views over
    the same bytes do not need. Per row: 8 bytes for a number or a null
    (None in an object column), a pointer and a Python object for a row
    of text, binary, decimal, date, list, struct or map, plus the bytes
    the row's text holds; then its children, dictionary and run values."""
    pa = _pyarrow()
    t, n = arr.type, len(arr)
    obj = _PTR + _OBJ
    types = pa.types
    if types.is_null(t):
        return n * _PTR
    if isinstance(t, pa.ExtensionType):
        return _arrow_cost(arr.storage)
    if types.is_run_end_encoded(t):
        values = arr.values
        per_row = _arrow_cost(values) // max(1, len(values))
        return n * max(_PTR, per_row) + _arrow_cost(arr.run_ends) + _arrow_cost(values)
    if types.is_dictionary(t):
        return n * _PTR + _arrow_cost(arr.indices) + _arrow_cost(arr.dictionary)
    if t.id in _ids(pa, ("string_view", []), ("binary_view", [])):
        return n * (obj + 16) + _text_bytes(arr)
    if types.is_string(t) or types.is_binary(t) or types.is_large_string(t):
        return n * obj + sum(b.size for b in arr.buffers() if b is not None)
    if types.is_large_binary(t) or types.is_fixed_size_binary(t):
        return n * obj + sum(b.size for b in arr.buffers() if b is not None)
    if t.id in _ids(pa, ("list_view", ["null"]), ("large_list_view", ["null"])):
        values = arr.values
        per_item = _arrow_cost(values) // max(1, len(values))
        return n * obj + _list_view_items(arr) * max(_PTR, per_item) + _arrow_cost(values)
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return n * obj + _arrow_cost(arr.values)
    if types.is_map(t):
        return n * obj + _arrow_cost(arr.keys) + _arrow_cost(arr.items)
    if types.is_struct(t) or types.is_union(t):
        return n * obj + sum(_arrow_cost(arr.field(i)) for i in range(t.num_fields))
    if types.is_integer(t) or types.is_floating(t) or types.is_boolean(t):
        return n * _PTR
    if types.is_timestamp(t) or types.is_duration(t):
        return n * _PTR
    # Decimals, dates, times, intervals: a Python object a row.
    return n * (obj + max(1, getattr(t, "bit_width", 64) // 8))


def _arrow(s, budget, where):
    """The schema and record batches of an Arrow IPC stream: what reading
    it allocates charged from its metadata first (_declared), then each
    batch, read in place, charged what it takes built (_arrow_cost), then
    validated in full (offsets, lengths, UTF-8) before any of it is
    read."""
    pa = _pyarrow()
    try:
        stream = pa.py_buffer(_b64(s))
        _declared(stream, budget, where)
        reader = pa.ipc.open_stream(stream)
        batches = []
        for b in reader:
            for i, col in enumerate(b.columns):
                budget.charge(
                    _arrow_cost(col),
                    "Arrow column %.80r (%s, %d rows)" % (b.schema.names[i], col.type, len(col)),
                    where,
                )
            b.validate(full=True)
            batches.append(b)
        return reader.schema, batches
    except ReplayError:
        raise
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


def _npy_header(f):
    """The .npy header's (shape, fortran_order, dtype), read without the
    array."""
    np = _numpy()
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version == (1, 0):
        return fmt.read_array_header_1_0(f)
    if version == (2, 0):
        return fmt.read_array_header_2_0(f)
    try:  # 3.0 (UTF-8 field names) has no public reader of its own
        from numpy.lib import _format_impl as impl
    except ImportError:
        impl = fmt
    return impl._read_array_header(f, version)


def _npy(s, budget, where):
    np = _numpy()
    try:
        f = io.BytesIO(_b64(s))
        shape, _, dtype = _npy_header(f)
        count = 1
        for d in shape:
            count *= d
        budget.charge(
            count * max(1, dtype.itemsize),
            "a numpy array of shape %.80r and dtype %s" % (shape, dtype),
            where,
        )
        f.seek(0)
        arr = np.load(f, allow_pickle=False)
    except ReplayError:
        raise
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
