"""sparkdap_capture (the executor side of a capture) and sparkdap_replay
(the developer's side): a call stopped in a function is captured from its
frame and replayed, from the local source when there is one."""

import base64
import io
import json
import os
import sys
import threading

import pytest

import sparkdap_capture as sc
import sparkdap_replay as sr


def stop_in(fn, args, line_offset=1):
    """Runs fn(*args) and captures its frame at the line line_offset lines
    below its def (as a breakpoint there would), like pydevd's stopped
    frame. Returns (header, payload) or the CaptureError."""
    got = {}
    target = fn.__code__
    want = target.co_firstlineno + line_offset

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == want and "cap" not in got:
            try:
                got["cap"] = sc.capture_frame(frame, got.get("max", 0))
            except sc.CaptureError as exc:
                got["cap"] = exc
        return local

    def glob(frame, event, arg):
        return local if frame.f_code is target else None

    got["max"] = stop_in.max_bytes
    sys.settrace(glob)
    try:
        try:
            r = fn(*args)
            if hasattr(r, "__next__"):
                list(r)
        except Exception:
            pass
    finally:
        sys.settrace(None)
    return got["cap"]


stop_in.max_bytes = 0


def as_file(header, payload, local=""):
    """The capture file the proxy writes (dap/capture.go): DATA and CODE
    apart."""
    cap = dict(header)
    n = header["dataBytes"]
    cap["data"] = base64.b64encode(payload[:n]).decode("ascii")
    cap["code"] = base64.b64encode(payload[n:]).decode("ascii")
    cap["localFile"] = local
    # serve's --root: here the local file's own directory.
    cap["localRoots"] = [os.path.dirname(local)] if local else []
    return json.loads(json.dumps(cap))


def load_script(tmp_path, src, name="job.py"):
    """Runs src as a driver script does (module __main__), from a file."""
    path = tmp_path / name
    path.write_text(src)
    ns = {"__name__": "__main__"}
    exec(compile(src, str(path), "exec"), ns)
    return ns, str(path)


JOB = """
import math

def parse(s, scale=2):
    v = int(s)
    return math.floor(v * scale)
"""


def replay(cap, **kw):
    out = io.StringIO()
    rc = sr.run(cap, out=out, **kw)
    return rc, out.getvalue()


def test_top_level_function_replays_from_the_local_source(tmp_path):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("21",))
    assert header["format"] == sr.FORMAT
    assert header["function"]["name"] == "parse"
    assert header["function"]["file"] == path
    assert header["parameters"] == ["s", "scale"]
    assert header["versions"]["python"].startswith("%d.%d." % sys.version_info[:2])
    assert header["pickler"] == "pyspark.cloudpickle"
    cap = as_file(header, payload, path)
    rc, out = replay(cap)
    assert rc == 0, out
    assert "your local source" in out and "returned 42" in out

    # The developer edits the function: replay runs the edit.
    (tmp_path / "job.py").write_text(JOB.replace("v * scale", "v * scale + 1"))
    rc, out = replay(cap)
    assert rc == 0 and "returned 43" in out, out


def test_exception_is_reproduced_then_fixed_locally(tmp_path):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("x1",))
    cap = as_file(header, payload, path)
    rc, out = replay(cap)
    assert rc == 1, out
    assert "raised ValueError: invalid literal for int() with base 10: 'x1'" in out
    (tmp_path / "job.py").write_text(JOB.replace("int(s)", "int(s.strip('x'))"))
    rc, out = replay(cap)
    assert rc == 0 and "returned 2" in out, out


def test_without_local_source_replay_refuses_unless_trusted(tmp_path):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    cap = as_file(header, payload, "")
    rc, out = replay(cap)
    assert rc == 2, out
    assert (
        "no local source for parse" in out
        and "from the cluster" in out
        and "--trust-captured-code" in out
    ), out
    assert "returned" not in out
    rc, out = replay(cap, trust=True)
    assert rc == 0 and "returned 10" in out and "using the captured parse" in out, out
    assert "warning: --trust-captured-code" in out


def test_lambda_replays_from_the_local_source(tmp_path):
    src = "OFFSET = 100\nf = lambda x: (\n    x + OFFSET)\n"
    ns, path = load_script(tmp_path, src)
    header, payload = stop_in(ns["f"], (41,))
    assert header["function"]["isLambda"]
    assert header["globalNames"] == ["OFFSET"]
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned 141" in out and "a lambda" in out and "your local source" in out, (
        out
    )
    # A local fix takes effect; OFFSET keeps the captured value (the
    # assignment is a statement replay does not run).
    (tmp_path / "job.py").write_text(
        src.replace("x + OFFSET", "x - OFFSET").replace("= 100", "= 7")
    )
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned -59" in out, out


