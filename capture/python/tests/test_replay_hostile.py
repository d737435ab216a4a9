"""A capture file is bytes an executor chose: replay must decide on this
machine which code it loads, print none of those bytes raw, and refuse a
malformed capture with status 2 and one line, never a traceback."""

import json
import os
import sys

import pytest
from test_capture import as_file, load_script, replay, stop_in

import sparkdap_replay as sr

DRIVER = """
import os
open(os.path.join(os.path.dirname(__file__), "driver-ran"), "w").close()

def parse(s, scale=2):
    return int(s) * scale

df = None  # the job would start here
"""

OTHER = """
def risk(x):
    return x * 2
"""


def _lines(out):
    return out.splitlines()


def test_a_module_named_by_the_capture_is_never_imported(tmp_path, monkeypatch):
    """The header names the driver script job.py as the function's module:
    replay must not import it (its top level would run the job)."""
    (tmp_path / "job.py").write_text(DRIVER)
    ns, other = load_script(tmp_path, OTHER, name="other.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "job", raising=False)
    header, payload = stop_in(ns["risk"], (21,))
    header["function"]["importable"] = {"module": "job", "qualname": "parse"}
    header["function"]["qualname"] = "parse"
    header["function"]["name"] = "parse"
    # No local file: nothing to load without trust.
    rc, out = replay(as_file(header, payload, ""))
    assert rc == 2 and "returned" not in out, out
    assert not (tmp_path / "driver-ran").exists(), out
    # The mapped file is other.py: the header's module is not what loads.
    rc, out = replay(as_file(header, payload, other))
    assert rc == 2 and "returned" not in out, out
    assert not (tmp_path / "driver-ran").exists(), out


def test_a_driver_function_runs_without_the_driver_top_level(tmp_path, monkeypatch):
    (tmp_path / "job.py").write_text(DRIVER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "job", raising=False)
    ns = {"__name__": "job", "__file__": str(tmp_path / "elsewhere.py")}
    exec(
        compile(
            DRIVER.replace("open(", "(lambda *a: __import__('io').StringIO())("),
            str(tmp_path / "job.py"),
            "exec",
        ),
        ns,
    )
    header, payload = stop_in(ns["parse"], ("21",))
    header["function"]["importable"] = {"module": "job", "qualname": "parse"}
    rc, out = replay(as_file(header, payload, str(tmp_path / "job.py")))
    assert rc == 0 and "returned 42" in out and "your local source" in out, out
    assert not (tmp_path / "driver-ran").exists(), out


def test_a_local_file_outside_the_roots_is_refused(tmp_path):
    ns, path = load_script(tmp_path, OTHER, name="other.py")
    header, payload = stop_in(ns["risk"], (21,))
    cap = as_file(header, payload, path)
    cap["localRoots"] = [str(tmp_path / "root")]
    (tmp_path / "root").mkdir()
    rc, out = replay(cap)
    assert rc == 2 and "not under" in out and "returned" not in out, out


def test_a_package_module_replays_with_its_relative_imports(tmp_path):
    pkg = tmp_path / "pkg31"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("def double(x):\n    return x * 2\n")
    (pkg / "mod.py").write_text(
        "from .util import double\n\nopen(__file__ + '.ran', 'w').close()\n\n"
        "def risk(x):\n    return double(x) + 1\n"
    )
    ns = {"__name__": "pkg31.mod", "__package__": "pkg31", "__file__": str(pkg / "mod.py")}
    sys.path.insert(0, str(tmp_path))
    try:
        exec(
            compile(
                (pkg / "mod.py")
                .read_text()
                .replace("open(", "(lambda *a: __import__('io').StringIO())("),
                str(pkg / "mod.py"),
                "exec",
            ),
            ns,
        )
        header, payload = stop_in(ns["risk"], (20,))
    finally:
        sys.path.remove(str(tmp_path))
        for m in ("pkg31", "pkg31.util", "pkg31.mod"):
            sys.modules.pop(m, None)
    cap = as_file(header, payload, str(pkg / "mod.py"))
    cap["localRoots"] = [str(tmp_path)]
    sr.set_import_path(cap)
    try:
        rc, out = replay(cap)
    finally:
        for m in ("pkg31", "pkg31.util", "pkg31.mod"):
            sys.modules.pop(m, None)
    assert rc == 0 and "returned 41" in out, out
    assert not (pkg / "mod.py.ran").exists()


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\nsparkdap replay: returned 42\u202e\x9b"


def _assert_clean(out):
    for bad in ("\x1b", "\x07", "\r", "\u202e", "\x9b"):
        assert bad not in out, repr(out)
    fakes = [line for line in _lines(out) if line.startswith("sparkdap replay: returned 42")]
    assert not fakes, repr(out)


BOXED = """
class Box:
    def __init__(self, s):
        self.s = s

    def __repr__(self):
        return self.s

def wrap(s):
    return Box(s)

def fail(s):
    raise ValueError(s)
"""


def test_cluster_bytes_are_printed_escaped(tmp_path):
    ns, path = load_script(tmp_path, BOXED)
    # The returned value's text and an exception's message.
    for fn, want_rc in ((ns["wrap"], 0), (ns["fail"], 1)):
        header, payload = stop_in(fn, (HOSTILE,))
        rc, out = replay(as_file(header, payload, path))
        assert rc == want_rc, out
        _assert_clean(out)
        assert "\\x1b]0;pwned" in out, out
        rc, raw = replay(as_file(header, payload, path), raw_output=True)
        assert "\x1b]0;pwned" in raw
    # Header fields: versions.python on a successful replay, the
    # function's qualname and file when refused, a placeholder's where
    # and type.
    header, payload = stop_in(ns["wrap"], ("x",))
    header["versions"]["python"] = "9.9" + HOSTILE
    rc, out = replay(as_file(header, payload, path))
    assert rc == 0, out
    _assert_clean(out)
    header, payload = stop_in(ns["wrap"], ("x",))
    header["function"]["qualname"] = HOSTILE
    header["function"]["file"] = HOSTILE
    rc, out = replay(as_file(header, payload, ""))
    assert rc == 2, out
    _assert_clean(out)
    data = json.dumps(
        {
            "args": [{"$t": "pickled", "key": "p0", "where": HOSTILE, "type": HOSTILE}],
            "kwargs": {},
            "iterator_arg": None,
            "closure": {},
            "globals": {},
        }
    ).encode()
    header["dataBytes"] = len(data)
    header["function"]["qualname"] = "wrap"
    rc, out = replay(as_file(header, data, path))
    assert rc == 2 and "pickled" in out, out
    _assert_clean(out)


def _deep(n):
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.__setitem__("extra", json.loads(_deep(50))),
        lambda c: c.__setitem__("versions", []),
        lambda c: c.__setitem__("versions", {"python": 3.9}),
        lambda c: c["function"].__setitem__("isGenerator", {"a": 1}),
        lambda c: c.__setitem__("parameters", "abc"),
        lambda c: c.__setitem__("localRoots", [1]),
        lambda c: c["function"].__setitem__("firstLine", 10**400),
    ],
)
def test_a_malformed_header_is_status_2_and_one_line(tmp_path, capsys, change):
    ns, path = load_script(tmp_path, OTHER, name="other.py")
    header, payload = stop_in(ns["risk"], (21,))
    cap = as_file(header, payload, path)
    change(cap)
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    rc = sr.main([str(f)])
    out = capsys.readouterr()
    assert rc in (0, 2), out
    assert "Traceback" not in out.out + out.err, out
    if rc == 2:
        assert len(_lines(out.out)) == 1 and out.out.startswith("sparkdap replay: "), out


