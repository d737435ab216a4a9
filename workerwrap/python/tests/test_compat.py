"""pydevd_compat: the debugger versions the wrapper's pydevd patches were
written for, and what a worker does on any other."""

import glob
import os
import re
import sys
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_written_for_the_pinned_versions(rd):
    """Every version requirements-*.txt pins is one the patches were
    written for: bumping a pin means looking at pydevd_compat again."""
    pins = {}
    files = glob.glob(os.path.join(REPO, "requirements*.txt"))
    assert files
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"(debugpy|pydevd-pycharm)==(\S+)", line.strip())
                if m:
                    pins.setdefault(m.group(1), set()).add(m.group(2))
    assert set(pins) == {"debugpy", "pydevd-pycharm"}
    for name, versions in pins.items():
        assert versions <= set(rd._WRITTEN_FOR[name]), (name, versions)
        assert rd._version_problem(name, sorted(versions)[0]) is None


def test_the_installed_debuggers_are_the_pinned_ones(rd):
    import importlib.metadata

    for name in ("debugpy", "pydevd-pycharm"):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        assert rd._version_problem(name, version) is None, version


def test_other_version_is_refused(rd, fake_debugpy, capsys):
    with pytest.raises(rd._UnsupportedDebugger) as info:
        rd._load_debugger(False)
    msg = str(info.value)
    assert msg == (
        "debugpy 9.9.9 is not a version sparkdap's wrapper was written for (%s); "
        "SPARKDAP_UNTESTED_DEBUGGER=1 tries it anyway" % ", ".join(rd._WRITTEN_FOR["debugpy"])
    )
    assert "\n" not in msg
    assert capsys.readouterr().err == ""


def test_other_version_tried_when_asked(rd, fake_debugpy, monkeypatch, capsys):
    monkeypatch.setenv("SPARKDAP_UNTESTED_DEBUGGER", "1")
    monkeypatch.setattr(rd, "_untested_said", [])
    assert rd._load_debugger(False) is fake_debugpy
    assert rd._load_debugger(False) is fake_debugpy
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].endswith(
        "debugpy 9.9.9 is not a version sparkdap's wrapper was written for (%s); "
        "trying it (SPARKDAP_UNTESTED_DEBUGGER=1)" % ", ".join(rd._WRITTEN_FOR["debugpy"])
    )


def test_pycharm_version_is_checked(rd, monkeypatch):
    pycharm = types.ModuleType("pydevd_pycharm")
    pycharm.__version__ = "241.1.1"
    monkeypatch.setitem(sys.modules, "pydevd_pycharm", pycharm)
    monkeypatch.setitem(sys.modules, "pydevd", types.ModuleType("pydevd"))
    monkeypatch.delenv("SPARKDAP_UNTESTED_DEBUGGER", raising=False)
    with pytest.raises(rd._UnsupportedDebugger, match="^pydevd-pycharm 241.1.1 is not a version"):
        rd._load_debugger(True)


def test_daemon_does_not_preload_another_version(rd, baked, fake_debugpy, capsys):
    """The daemon loads nothing and says nothing: each worker that would
    attach says why it runs undebugged."""
    assert rd._preload_debugger() is False
    assert capsys.readouterr().err == ""
    assert rd._preload_redo is None
