# The columnar loaders of a capture's DATA (the Decoder in
# sparkdap_replay_data.py calls them): Arrow IPC streams (pandas and
# pyarrow values) and .npy arrays (numpy values), each read by a reader
# that cannot run code or touch raw memory: pyarrow 14.0.1 or later (no
# unpickled extension types), every batch validated in full; numpy without
# pickles. The bytes are an executor's (SECURITY.md): what reading them
# allocates is charged to the Budget from their own metadata (Arrow's
# message headers, the .npy header) before any of it is read, and a value
# that does not read is a _Malformed, never another exception.

import base64
import io
import struct

from sparkdap_replay_budget import _OBJ, _PTR, ReplayError, _Malformed


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
