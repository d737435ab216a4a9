"""The debugger a case marked real_debugger loads in its subprocess: the
one installed, or the one in $SPARKDAP_TEST_DEBUGGER_DIR (a `pip install
--target` directory of the debugger matrix, scripts/test-debuggers), first
on the subprocess's path."""

import os

import pytest

DIR = os.environ.get("SPARKDAP_TEST_DEBUGGER_DIR", "")


def kinds():
    """The debuggers a real_debugger case may load: the one in DIR, or
    both installed ones."""
    base = os.path.basename(DIR.rstrip("/"))
    if base.startswith("pydevd-pycharm"):
        return ["pydevd-pycharm"]
    if base.startswith("debugpy"):
        return ["debugpy"]
    return ["debugpy", "pydevd-pycharm"]


def only(kind):
    """Marks a case that needs kind: a real_debugger case, skipped in a
    matrix run of the other debugger."""

    def mark(fn):
        fn = pytest.mark.skipif(
            kind not in kinds(), reason="the matrix run is of %s" % os.path.basename(DIR)
        )(fn)
        return pytest.mark.real_debugger(fn)

    return mark


def env(base=None, **extra):
    """base (default os.environ) with DIR first on PYTHONPATH and extra."""
    out = dict(os.environ if base is None else base)
    if DIR:
        rest = out.get("PYTHONPATH", "")
        out["PYTHONPATH"] = DIR + (os.pathsep + rest if rest else "")
    out.update(extra)
    return out


def check_loaded_from_dir(path):
    """With a matrix directory, path (a debugger module's __file__ in the
    subprocess) must be inside it, not site-packages' copy."""
    if DIR:
        real = os.path.realpath(DIR) + os.sep
        assert os.path.realpath(path).startswith(real), (path, DIR)