RDD_JOB = """
import math
from functools import reduce
try:
    import statistics as st
except ImportError:
    st = None

def helper(v):
    return math.floor(st.mean([v]))

def build(scale, shift):
    bump = shift * 2
    return lambda row: helper(row * scale) + bump

def other(scale):
    return lambda row: row

raise SystemExit("running the driver script would start the Spark job")
"""


def test_closure_lambda_binds_the_captured_closure_values(tmp_path):
    ns = {"__name__": "__main__"}
    src = RDD_JOB.replace(
        'raise SystemExit("running the driver script would start the Spark job")', ""
    )
    path = tmp_path / "job.py"
    path.write_text(src)
    exec(compile(src, str(path), "exec"), ns)
    f = ns["build"](3, 5)
    header, payload = stop_in(f, (2.5,), line_offset=0)
    assert header["function"]["qualname"] == "build.<locals>.<lambda>"
    assert header["closureNames"] == ["bump", "scale"]
    assert header["references"] == {"helper": "function __main__.helper"}
    # The local file has a top-level statement that would end the replay
    # if it ran: only imports and defs run.
    path.write_text(RDD_JOB)
    cap = as_file(header, payload, str(path))
    rc, out = replay(cap)
    assert rc == 0 and "returned 17" in out, out
    assert "build.<locals>.<lambda> (a lambda) from %s:14" % path in out, out
    # The local fix to the lambda and to the helper it calls takes effect.
    path.write_text(
        RDD_JOB.replace("helper(row * scale) + bump", "helper(row * scale) - bump").replace(
            "math.floor(", "math.ceil("
        )
    )
    rc, out = replay(cap)
    assert rc == 0 and "returned -2" in out, out


def test_nested_def_found_by_qualname_and_nearest_line(tmp_path):
    src = (
        "def make(k):\n"
        "    def f(x):\n"
        "        return x * k\n"
        "    return f\n"
        "def make2(k):\n"
        "    def f(x):\n"
        "        return -x\n"
        "    return f\n"
        "fs = [make(k) for k in range(5)]\n"
    )
    ns, path = load_script(tmp_path, src)
    header, payload = stop_in(ns["fs"][3], (2,), line_offset=1)
    assert header["closureNames"] == ["k"]
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned 6" in out and "make.<locals>.f (a def) from %s:2" % path in out, (
        out
    )
    # Lines move with an edit above it: the qualified name still finds it.
    (tmp_path / "job.py").write_text("import os\n\n\n" + src.replace("x * k", "x * k + 1"))
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned 7" in out and ":5 (your local source)" in out, out


def test_ambiguous_lambdas_are_refused(tmp_path):
    src = "fs = [lambda x: x + 1, lambda x: x + 2]\n"
    ns, path = load_script(tmp_path, src)
    header, payload = stop_in(ns["fs"][1], (1,), line_offset=0)
    rc, out = replay(as_file(header, payload, path))
    assert (
        rc == 2
        and "2 functions in your local file match <lambda>" in out
        and "cannot tell which one ran" in out
    ), out


def test_a_function_in_the_closure_is_refused(tmp_path):
    src = (
        "def make():\n    def g(v):\n        return v\n"
        "    def f(x):\n        return g(x)\n    return f\nf = make()\n"
    )
    ns, path = load_script(tmp_path, src)
    header, payload = stop_in(ns["f"], (1,))
    assert header["references"]["g"] == "function __main__.make.<locals>.g"
    rc, out = replay(as_file(header, payload, path))
    assert (
        rc == 2
        and "closure variable 'g' is function __main__.make.<locals>.g" in out
        and "--trust-captured-code" in out
    ), out
    rc, out = replay(as_file(header, payload, path), trust=True)
    assert rc == 0 and "returned 1" in out, out


def test_local_file_must_be_a_regular_py_file(tmp_path):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    other = tmp_path / "notes.txt"
    other.write_text(JOB)
    for local in (str(other), str(tmp_path)):
        rc, out = replay(as_file(header, payload, local))
        assert rc == 2 and "not a regular .py file" in out, out


