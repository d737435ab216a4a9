"""A capture's declared sizes are the executor's choice: replay checks
each decoded value against its memory budget (--max-memory) before it
builds it, and refuses one over it with status 2 and one line on stderr,
quickly and without the memory it would have taken."""

import base64
import io
import json
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from test_capture import as_file, load_script, stop_in

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(HERE, "sparkdap_replay.py")

JOB = """
def rows(x):
    return len(x)
"""

# What a refused value may cost the replay at most: the interpreter with
# pandas and pyarrow imported, and the capture.
PEAK_LIMIT = 300 << 20


def _ipc(value):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, value.schema) as w:
        w.write(value)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def _capture(tmp_path, arg):
    """A capture file of rows(arg), arg's tagged JSON as the executor
    chose it."""
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["rows"], (1,))
    data = json.dumps(
        {"args": [arg], "kwargs": {}, "iterator_arg": None, "closure": {}, "globals": {}}
    ).encode()
    header["dataBytes"] = len(data)
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(as_file(header, data, path)))
    return f


class _Popen(subprocess.Popen):
    """A Popen that keeps its child's peak RSS, from wait4's rusage."""

    peak = 0

    def _try_wait(self, wait_flags):
        pid, sts, usage = os.wait4(self.pid, wait_flags)
        if pid == self.pid:
            self.peak = usage.ru_maxrss * 1024  # KiB on Linux
        return (pid, sts)


def _run(f, *flags):
    """Runs replay in a child: (status, stdout, stderr, peak RSS in bytes,
    seconds)."""
    start = time.monotonic()
    p = _Popen(
        [sys.executable, SCRIPT, str(f), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = p.communicate(timeout=600)
    return p.returncode, out.decode(), err.decode(), p.peak, time.monotonic() - start


def _assert_refused(rc, out, err, peak, secs, what):
    assert rc == 2, (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkdap replay: "), err
    assert what in lines[0] and "--max-memory" in lines[0], err
    assert "Traceback" not in out + err and "returned" not in out, out
    assert peak < PEAK_LIMIT, "peak RSS %d MiB" % (peak >> 20)
    assert secs < 60, secs


def test_a_null_column_of_300_million_rows_is_refused(tmp_path):
    t = pa.table({"x": pa.nulls(300_000_000)})
    f = _capture(tmp_path, {"$t": "dataframe", "arrow": _ipc(t)})
    assert f.stat().st_size < 4096
    _assert_refused(*_run(f), what="args[0]")


def test_a_run_end_encoded_run_of_300_million_rows_is_refused(tmp_path):
    ree = pa.RunEndEncodedArray.from_arrays(pa.array([300_000_000], pa.int32()), pa.array([7]))
    f = _capture(tmp_path, {"$t": "dataframe", "arrow": _ipc(pa.table({"x": ree}))})
    assert f.stat().st_size < 4096
    _assert_refused(*_run(f), what="args[0]")


def test_string_views_over_one_buffer_are_refused(tmp_path):
    n, width = 125_000, 16384
    data = pa.py_buffer(b"a" * width)
    views = np.zeros((n, 4), dtype="<i4")
    views[:, 0] = width  # length; prefix 0; buffer 0; offset 0
    views[:, 1] = int.from_bytes(b"aaaa", "little", signed=True)
    arr = pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views.tobytes()), data])
    f = _capture(tmp_path, {"$t": "dataframe", "arrow": _ipc(pa.table({"x": arr}))})
    assert f.stat().st_size < 4 << 20
    _assert_refused(*_run(f), what="args[0]")


def test_a_list_of_300_million_nulls_is_refused(tmp_path):
    lists = pa.ListArray.from_arrays(pa.array([0, 300_000_000], pa.int32()), pa.nulls(300_000_000))
    f = _capture(tmp_path, {"$t": "arrow-table", "arrow": _ipc(pa.table({"x": lists}))})
    _assert_refused(*_run(f), what="args[0]")


def test_a_compressed_buffer_declaring_100_mb_is_refused(tmp_path):
    t = pa.table({"x": np.zeros(12_500_000)})
    sink = pa.BufferOutputStream()
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, t.schema, options=opts) as w:
        w.write(t)
    arrow = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
    del t
    f = _capture(tmp_path, {"$t": "arrow-table", "arrow": arrow})
    assert f.stat().st_size < 64 << 10
    _assert_refused(*_run(f), what="compressed")


def test_a_npy_header_declaring_80_gb_is_refused(tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (10**10,)}
    )
    f = _capture(tmp_path, {"$t": "ndarray", "npy": base64.b64encode(buf.getvalue()).decode()})
    _assert_refused(*_run(f), what="args[0]")


def test_many_json_containers_are_refused_under_a_small_budget(tmp_path):
    f = _capture(tmp_path, [[] for _ in range(200_000)])
    _assert_refused(*_run(f, "--max-memory", "4MiB"), what="data")


def test_a_larger_budget_admits_what_the_default_refuses(tmp_path):
    # 20 million nulls: a DataFrame of about 160 MB, from a 1 KiB file.
    t = pa.table({"x": pa.nulls(20_000_000)})
    f = _capture(tmp_path, {"$t": "dataframe", "arrow": _ipc(t)})
    rc, out, err, _, _ = _run(f)
    assert rc == 2 and "--max-memory" in err, (out, err)
    rc, out, err, _, _ = _run(f, "--max-memory", "1GiB")
    assert rc == 0 and "returned 20000000" in out, (out, err)


@pytest.mark.parametrize(
    "value",
    [
        pd.DataFrame({"a": range(1000), "s": ["x%d" % i for i in range(1000)]}),
        np.arange(10_000, dtype="f8").reshape(100, 100),
        pa.table({"d": pa.array(["a", "b"] * 500).dictionary_encode(), "l": [[1, 2]] * 1000}),
        {"k": [1, 2, (3, 4)], "s": {1, 2}},
    ],
)
def test_a_legitimate_capture_replays_under_the_default_budget(tmp_path, value):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["rows"], (value,))
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(as_file(header, payload, path)))
    rc, out, err, _, _ = _run(f)
    assert rc == 0 and "returned %d" % len(value) in out, (out, err)


@pytest.mark.parametrize("bad", ["0", "-1", "12XB", "lots", ""])
def test_a_bad_max_memory_is_refused(tmp_path, bad):
    f = _capture(tmp_path, 1)
    rc, out, err, _, _ = _run(f, "--max-memory", bad)
    assert rc == 2 and "Traceback" not in err, (out, err)
