"""The wrapper in one file, as `sparkdap wrap` ships it: the modules of the
remote_debug package in the order of its MODULES, without their relative
imports (workerwrap/module.go builds the same, adding a comment line per
module). The tests run this form, the one executors import."""

import atexit
import os
import shutil
import tempfile

PACKAGE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote_debug"
)


def modules():
    ns = {}
    with open(os.path.join(PACKAGE_DIR, "__init__.py"), encoding="utf-8") as f:
        exec(f.read(), ns)
    return ns["MODULES"]


def source():
    parts = []
    for name in modules():
        with open(os.path.join(PACKAGE_DIR, name + ".py"), encoding="utf-8") as f:
            text = f.read()
        kept, skipping = [], False
        for line in text.splitlines(True):
            if skipping:
                skipping = ")" not in line
            elif line.startswith("from ."):
                skipping = "(" in line and ")" not in line
            else:
                kept.append(line)
        parts.append("".join(kept).strip() + "\n")
    return "\n\n".join(parts)


def write(directory):
    """Writes remote_debug.py (no settings header) into directory."""
    path = os.path.join(directory, "remote_debug.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source())
    return path


_dir = []


def directory():
    """A directory holding the one-file remote_debug.py, built once per
    test process and removed at its exit."""
    if not _dir:
        d = tempfile.mkdtemp(prefix="sparkdap-wrapper-")
        atexit.register(shutil.rmtree, d, True)
        write(d)
        _dir.append(d)
    return _dir[0]