def test_importable_function_comes_from_the_local_file(tmp_path, monkeypatch):
    """A function pickled by reference (its module was imported) replays
    from the file the proxy mapped, not from the module the capture names;
    without a mapped file only --trust-captured-code imports that module."""
    (tmp_path / "loanlib17.py").write_text("def risk(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import loanlib17

    header, payload = stop_in(loanlib17.risk, (4,))
    assert header["function"]["importable"] == {"module": "loanlib17", "qualname": "risk"}
    (tmp_path / "loanlib17.py").write_text("def risk(x):\n    return x * 3\n")
    monkeypatch.delitem(sys.modules, "loanlib17")
    rc, out = replay(as_file(header, payload, str(tmp_path / "loanlib17.py")))
    assert rc == 0 and "returned 12" in out and "your local source" in out, out
    rc, out = replay(as_file(header, payload, ""))
    assert rc == 2 and "no local source for risk" in out and "returned" not in out, out
    assert "loanlib17" not in sys.modules
    rc, out = replay(as_file(header, payload, ""), trust=True)
    assert (
        rc == 0 and "returned 12" in out and "imported from your local module loanlib17" in out
    ), out


def test_a_library_module_is_not_imported_for_the_cluster(tmp_path):
    """A hostile capture names os.system as the function, with data for
    its argument: replay must not call it, even trusted (then it would run
    the captured pickle, which is not os.system)."""
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    for mod, fn, why in (
        ("os", "system", "standard library or site-packages, not your source"),
        ("subprocess", "getoutput", "standard library or site-packages, not your source"),
        ("pytest", "main", "standard library or site-packages, not your source"),
        ("sparkdap_replay", "main", "sparkdap's own code, not your source"),
    ):
        header["function"]["importable"] = {"module": mod, "qualname": fn}
        header["function"]["qualname"] = fn
        rc, out = replay(as_file(header, payload, ""))
        assert rc == 2 and "no local source" in out and "returned" not in out, out
        cap = as_file(header, payload, "")
        code = {"function": None, "values": {}}
        cap["code"] = base64.b64encode(__import__("pickle").dumps(code)).decode()
        rc, out = replay(cap, trust=True)
        assert rc == 2 and why in out and "returned" not in out, out


def test_size_cap_refuses_with_the_sizes(tmp_path):
    ns, _ = load_script(tmp_path, JOB)
    stop_in.max_bytes = 100
    try:
        err = stop_in(ns["parse"], ("1" * 500,))
    finally:
        stop_in.max_bytes = 0
    assert isinstance(err, sc.CaptureError)
    assert "over the cap of 100 bytes" in str(err) and "nothing was sent" in str(err)


def test_unpicklable_argument_is_named(tmp_path):
    ns, _ = load_script(tmp_path, "def g(a, lock):\n    return a\n")
    err = stop_in(ns["g"], (1, threading.Lock()))
    assert isinstance(err, sc.CaptureError)
    assert (
        "argument 'lock' is a _thread.lock, which a capture carries only pickled, and it cannot "
        "be pickled" in str(err)
    )


def test_other_python_warns_and_refuses_pickles_unless_forced(tmp_path):
    """The data is JSON and the function your source: another Python
    replays them with a warning. The pickles --trust-captured-code loads
    need the same major.minor, unless forced."""
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("1",))
    header["versions"]["python"] = "3.%d.0" % (sys.version_info[1] + 1)
    cap = as_file(header, payload, path)
    rc, out = replay(cap)
    assert (
        rc == 0
        and "warning: the capture was made by Python 3.%d.0" % (sys.version_info[1] + 1) in out
        and "returned 2" in out
    ), out
    rc, out = replay(cap, trust=True)
    assert rc == 2 and "pickles need the same major.minor" in out and "--force" in out, out
    rc, out = replay(cap, trust=True, force=True)
    assert rc == 0 and "warning:" in out and "returned 2" in out, out


@pytest.mark.slow
def test_map_in_pandas_captures_the_current_batch(tmp_path):
    pd = pytest.importorskip("pandas")
    src = "def double(batches):\n    for pdf in batches:\n        yield pdf.assign(y=pdf.x * 2)\n"
    ns, path = load_script(tmp_path, src)
    it = iter([pd.DataFrame({"x": [1, 2]}), pd.DataFrame({"x": [7]})])
    # Stopped at the yield of the first batch.
    header, payload = stop_in(ns["double"], (it,), line_offset=2)
    assert header["function"]["isGenerator"]
    assert "captured as an iterator over the batch" in header["notes"][0]
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0, out
    assert (
        "x  y" in out and "1  2" in out and "2  4" in out and "7" not in out.split("returned", 1)[1]
    )


