"""support and pydevd_compat: which debuggers a worker debugs with, decided
by the internals the wrapper's promises need, and what it says otherwise.

The cases marked real_debugger load a real debugger in a subprocess
(real_debugger.py says which)."""

import glob
import os
import re
import subprocess
import sys
import textwrap
import types

import flat
import pytest
import real_debugger

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEBUGGER_DIR = real_debugger.DIR


def run_real(code, pycharm, **env):
    """Runs code with the flat wrapper loaded as rd and a real debugger on
    the path; returns the CompletedProcess."""
    prelude = textwrap.dedent(
        """
        import importlib.util, os, sys
        spec = importlib.util.spec_from_file_location("remote_debug_flat", %r)
        rd = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rd)
        rd._BAKED = {"pycharm": %r}
        """
        % (os.path.join(flat.directory(), "remote_debug.py"), pycharm)
    )
    full = dict(os.environ)
    for var in list(full):
        if var.startswith("SPARKDAP_") and var != "SPARKDAP_TEST_DEBUGGER_DIR":
            del full[var]
    full.pop("PYTHONPATH", None)
    full["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # as a worker sets it (attach.py)
    if DEBUGGER_DIR:
        full["PYTHONPATH"] = DEBUGGER_DIR
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=full,
    )


def real(kind):
    return pytest.param(kind, marks=pytest.mark.real_debugger, id=kind)


REAL = [real(k) for k in real_debugger.kinds()]

# What each debugger's module is called, and what importing it as a worker
# does first (so that a case can change the loaded debugger before the
# wrapper looks at it).
IMPORT = {
    "debugpy": (
        "import debugpy, debugpy.server.api, pydevd\nmod = debugpy\n",
        False,
    ),
    "pydevd-pycharm": ("import pydevd_pycharm, pydevd\nmod = pydevd_pycharm\n", True),
}


@pytest.mark.parametrize(
    "version, want",
    [
        ("1.8.22", (1, 8, 22)),
        ("1.6.7.post1", (1, 6, 7)),
        ("1.9.0rc1", (1, 9, 0)),
        ("263.7307.50", (263, 7307, 50)),
        ("unknown", ()),
        ("", ()),
    ],
)
def test_version_tuple(rd, version, want):
    assert rd._version_tuple(version) == want


@pytest.mark.parametrize(
    "name, version, want",
    [
        ("debugpy", "1.6.6", False),
        ("debugpy", "1.6.7", True),
        ("debugpy", "1.6.7.post1", True),
        ("debugpy", "1.7.0", True),
        ("debugpy", "1.8.0", True),
        ("debugpy", "1.8.22", True),
        ("debugpy", "1.8.40", True),
        ("debugpy", "1.9.0", False),
        ("debugpy", "1.5.1", False),
        ("debugpy", "unknown", False),
        ("pydevd-pycharm", "252.28539.58", False),
        ("pydevd-pycharm", "253.17525.96", True),
        ("pydevd-pycharm", "263.7307.50", True),
        ("pydevd-pycharm", "264.1.1", False),
    ],
)
def test_supported_ranges(rd, name, version, want):
    assert rd._in_supported_range(name, version) is want


def test_ranges_cover_the_matrix_and_the_pins(rd):
    """Every debugger the matrix installs and every pin of
    requirements-*.txt is inside the supported ranges: a release outside
    them is only ever "untested"."""
    seen = set()
    for path in glob.glob(os.path.join(REPO, "requirements*.txt")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"(debugpy|pydevd-pycharm)==(\S+)", line.strip())
                if m:
                    seen.add(m.group(1))
                    assert rd._in_supported_range(m.group(1), m.group(2)), (path, line)
    assert seen == {"debugpy", "pydevd-pycharm"}


def test_debugger_without_internals_is_refused_in_one_line(rd, fake_debugpy, capsys):
    with pytest.raises(rd._UnsupportedDebugger) as info:
        rd._load_debugger(False)
    msg = str(info.value)
    # Which internals come first depends on what earlier tests loaded;
    # pydevd here is an empty module, so PyDB is missing whatever they did.
    assert msg.startswith("debugpy 9.9.9 lacks ")
    assert "PyDB.pydb_disposed (for the connect guard)" in msg
    assert msg.endswith(
        "; sparkdap supports debugpy 1.6.7 to 1.8.x; SPARKDAP_UNTESTED_DEBUGGER=1 tries it anyway"
    )
    assert "\n" not in msg
    assert capsys.readouterr().err == ""


def test_debugger_without_internals_tried_when_asked(rd, fake_debugpy, monkeypatch, capsys):
    monkeypatch.setenv("SPARKDAP_UNTESTED_DEBUGGER", "1")
    monkeypatch.setattr(rd, "_said", [])
    assert rd._load_debugger(False) is fake_debugpy
    assert rd._load_debugger(False) is fake_debugpy
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert "debugpy 9.9.9 lacks " in err[0]
    assert err[0].endswith("; trying it (SPARKDAP_UNTESTED_DEBUGGER=1)")


