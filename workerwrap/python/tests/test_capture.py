"""sparkdap_capture (the executor side of a capture) and sparkdap_replay
(the developer's side): a call stopped in a function is captured from its
frame and replayed, from the local source when there is one."""

import base64
import io
import json
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
    """The capture file the proxy writes (dap/capture.go)."""
    cap = dict(header)
    cap["payload"] = base64.b64encode(payload).decode("ascii")
    cap["localFile"] = local
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


def test_without_a_local_file_the_captured_function_runs(tmp_path):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("5",))
    rc, out = replay(as_file(header, payload, ""))
    assert rc == 0 and "returned 10" in out and "using the captured parse" in out, out


def test_lambda_runs_as_captured(tmp_path):
    ns, path = load_script(tmp_path, "f = lambda x: (\n    x + 1)\n")
    header, payload = stop_in(ns["f"], (41,))
    assert header["function"]["isLambda"]
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0 and "returned 42" in out and "a lambda" in out, out


def test_closure_picks_the_function_of_the_frame(tmp_path):
    ns, _ = load_script(tmp_path, "def make(k):\n    def f(x):\n        return x * k\n    return f\nfs = [make(k) for k in range(5)]\n")
    header, payload = stop_in(ns["fs"][3], (2,), line_offset=1)
    rc, out = replay(as_file(header, payload, ""))
    assert rc == 0 and "returned 6" in out, out


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
    assert "argument 'lock' (lock) cannot be pickled" in str(err)


def test_other_python_is_refused_unless_forced(tmp_path):
    ns, path = load_script(tmp_path, JOB)
    header, payload = stop_in(ns["parse"], ("1",))
    header["versions"]["python"] = "3.%d.0" % (sys.version_info[1] + 1)
    cap = as_file(header, payload, path)
    rc, out = replay(cap)
    assert rc == 2 and "need the same major.minor" in out and "--force" in out, out
    rc, out = replay(cap, force=True)
    assert rc == 0 and "warning:" in out and "returned 2" in out, out


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
    assert "x  y" in out and "1  2" in out and "2  4" in out and "7" not in out.split("returned", 1)[1]


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
    assert len(data) == first["header"]["payloadBytes"]
    sc.drop(first["id"])
    assert first["id"] not in sc._held
    bad = json.loads(base64.b64decode(sc.start(8, 0, 64)))
    assert "error" in bad