def test_start_chunks_and_drop(monkeypatch, tmp_path):
    ns, _ = load_script(tmp_path, JOB)
    frames = {}

    def grab(frame, event, arg):
        if frame.f_code is ns["parse"].__code__:
            frames.setdefault(7, frame)
        return None

    sys.setprofile(grab)
    try:
        # The frame is kept: its locals (the arguments) stay readable.
        ns["parse"]("3")
    finally:
        sys.setprofile(None)
    monkeypatch.setattr(sc, "_find_frame", lambda fid: frames[fid])
    first = json.loads(base64.b64decode(sc.start(7, 0, 64)))
    assert first["chunks"] >= 2
    data = b"".join(base64.b64decode(sc.chunk(first["id"], i)) for i in range(first["chunks"]))
    assert (
        len(data)
        == first["header"]["payloadBytes"]
        == first["header"]["dataBytes"] + first["header"]["codeBytes"]
    )
    sc.drop(first["id"])
    assert first["id"] not in sc._held
    bad = json.loads(base64.b64decode(sc.start(8, 0, 64)))
    assert "error" in bad


def _supported_values():
    """What a UDF, an RDD lambda, a pandas UDF or mapInPandas gets: the
    values DATA carries without a pickle."""
    import datetime
    import decimal
    import uuid

    out = [
        1,
        -(2**80),
        2.5,
        float("nan"),
        float("inf"),
        float("-inf"),
        "s",
        b"b",
        bytearray(b"x"),
        None,
        True,
        [1, (2, 3), [], ()],
        {"a": {1, 2}, 3: frozenset([3]), (1, "k"): None},
        datetime.datetime(2020, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
        datetime.datetime(2020, 1, 2, 3, 4, 5),
        datetime.date(2020, 1, 2),
        datetime.time(3, 4, 5, 7),
        datetime.timedelta(days=-1, seconds=5, microseconds=3),
        decimal.Decimal("1.25"),
        decimal.Decimal("-1E+30"),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
    ]
    try:
        from pyspark.sql.types import Row

        out += [Row(a=1, b="x"), Row(1, 2), [Row(a=Row(b=1))]]
    except ImportError:
        pass
    try:
        import numpy as np

        out += [
            np.arange(6).reshape(2, 3),
            np.float64(1.5),
            np.int32(3),
            np.bool_(True),
            np.array(["a", None], dtype=object),
            np.array([1], dtype="datetime64[ns]"),
            np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
        ]
    except ImportError:
        pass
    try:
        import pandas as pd

        out += [
            pd.DataFrame(
                {
                    "x": [1, 2],
                    "s": ["a", None],
                    "f": [1.5, None],
                    "t": pd.to_datetime(["2020-01-01", None]),
                }
            ),
            pd.DataFrame({"x": [1, 2]}, index=pd.Index(["a", "b"], name="k")),
            pd.DataFrame({"x": [1, 2]}, index=pd.RangeIndex(5, 9, 2)),
            pd.DataFrame({"x": [1, 2]}, index=pd.MultiIndex.from_tuples([(1, "a"), (2, "b")])),
            pd.Series([1, None], dtype="Int64", name="n"),
            pd.Series(["a", "b"], dtype="category"),
            pd.Series(["a", None], dtype="string", index=[7, 8]),
            pd.Series([1.0], index=pd.DatetimeIndex(["2020-01-01"], tz="UTC"), name=3),
        ]
    except ImportError:
        pass
    try:
        import pyarrow as pa

        out += [
            pa.record_batch({"x": [1, 2], "s": ["a", "b"]}),
            pa.table(
                {
                    "x": [1],
                    "l": [[1, 2]],
                    "st": [{"a": 1}],
                    "d": pa.array(["a"]).dictionary_encode(),
                }
            ),
        ]
    except ImportError:
        pass
    return out


def _same(a, b):
    if type(a) is not type(b):
        return False
    mod = type(a).__module__.split(".")[0]
    if mod == "pandas":
        import pandas as pd

        check = (
            pd.testing.assert_frame_equal
            if isinstance(a, pd.DataFrame)
            else pd.testing.assert_series_equal
        )
        try:
            check(a, b, check_exact=True)
        except AssertionError:
            return False
        return True
    if mod == "pyarrow":
        return a.equals(b) and a.schema.equals(b.schema)
    if mod == "numpy":
        import numpy as np

        return a.dtype == b.dtype and np.shape(a) == np.shape(b) and np.array_equal(a, b)
    if isinstance(a, float) and a != a:
        return b != b
    if isinstance(a, (list, tuple)):
        return (
            len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
            and getattr(a, "__fields__", None) == getattr(b, "__fields__", None)
        )
    return a == b


def _round_trip(values):
    cp, _ = sc._cloudpickle()
    enc = sc._Encoder(cp)
    doc = {"args": [enc.encode(v, "argument %d" % i) for i, v in enumerate(values)]}
    raw = json.dumps(doc, allow_nan=False).encode()
    return enc, sr.Decoder().document(raw)


def test_every_supported_kind_round_trips_without_a_pickle():
    values = _supported_values()
    enc, got = _round_trip(values)
    assert enc.pickled == {} and enc.notes == [], enc.notes
    for want, have in zip(values, got["args"]):
        assert _same(want, have), (want, have)


def test_map_in_pandas_batch_replays_equal_without_trust(tmp_path):
    pd = pytest.importorskip("pandas")
    src = "def keep(batches):\n    for pdf in batches:\n        yield pdf\n"
    ns, path = load_script(tmp_path, src)
    batch = pd.DataFrame(
        {"s": ["2", "x"], "n": pd.Series([1, None], dtype="Int64")},
        index=pd.Index([10, 11], name="id"),
    )
    header, payload = stop_in(ns["keep"], (iter([batch]),), line_offset=2)
    assert header["pickledValues"] == 0
    cap = as_file(header, payload, path)
    data, unpickled = sr.load_data(cap)
    assert unpickled == 0 and data["iterator_arg"] == 0
    pd.testing.assert_frame_equal(data["args"][0][0], batch)


class Config:
    """A value of a type DATA does not hold."""

    def __init__(self, rate):
        self.rate = rate


def test_unsupported_type_is_named_at_capture_and_needs_trust(tmp_path):
    import collections

    src = "def apply(x, cfg, extra=None):\n    return x * cfg.rate\n"
    ns, path = load_script(tmp_path, src)
    header, payload = stop_in(ns["apply"], (2, Config(5)), line_offset=1)
    note = (
        "argument 'cfg' is a test_capture.Config: the capture carries it only pickled, "
        "and replay unpickles nothing from the cluster unless you pass --trust-captured-code"
    )
    assert any(note in n for n in header["notes"]), header["notes"]
    assert header["pickledValues"] == 1
    cap = as_file(header, payload, path)
    rc, out = replay(cap)
    assert (
        rc == 2
        and "argument 'cfg' is a test_capture.Config, which the capture carries only pickled" in out
        and "--trust-captured-code" in out
    ), out
    rc, out = replay(cap, trust=True)
    assert rc == 0 and "returned 10" in out and "unpickled 1 value(s)" in out, out
    # Nested, and a dict subclass: named by where it is.
    header, _ = stop_in(
        ns["apply"], ([1, {"k": collections.OrderedDict(a=1)}], Config(1)), line_offset=1
    )
    assert any(
        n.startswith("argument 'x'[1]['k'] is a collections.OrderedDict:") for n in header["notes"]
    ), header["notes"]


def _dtype_scalar_pickle(address):
    """The DATA a hostile executor sent: numpy.dtype('O') rebuilt with BUILD
    state flags=0x30, then multiarray's scalar(that dtype, 8 bytes), which
    is the object at address. Only allowlisted globals."""
    import struct

    np = pytest.importorskip("numpy")
    mod = (
        "numpy._core.multiarray"
        if int(np.__version__.split(".")[0]) >= 2
        else "numpy.core.multiarray"
    )

    def s(x):
        b = x.encode()
        return b"\x8c" + bytes([len(b)]) + b

    p = b"\x80\x04" + s(mod) + s("scalar") + b"\x93"
    p += s("numpy") + s("dtype") + b"\x93" + s("O8") + b"\x89\x88\x87R"
    p += b"(K\x03" + s("|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x30tb"
    return p + b"C\x08" + struct.pack("<Q", address) + b"\x86R."


class _Reduce:
    """Pickles as a call of fn(*args): what a hostile executor sends."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def test_hostile_pickles_from_the_cluster_are_never_unpickled(tmp_path):
    """A capture whose DATA is a pickle (the numpy dtype/scalar read of a
    chosen address; os.system) or whose CODE is one: replay without
    --trust-captured-code refuses the DATA with exit status 2, in a
    process of its own that ends by no signal, and runs the local function
    without touching CODE; no marker file appears."""
    import os
    import pickle
    import subprocess

    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    marker = tmp_path / "pwned"
    system = pickle.dumps(_Reduce(os.system, "touch %s" % marker))
    for name, field, raw, rc_want, want in (
        (
            "dtype/scalar DATA",
            "data",
            _dtype_scalar_pickle(0x4141414141410000),
            2,
            "is not the JSON this replay reads",
        ),
        ("os.system DATA", "data", system, 2, "is not the JSON this replay reads"),
        ("os.system CODE", "code", system, 0, "returned 10"),
    ):
        cap = as_file(header, payload, path)
        cap[field] = base64.b64encode(raw).decode()
        f = tmp_path / "hostile.json"
        f.write_text(json.dumps(cap))
        p = subprocess.run(
            [sys.executable, sr.__file__, str(f)], capture_output=True, text=True, timeout=120
        )
        assert p.returncode == rc_want and want in p.stdout, (
            name,
            p.returncode,
            p.stdout,
            p.stderr,
        )
        assert not marker.exists(), name


def test_malformed_data_is_refused(tmp_path):
    np = pytest.importorskip("numpy")
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))

    def npy_with_pickle():
        buf = io.BytesIO()
        np.save(buf, np.array([1, None], dtype=object), allow_pickle=True)
        return base64.b64encode(buf.getvalue()).decode()

    for name, doc, want in (
        ("bare NaN", '{"args": [NaN]}', "malformed: a bare NaN"),
        ("untagged object", '{"args": [{"a": 1}]}', "no tagged value"),
        ("unknown tag", '{"args": [{"$t": "function", "v": "os.system"}]}', "no tagged value"),
        ("extra key", '{"args": [{"$t": "bytes", "v": "", "w": 1}]}', "a bytes with keys"),
        ("duplicate key", '{"args": [], "args": [1]}', "twice in one object"),
        ("top-level key", '{"args": [], "reduce": 1}', "no call's arguments"),
        (
            "npy with a pickle",
            json.dumps({"args": [{"$t": "ndarray", "npy": npy_with_pickle()}]}),
            "a .npy array that does not read",
        ),
        (
            "arrow garbage",
            '{"args": [{"$t": "dataframe", "arrow": "AAAA"}]}',
            "an Arrow stream that does not read",
        ),
        ("deep", '{"args": ' + "[" * 150 + "]" * 150 + "}", "deeper than"),
        ("iterator_arg", '{"args": [], "iterator_arg": 3}', "iterator_arg 3"),
        (
            "bad shape",
            '{"args": [{"$t": "ndarray-object", "shape": [3], "v": [1]}]}',
            "with 1 items",
        ),
    ):
        cap = as_file(header, payload, path)
        cap["data"] = base64.b64encode(doc.encode()).decode()
        rc, out = replay(cap)
        assert rc == 2 and want in out and "returned" not in out, (name, out)


def test_hostile_code_is_not_unpickled_without_trust(tmp_path):
    """CODE holds a pickled function; without local source and without
    --trust-captured-code replay refuses and unpickles none of it."""
    import os
    import pickle

    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    marker = tmp_path / "pwned"
    cap = as_file(header, payload, "")
    cap["code"] = base64.b64encode(pickle.dumps(_Reduce(os.system, "touch %s" % marker))).decode()
    rc, out = replay(cap)
    assert rc == 2 and "no local source for parse" in out and "--trust-captured-code" in out, out
    assert not os.path.exists(marker)


def test_replay_runs_no_line_of_the_local_file_but_the_functions(tmp_path):
    """An IDE breakpoint on a lambda's line (or a def's) must stop only in
    the replayed function: the code replay generates to rebuild it (a
    wrapper for the closure, the statement binding it) must not run lines
    of the developer's file, or pydevd stops there first, in <module>."""
    src = "OFFSET = 100\nf = lambda x: x + OFFSET\n\ndef g(x):\n    return x * 2\n"
    ns, path = load_script(tmp_path, src)
    seen = []

    def trace(frame, event, arg):
        if frame.f_code.co_filename == path:
            seen.append((frame.f_code.co_name, frame.f_lineno, event))
        return trace

    for fn, arg, want in ((ns["f"], 41, "returned 141"), (ns["g"], 4, "returned 8")):
        header, payload = stop_in(fn, (arg,), line_offset=0 if fn is ns["f"] else 1)
        seen.clear()
        sys.settrace(trace)
        try:
            rc, out = replay(as_file(header, payload, path))
        finally:
            sys.settrace(None)
        assert rc == 0 and want in out, out
        assert {name for name, _, _ in seen} == {fn.__name__}, seen


def test_malformed_capture_is_refused(tmp_path, capsys):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    good = as_file(header, payload, path)
    for name, change in (
        ("format", lambda c: c.update(format="sparkdap-capture/2")),
        ("firstLine", lambda c: c["function"].update(firstLine="3")),
        ("freeVars", lambda c: c["function"].update(freeVars=[1])),
        ("importable", lambda c: c["function"].update(importable="os.system")),
        ("references", lambda c: c.update(references=[])),
        ("data", lambda c: c.update(data=5)),
    ):
        cap = json.loads(json.dumps(good))
        change(cap)
        f = tmp_path / ("%s.json" % name)
        f.write_text(json.dumps(cap))
        assert sr.main([str(f)]) == 2, name
        out = capsys.readouterr().out
        assert "sparkdap replay: " in out, name
        if name == "format":
            assert (
                "its data is a pickle, which replay no longer reads from a cluster; capture the "
                "call again" in out
            ), out
    f = tmp_path / "good.json"
    f.write_text(json.dumps(good))
    assert sr.main([str(f)]) == 0
    assert "returned 10" in capsys.readouterr().out


def test_recursive_functions_find_themselves(tmp_path):
    src = (
        "def fact(n):\n"
        "    return 1 if n <= 1 else n * fact(n - 1)\n"
        "def make(k):\n"
        "    def rec(n):\n"
        "        return k if n <= 0 else rec(n - 1) + 1\n"
        "    return rec\n"
        "r = make(10)\n"
    )
    ns, path = load_script(tmp_path, src)
    header, payload = stop_in(ns["fact"], (4,))
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned 24" in out, out
    header, payload = stop_in(ns["r"], (3,))
    assert header["closureNames"] == ["k"] and header["references"] == {
        "rec": "function __main__.make.<locals>.rec"
    }
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned 13" in out, out


def test_pycharm_frame_found_by_id_on_the_stopped_stack(monkeypatch):
    """pydevd-pycharm has no suspended_frames_manager: its frame ids are
    id(frame), and the evaluate runs on the stopped thread, inside that
    frame's stack."""
    import types

    fake = types.ModuleType("pydevd")
    fake.get_global_debugger = lambda: object()
    monkeypatch.setitem(sys.modules, "pydevd", fake)

    def user_function(x):
        me = sys._getframe()
        return evaluate_in(me), me

    def evaluate_in(frame):
        # What pydevd's evaluate of start() does, a few calls deeper.
        return sc._find_frame(id(frame))

    found, me = user_function(1)
    assert found is me
    with pytest.raises(sc.CaptureError, match="not a frame of this stopped thread"):
        sc._find_frame(id(me))  # no longer on this stack


def test_a_global_of_an_unsupported_type_is_left_out_without_trust(tmp_path):
    src = (
        "class Config:\n    rate = 3\n\nCFG = Config()\n\n"
        "def apply(x):\n    return x\n\ndef use(x):\n    return x * CFG.rate\n"
    )
    ns, path = load_script(tmp_path, src)
    for fn, want_rc, want in ((ns["apply"], 0, "returned 2"), (ns["use"], 1, "raised NameError")):
        header, payload = stop_in(fn, (2,))
        rc, out = replay(as_file(header, payload, path))
        assert rc == want_rc and want in out, out
        if fn is ns["use"]:
            assert (
                "note: global 'CFG' is a __main__.Config, which the capture carries only pickled"
                in out
                and "it was left out" in out
            ), out
            rc, out = replay(as_file(header, payload, path), trust=True)
            assert rc == 0 and "returned 6" in out, out


def test_decoder_fails_only_with_replay_errors_on_mutated_data():
    """DATA comes from the cluster: whatever bytes it holds, decoding ends
    in a value or a ReplayError, never another exception. Seeded byte
    mutations of a document with every tag, bounded in count."""
    import random

    cp, _ = sc._cloudpickle()
    enc = sc._Encoder(cp)
    raw = json.dumps(
        {"args": [enc.encode(v, "a") for v in _supported_values() + [Config(1)]]}, allow_nan=False
    ).encode()
    rnd = random.Random(17)
    for _ in range(400):
        b = bytearray(raw)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            op = rnd.randrange(3)
            if op == 0:
                b[i] = rnd.randrange(256)
            elif op == 1:
                del b[i : i + rnd.randint(1, 20)]
            else:
                b[i:i] = rnd.choice(
                    [b"[", b"]", b"{", b'"$t"', b"null", b"-1", b'"pickled"', b"1e400", b'"AAAA"']
                )
        try:
            sr.Decoder().document(bytes(b))
        except sr.ReplayError:
            pass


def _replay_as_cli(tmp_path, cap, cwd):
    """Runs replay as `sparkdap replay` does: its script copied alone into
    a directory of its own, run from cwd with no PYTHONPATH."""
    import os
    import shutil
    import subprocess

    own = tmp_path / "replay-tmp"
    own.mkdir(exist_ok=True)
    for name in sr._FILES:
        shutil.copy(os.path.join(os.path.dirname(sr.__file__), name), own / name)
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    p = subprocess.run(
        [sys.executable, str(own / "sparkdap_replay.py"), str(f)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(cwd),
        env=env,
    )
    return p.returncode, p.stdout + p.stderr


def test_replay_imports_what_the_job_imported(tmp_path, monkeypatch):
    """A driver script's function that calls a module beside it (as
    loans.py calls loanlib), a function of that module itself, one of a
    module in a package, and one calling a module shipped from elsewhere
    under the proxy's root (--py-files): each replays from another
    directory with no PYTHONPATH, as the printed command runs it."""
    proj = tmp_path / "proj"
    (proj / "pkg18").mkdir(parents=True)
    (proj / "libs").mkdir()
    (proj / "helper18.py").write_text("def double(x):\n    return x * 2\n")
    (proj / "pkg18" / "__init__.py").write_text("")
    (proj / "pkg18" / "mod.py").write_text("def triple(x):\n    return x * 3\n")
    (proj / "libs" / "shipped18.py").write_text("def plus1(x):\n    return x + 1\n")
    src = (
        "import helper18\n"
        "import shipped18\n\n"
        "def calls_helper(x):\n"
        "    return helper18.double(x) + 1\n\n"
        "def calls_shipped(x):\n"
        "    return shipped18.plus1(x)\n"
    )
    ns_path = proj / "job.py"
    for d in (proj, proj / "libs"):
        monkeypatch.syspath_prepend(str(d))
    ns, path = load_script(proj, src)
    import helper18
    import pkg18.mod

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cases = [
        (ns["calls_helper"], 20, str(ns_path), [], "returned 41"),
        (helper18.double, 21, str(proj / "helper18.py"), [], "returned 42"),
        (pkg18.mod.triple, 14, str(proj / "pkg18" / "mod.py"), [], "returned 42"),
        (ns["calls_shipped"], 41, str(ns_path), [str(proj / "libs")], "returned 42"),
    ]
    for fn, arg, local, roots, want in cases:
        header, payload = stop_in(fn, (arg,))
        cap = as_file(header, payload, local)
        cap["localRoots"] = roots + [str(proj)]
        rc, out = _replay_as_cli(tmp_path, cap, elsewhere)
        assert rc == 0 and want in out, (fn.__qualname__, out)
    # Without the root the shipped module is not found: the root is what
    # makes it importable, not the test's own sys.path.
    header, payload = stop_in(ns["calls_shipped"], (41,))
    rc, out = _replay_as_cli(tmp_path, as_file(header, payload, str(ns_path)), elsewhere)
    assert rc == 1 and "No module named 'shipped18'" in out, out


def test_pyspark_frames_are_refused_with_what_to_select(tmp_path):
    """!capture on PySpark's own frame (daemon.py's worker, as the IDE
    lists it under the user's function) says to select the user's frame."""
    src = "def worker(sock, authenticated):\n    x = sock\n    return x\n"
    for path in (
        "/opt/spark/python/lib/pyspark.zip/pyspark/daemon.py",
        "/usr/lib/python3/site-packages/pyspark/daemon.py",
    ):
        ns = {"__name__": "pyspark.daemon"}
        exec(compile(src, path, "exec"), ns)
        got = stop_in(ns["worker"], (1, True))
        assert isinstance(got, sc.CaptureError), got
        msg = str(got)
        assert "PySpark's own code, not your function" in msg and "select the frame" in msg, msg
    # A module body: no function at all.
    ns = {}
    got = {}

    def trace(frame, event, arg):
        if frame.f_code.co_filename == "/job/main.py" and event == "line" and "e" not in got:
            try:
                sc.capture_frame(frame, 0)
            except sc.CaptureError as exc:
                got["e"] = str(exc)
        return trace

    sys.settrace(trace)
    try:
        exec(compile("y = 1\n", "/job/main.py", "exec"), ns)
    finally:
        sys.settrace(None)
    assert "not a function; select the frame" in got["e"], got