def test_pycharm_without_internals_is_refused(rd, monkeypatch):
    pycharm = types.ModuleType("pydevd_pycharm")
    pycharm.__version__ = "241.1.1"
    monkeypatch.setitem(sys.modules, "pydevd_pycharm", pycharm)
    monkeypatch.setitem(sys.modules, "pydevd", types.ModuleType("pydevd"))
    monkeypatch.delenv("SPARKDAP_UNTESTED_DEBUGGER", raising=False)
    with pytest.raises(rd._UnsupportedDebugger, match="^pydevd-pycharm 241.1.1 lacks "):
        rd._load_debugger(True)


def test_daemon_does_not_preload_an_unusable_debugger(rd, baked, fake_debugpy, capsys):
    """The daemon loads nothing and says nothing: each worker that would
    attach says why it runs undebugged."""
    assert rd._preload_debugger() is False
    assert capsys.readouterr().err == ""
    assert rd._preload_redo is None


@pytest.mark.parametrize("kind", REAL)
def test_real_debugger_is_supported(kind):
    """The debugger on the path (each of the matrix in turn) has every
    internal, is in the supported ranges, and loads without a word."""
    code, pycharm = IMPORT[kind]
    proc = run_real(
        "mod = rd._load_debugger(%r)\nprint(mod.__name__)\nprint(mod.__file__)\n"
        "print('\\t'.join(rd._verdict(%r, mod.__version__, rd._missing_internals(%r))))\n"
        % (pycharm, kind, pycharm),
        pycharm,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    name, path, verdict = proc.stdout.splitlines()
    assert name == ("pydevd_pycharm" if pycharm else "debugpy")
    real_debugger.check_loaded_from_dir(path)
    assert verdict.startswith("supported\t%s " % kind), verdict


@pytest.mark.parametrize("kind", REAL)
def test_untested_release_with_every_internal_debugs_with_one_line(kind):
    code, pycharm = IMPORT[kind]
    newer = "264.1.1" if pycharm else "1.9.0"
    proc = run_real(
        code + "mod.__version__ = %r\n"
        "assert rd._load_debugger(%r) is mod\n"
        "assert rd._load_debugger(%r) is mod\n" % (newer, pycharm, pycharm),
        pycharm,
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    assert len(err) == 1, err
    assert "%s %s is untested" % (kind, newer) in err[0]
    assert "it has every internal the wrapper uses" in err[0]


@pytest.mark.parametrize("kind", REAL)
def test_lease_internal_missing_runs_undebugged(kind):
    """A debugger without PyDB.do_wait_suspend, on which the lease rests:
    refused, naming it; SPARKDAP_UNTESTED_DEBUGGER=1 tries it."""
    code, pycharm = IMPORT[kind]
    removed = code + "del pydevd.PyDB.do_wait_suspend\n"
    proc = run_real(
        removed + "try:\n    rd._load_debugger(%r)\nexcept rd._UnsupportedDebugger as e:\n"
        "    print(e)\nelse:\n    print('loaded')\n" % (pycharm,),
        pycharm,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout.strip()
    assert "lacks PyDB.do_wait_suspend (for the lease on stops)" in out, out
    assert out.endswith("SPARKDAP_UNTESTED_DEBUGGER=1 tries it anyway"), out

    proc = run_real(
        removed + "assert rd._load_debugger(%r) is mod\n" % (pycharm,),
        pycharm,
        SPARKDAP_UNTESTED_DEBUGGER="1",
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    assert len(err) == 1 and err[0].endswith("trying it (SPARKDAP_UNTESTED_DEBUGGER=1)"), err


def run_report(pycharm, pythonpath):
    """Runs support.py's source alone with _report, as doctor does with the
    executors' Python; returns the line's tab-separated fields."""
    with open(
        os.path.join(REPO, "workerwrap/python/remote_debug/support.py"), encoding="utf-8"
    ) as f:
        source = f.read()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run(
        [sys.executable, "-c", source + "\n_report(%r)\n" % (pycharm,)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.rstrip("\n").split("\t")


@pytest.mark.parametrize("kind", REAL)
def test_report_for_doctor(kind):
    """doctor's line, from support.py's source alone."""
    fields = run_report(IMPORT[kind][1], DEBUGGER_DIR)
    assert fields[0] == "supported" and fields[1] == kind, fields
    assert fields[3] == sys.version.split()[0]


def test_report_without_a_debugger(tmp_path):
    """A Python with no debugpy: doctor reads "absent" and the reason."""
    # A module named debugpy that cannot be imported stands for none at all,
    # whatever site-packages holds.
    (tmp_path / "debugpy").mkdir()
    (tmp_path / "debugpy" / "__init__.py").write_text(
        "raise ImportError('No module named debugpy')\n"
    )
    fields = run_report(False, str(tmp_path))
    assert fields[:3] == ["absent", "debugpy", "-"], fields
    assert "No module named debugpy" in fields[4]