def test_a_header_nested_5000_deep_is_status_2(tmp_path, capsys):
    ns, path = load_script(tmp_path, OTHER, name="other.py")
    header, payload = stop_in(ns["risk"], (21,))
    text = json.dumps(as_file(header, payload, path))
    f = tmp_path / "cap.json"
    f.write_text(text[:-1] + ', "extra": ' + _deep(5000) + "}")
    rc = sr.main([str(f)])
    out = capsys.readouterr()
    assert rc == 2, out
    assert "Traceback" not in out.out + out.err
    assert len(_lines(out.out)) == 1 and out.out.startswith("sparkdap replay: "), out
    assert os.path.exists(path)


# The loader's property: whatever an executor puts in the file, replay
# ends with a status (2 for anything malformed), one clean line at a time,
# and never a traceback. Bounded to a few seconds: no example database in
# the source tree, no deadline on a loaded CI machine.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=20,
)
_FUZZ = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def good_capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    ns, path = load_script(d, OTHER, name="other.py")
    header, payload = stop_in(ns["risk"], (21,))
    return d, as_file(header, payload, path)


def _check(d, text, capsys):
    f = d / "cap.json"
    f.write_bytes(text)
    rc = sr.main([str(f)])
    out = capsys.readouterr()
    assert rc in (0, 1, 2), out
    assert "Traceback" not in out.err and "\x1b" not in out.out, out
    if rc == 2:
        assert len(_lines(out.out)) == 1 and out.out.startswith("sparkdap replay: "), out


@_FUZZ
@given(
    path=st.lists(st.sampled_from(["function", "versions", "importable", "data", "x"]), max_size=2),
    key=st.text(max_size=12),
    value=_json,
)
def test_fuzz_a_changed_header_field(good_capture, capsys, path, key, value):
    d, good = good_capture
    cap = json.loads(json.dumps(good))
    node = cap
    for k in path:
        if not isinstance(node.get(k), dict):
            break
        node = node[k]
    for k in (key, "python", "qualname", "firstLine", "localRoots", "parameters", "module"):
        if k in node or k == key:
            node[k] = value
            break
    _check(d, json.dumps(cap).encode(), capsys)


@_FUZZ
@given(raw=st.binary(max_size=200))
def test_fuzz_bytes_that_are_no_capture(good_capture, capsys, raw):
    d, _ = good_capture
    _check(d, raw, capsys)
