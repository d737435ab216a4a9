"""The debugger shipped with the job (shipped.py): which wheel, unpacked
where and how, what it replaces, and the one line when it cannot be used."""

import os
import stat
import subprocess
import sys
import types
import zipfile

import pytest

import flat

WHEEL = "debugpy-1.8.21-py2.py3-none-any.whl"


@pytest.fixture
def srd(rd, monkeypatch, tmp_path):
    """rd with no shipped debugger prepared, no SPARKDAP_SHIP_DEBUGGER, and
    the wrapper's directory (where wheels are looked for) in tmp_path."""
    monkeypatch.delenv("SPARKDAP_SHIP_DEBUGGER", raising=False)
    wheels = tmp_path / "wrapper"
    wheels.mkdir()
    monkeypatch.setattr(rd, "_wheel_dirs", lambda: [str(wheels)])
    monkeypatch.setattr(rd, "_shipped_dir", None)
    monkeypatch.setattr(rd, "_shipped_path", None)
    monkeypatch.setattr(rd, "_shipped_owner", None)
    monkeypatch.setattr(rd, "_shipped_failure", None)
    rd.wheels = wheels
    yield rd


def fake_wheel(directory, version="1.8.21", requires=">=3.8", members=None):
    path = os.path.join(str(directory), "debugpy-%s-py2.py3-none-any.whl" % version)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in (
            members or {"debugpy/__init__.py": "__version__ = %r\n" % version}
        ).items():
            zf.writestr(name, data)
        meta = "Metadata-Version: 2.1\nName: debugpy\nVersion: %s\n" % version
        if requires:
            meta += "Requires-Python: %s\n" % requires
        zf.writestr("debugpy-%s.dist-info/METADATA" % version, meta + "\nDescription\n")
    return path


@pytest.mark.parametrize(
    "requires, version, want",
    [
        (">=3.8", (3, 8, 0), True),
        (">=3.8", (3, 7, 9), False),
        (">=3.10", (3, 9, 18), False),
        (">=3.10", (3, 10, 0), True),
        (">=3.8,<4", (3, 14, 0), True),
        ("!=3.9.*, >=3.8", (3, 9, 2), False),
        ("", (3, 8, 0), True),
        ("weird", (3, 8, 0), True),
    ],
)
def test_python_fits(rd, requires, version, want):
    assert rd._python_fits(requires, version) is want


def test_choose_wheel_by_python_version(srd):
    old = fake_wheel(srd.wheels, "1.8.21", ">=3.8")
    new = fake_wheel(srd.wheels, "1.8.22", ">=3.10")
    wheels = srd._find_wheels([str(srd.wheels)])
    assert srd._choose_wheel(wheels, (3, 9, 18)) == (old, None)
    assert srd._choose_wheel(wheels, (3, 12, 1)) == (new, None)
    path, why = srd._choose_wheel(wheels, (3, 7, 1))
    assert path is None
    assert "debugpy-1.8.21-py2.py3-none-any.whl needs Python >=3.8" in why


def test_find_wheels_through_links_only_to_files_of_this_user(srd, tmp_path):
    """YARN ships every file as a link into its own cache: a link is
    followed to a regular file only this user can change, never to one
    that others may write or to something that is no file."""
    cache = tmp_path / "filecache"
    cache.mkdir()
    real = fake_wheel(cache)
    os.chmod(real, 0o555)
    os.symlink(real, str(srd.wheels / WHEEL))
    (srd.wheels / "debugpy-1.8.21-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    assert srd._find_wheels([str(srd.wheels)]) == [os.path.join(str(srd.wheels), WHEEL)]

    os.chmod(real, 0o666)  # another user could rewrite it
    assert srd._find_wheels([str(srd.wheels)]) == []
    os.chmod(real, 0o644)
    assert srd._trusted_file(real, uid=os.getuid())
    if os.getuid() != 0:
        assert not srd._trusted_file(real, uid=os.getuid() + 1)
    os.remove(str(srd.wheels / WHEEL))
    os.symlink(str(cache), str(srd.wheels / WHEEL))  # a directory
    assert srd._find_wheels([str(srd.wheels)]) == []


def test_find_wheels_in_the_working_directory_too(rd, tmp_path, monkeypatch):
    """On YARN the wrapper may load from __pyfiles__ while the wheel lands
    in the container's working directory; each name is taken once."""
    work = tmp_path / "container"
    (work / "__pyfiles__").mkdir(parents=True)
    wheel = fake_wheel(work)
    monkeypatch.chdir(str(work))
    monkeypatch.setattr(rd, "__file__", str(work / "__pyfiles__" / "remote_debug.py"))
    dirs = rd._wheel_dirs()
    assert dirs == [str(work / "__pyfiles__"), str(work)]
    assert rd._find_wheels(dirs) == [wheel]
    monkeypatch.setattr(rd, "__file__", str(work / "remote_debug.py"))
    assert rd._wheel_dirs() == [str(work)]


def test_extract_into_a_new_private_directory(srd, tmp_path):
    wheel = fake_wheel(
        srd.wheels, members={"debugpy/__init__.py": "x = 1\n", "debugpy/a/b.py": "y = 2\n"}
    )
    base = tmp_path / "base"
    base.mkdir(mode=0o755)
    target = srd._extract(wheel, str(base))
    info = os.lstat(target)
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    assert os.path.dirname(target) == str(base)
    with open(os.path.join(target, "debugpy", "a", "b.py")) as f:
        assert f.read() == "y = 2\n"
    # A second daemon gets a directory of its own, never the first one's.
    assert srd._extract(wheel, str(base)) != target


@pytest.mark.parametrize(
    "member", ["../evil.py", "/etc/evil.py", "debugpy/../../evil.py", "C:/evil.py"]
)
def test_extract_refuses_a_member_leaving_the_directory(srd, tmp_path, member):
    wheel = fake_wheel(srd.wheels, members={"debugpy/__init__.py": "", member: "boom"})
    base = tmp_path / "base"
    base.mkdir()
    with pytest.raises(ValueError, match="unsafe member"):
        srd._extract(wheel, str(base))
    assert os.listdir(str(base)) == []  # nothing left behind
    assert not (tmp_path / "evil.py").exists()


def test_purge_forgets_the_unusable_copy(srd, tmp_path, monkeypatch):
    old = tmp_path / "site" / "debugpy"
    vendored = str(old / "_vendored" / "pydevd")
    mods = {}
    for name in (
        "debugpy",
        "debugpy.server",
        "pydevd",
        "_pydevd_bundle.pydevd_constants",
        "_pydev_bundle",
    ):
        mods[name] = types.ModuleType(name)
    mods["debugpy"].__file__ = str(old / "__init__.py")
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(sys, "path", [vendored, "/keep"] + sys.path)
    srd._purge_debugger()
    for name in mods:
        assert name not in sys.modules
    assert vendored not in sys.path and "/keep" in sys.path
    assert "os" in sys.modules


def test_auto_uses_a_usable_own_debugger(srd, monkeypatch):
    fake_wheel(srd.wheels)
    own = object()
    monkeypatch.setattr(srd, "_load_debugger", lambda pycharm: own)
    monkeypatch.setattr(srd, "_extract", pytest.fail)
    assert srd._load_own_or_shipped(False, True) is own
    assert srd._shipped_dir is None


def test_never_ignores_the_shipped_wheel(srd, monkeypatch):
    fake_wheel(srd.wheels)
    monkeypatch.setenv("SPARKDAP_SHIP_DEBUGGER", "never")

    def unusable(pycharm):
        raise srd._UnsupportedDebugger("debugpy 1.0 lacks everything")

    monkeypatch.setattr(srd, "_load_debugger", unusable)
    with pytest.raises(srd._UnsupportedDebugger, match="lacks everything"):
        srd._load_own_or_shipped(False, True)
    assert srd._shipped_dir is None


def shipped_loader(srd, monkeypatch, own_error):
    """_load_debugger that fails like own_error for the executors' copy and
    returns the shipped debugpy once its directory is first on sys.path."""
    shipped = types.ModuleType("debugpy")
    shipped.__version__ = "1.8.21"

    def load(pycharm):
        if srd._shipped_dir is not None and sys.path[0] == srd._shipped_dir:
            return shipped
        raise own_error

    monkeypatch.setattr(srd, "_load_debugger", load)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return shipped


def test_unusable_own_debugger_is_replaced_in_the_daemon(srd, monkeypatch, capsys, tmp_path):
    fake_wheel(srd.wheels)
    shipped = shipped_loader(srd, monkeypatch, srd._UnsupportedDebugger("debugpy 1.0 lacks PyDB"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    try:
        assert srd._load_own_or_shipped(False, True) is shipped
        assert sys.path[0] == srd._shipped_dir
        assert os.path.isfile(os.path.join(srd._shipped_dir, "debugpy", "__init__.py"))
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1, err
        assert "using debugpy 1.8.21 shipped with the job (debugpy 1.0 lacks PyDB)" in err[0]
        # Its workers use what the daemon unpacked, and never unpack.
        assert srd._load_own_or_shipped(False, False) is shipped
        # A worker forked from it leaves the directory alone; the daemon removes it.
        path = srd._shipped_dir
        monkeypatch.setattr(srd, "_shipped_owner", -1)
        srd._close_shipped()
        assert os.path.isdir(path)
        monkeypatch.setattr(srd, "_shipped_owner", os.getpid())
        srd._close_shipped()
        assert not os.path.exists(path)
    finally:
        if srd._shipped_dir:
            srd._close_shipped()


def test_missing_own_debugger_and_no_fitting_wheel_is_one_clear_line(srd, monkeypatch):
    fake_wheel(srd.wheels, requires=">=9.0")
    shipped_loader(srd, monkeypatch, ImportError("No module named 'debugpy'"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(srd._UnsupportedDebugger) as info:
        srd._load_own_or_shipped(False, True)
    msg = str(info.value)
    assert msg.startswith("this Python has no debugpy, and no shipped debugger fits: ")
    assert "needs Python >=9.0" in msg and "\n" not in msg
    # The daemon's reason is each worker's too.
    with pytest.raises(srd._UnsupportedDebugger) as again:
        srd._load_own_or_shipped(False, False)
    assert str(again.value) == msg


def test_broken_wheel_fails_open(srd, monkeypatch):
    (srd.wheels / WHEEL).write_bytes(b"not a zip")
    shipped_loader(srd, monkeypatch, ImportError("No module named 'debugpy'"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(srd._UnsupportedDebugger, match="no shipped debugger fits: .*unreadable"):
        srd._load_own_or_shipped(False, True)


def test_worker_never_unpacks(srd, monkeypatch):
    fake_wheel(srd.wheels)
    shipped_loader(srd, monkeypatch, ImportError("No module named 'debugpy'"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    monkeypatch.setattr(srd, "_extract", pytest.fail)
    with pytest.raises(
        srd._UnsupportedDebugger, match="the daemon did not unpack the shipped debugger"
    ):
        srd._load_own_or_shipped(False, False)


def test_always_prefers_the_shipped_one(srd, monkeypatch, capsys):
    fake_wheel(srd.wheels)
    monkeypatch.setenv("SPARKDAP_SHIP_DEBUGGER", "always")
    shipped = shipped_loader(srd, monkeypatch, AssertionError("the own debugger is not even tried"))
    try:
        assert srd._load_own_or_shipped(False, True) is shipped
        assert "(--ship-debugger always)" in capsys.readouterr().err
    finally:
        srd._close_shipped()


def test_shipped_paths_are_not_code_roots(srd, monkeypatch):
    monkeypatch.setattr(srd, "_shipped_dir", "/tmp/sparkdap-debugger-x")
    monkeypatch.setattr(
        sys,
        "path",
        [
            "/work/app",
            "/tmp/sparkdap-debugger-x",
            "/exec/" + WHEEL,
            "/tmp/sparkdap-debugger-x/debugpy",
        ],
    )
    assert srd._roots()["sysPath"] == ["/work/app"]


def real_wheel():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "sparkdap", "debuggers", WHEEL)
    if not os.path.isfile(path):
        pytest.skip("no %s in sparkdap's cache (sparkdap wrap -o DIR fetches it)" % WHEEL)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("own", ["none", "unusable"])
def test_real_wheel_in_a_python_without_debugpy(tmp_path, own):
    """The real debugpy wheel, in a Python that has no debugpy (-S: no
    site-packages) or an unusable one first on its path: the daemon's
    preload unpacks it, imports it from there, and says so once."""
    import shutil

    wrapper = tmp_path / "wrapper"
    wrapper.mkdir()
    shutil.copy(os.path.join(flat.directory(), "remote_debug.py"), str(wrapper))
    shutil.copy(real_wheel(), str(wrapper))
    path = [str(wrapper)]
    if own == "unusable":
        fake = tmp_path / "own" / "debugpy"
        (fake / "server").mkdir(parents=True)
        (fake / "__init__.py").write_text("__version__ = '1.5.0'\n")
        (fake / "server" / "__init__.py").write_text("")
        (fake / "server" / "api.py").write_text("")
        (tmp_path / "own" / "pydevd.py").write_text("")
        path.append(str(tmp_path / "own"))
    code = (
        "import sys, os, json\n"
        "sys.path[:0] = %r\n"
        "import remote_debug as rd\n"
        "d = rd._load_own_or_shipped(False, True)\n"
        "from _pydevd_bundle.pydevd_filtering import FilesFiltering\n"
        "f = FilesFiltering()\n"
        "out = {'file': d.__file__, 'dir': rd._shipped_dir, 'version': d.__version__,\n"
        "       'mode': oct(os.stat(rd._shipped_dir).st_mode & 0o777),\n"
        "       'user': f.in_project_roots(d.__file__),\n"
        "       'stdlib': f.in_project_roots(os.__file__)}\n"
        "rd._close_shipped()\n"
        "out['removed'] = not os.path.exists(out['dir'])\n"
        "print(json.dumps(out))\n"
    ) % (path,)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKDAP_", "PYTHON"))}
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # as _preload_debugger sets it
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert out["version"] == "1.8.21"
    assert out["file"].startswith(out["dir"] + os.sep)
    assert out["mode"] == "0o700" and out["removed"]
    # justMyCode: the shipped debugger's files are library code, as
    # site-packages' would be, and the default library roots still hold.
    assert out["user"] is False and out["stdlib"] is False
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    want = "this Python has no debugpy" if own == "none" else "debugpy 1.5.0 lacks "
    assert "using debugpy 1.8.21 shipped with the job (" + want in lines[0]


PYCHARM_ZIP = "pydevd_pycharm-253.33813.30-sparkdap.zip"


def fake_pycharm_zip(directory, version="253.33813.30", members=None):
    """A zip as `sparkdap submit --pycharm-build` builds from the sdist."""
    path = os.path.join(str(directory), "pydevd_pycharm-%s-sparkdap.zip" % version)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in (
            members
            or {
                "pydevd_pycharm.py": "__version__ = %r\n" % version,
                "pydevd.py": "",
                "_pydevd_bundle/__init__.py": "",
            }
        ).items():
            zf.writestr(name, data)
    return path


def pycharm_loader(srd, monkeypatch, own_error):
    """_load_debugger that fails like own_error for the executors'
    pydevd-pycharm and returns the shipped one once its directory is first
    on sys.path; it must be asked for pydevd-pycharm, never debugpy."""
    shipped = types.ModuleType("pydevd_pycharm")
    shipped.__version__ = "253.33813.30"

    def load(pycharm):
        assert pycharm, "debugpy loaded for a PyCharm job"
        if srd._shipped_path is not None and sys.path[0] == srd._shipped_path:
            return shipped
        raise own_error

    monkeypatch.setattr(srd, "_load_debugger", load)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return shipped


def test_pycharm_zips_are_found_apart_from_wheels(srd, tmp_path):
    old = fake_pycharm_zip(srd.wheels, "253.17525.96")
    new = fake_pycharm_zip(srd.wheels, "253.33813.30")
    fake_wheel(srd.wheels)
    elsewhere = fake_pycharm_zip(tmp_path, "263.7307.50")
    os.chmod(elsewhere, 0o666)
    os.symlink(elsewhere, str(srd.wheels / os.path.basename(elsewhere)))  # others may write it
    (srd.wheels / "pydevd_pycharm-253.33813.30.tar.gz").write_bytes(b"")
    zips = srd._find_wheels([str(srd.wheels)], pycharm=True)
    assert zips == [old, new]
    assert srd._choose_wheel(zips, (3, 11, 7), pycharm=True) == (new, None)
    assert srd._find_wheels([str(srd.wheels)]) == [os.path.join(str(srd.wheels), WHEEL)]


def test_missing_pydevd_pycharm_is_replaced_in_the_daemon(srd, monkeypatch, capsys):
    fake_pycharm_zip(srd.wheels)
    fake_wheel(srd.wheels)  # a debugpy wheel beside it is not PyCharm's
    shipped = pycharm_loader(srd, monkeypatch, ImportError("No module named 'pydevd_pycharm'"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    # Spark puts the zip on the workers' path with the --py-files.
    sys.path.insert(0, str(srd.wheels / PYCHARM_ZIP))
    try:
        assert srd._load_own_or_shipped(True, True) is shipped
        # Unpacked into a directory named *.egg inside the private one:
        # pydevd then skips its Cython speedups without a word.
        assert srd._shipped_path == os.path.join(srd._shipped_dir, "pydevd_pycharm.egg")
        assert sys.path[0] == srd._shipped_path
        assert str(srd.wheels / PYCHARM_ZIP) not in sys.path
        assert os.path.isfile(os.path.join(srd._shipped_path, "pydevd_pycharm.py"))
        assert stat.S_IMODE(os.stat(srd._shipped_dir).st_mode) == 0o700
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1, err
        assert (
            "using pydevd-pycharm 253.33813.30 shipped with the job "
            "(this Python has no pydevd-pycharm)" in err[0]
        )
        # The unpacked copy and the zip are never code roots.
        assert srd._is_shipped_path(os.path.join(srd._shipped_path, "pydevd.py"))
        assert srd._is_shipped_path("/exec/dir/" + PYCHARM_ZIP)
        # Its workers use what the daemon unpacked, and never unpack.
        monkeypatch.setattr(srd, "_extract", pytest.fail)
        assert srd._load_own_or_shipped(True, False) is shipped
        path = srd._shipped_dir
        srd._close_shipped()
        assert not os.path.exists(path)
    finally:
        if srd._shipped_dir:
            srd._close_shipped()


def test_usable_own_pydevd_pycharm_is_kept(srd, monkeypatch):
    fake_pycharm_zip(srd.wheels)
    own = object()
    monkeypatch.setattr(srd, "_load_debugger", lambda pycharm: own if pycharm else pytest.fail())
    monkeypatch.setattr(srd, "_extract", pytest.fail)
    assert srd._load_own_or_shipped(True, True) is own
    assert srd._shipped_dir is None


def test_pycharm_without_a_shipped_zip_loads_its_own(srd, monkeypatch):
    fake_wheel(srd.wheels)  # only debugpy's: nothing shipped for PyCharm
    monkeypatch.setattr(srd, "_extract", pytest.fail)

    def missing(pycharm):
        assert pycharm
        raise ImportError("No module named 'pydevd_pycharm'")

    monkeypatch.setattr(srd, "_load_debugger", missing)
    with pytest.raises(ImportError, match="pydevd_pycharm"):
        srd._load_own_or_shipped(True, True)


@pytest.mark.parametrize("member", ["../evil.py", "/etc/evil.py", "_pydevd_bundle/../../evil.py"])
def test_pycharm_zip_member_leaving_the_directory_fails_open(srd, monkeypatch, tmp_path, member):
    fake_pycharm_zip(srd.wheels, members={"pydevd_pycharm.py": "", member: "boom"})
    pycharm_loader(srd, monkeypatch, ImportError("No module named 'pydevd_pycharm'"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    base = tmp_path / "base"
    base.mkdir()
    monkeypatch.setattr(srd, "_private_dir", lambda base_=None, _p=srd._private_dir: _p(str(base)))
    with pytest.raises(srd._UnsupportedDebugger) as info:
        srd._load_own_or_shipped(True, True)
    assert str(info.value).startswith(
        "this Python has no pydevd-pycharm, and the shipped %s could not be unpacked ("
        % PYCHARM_ZIP
    )
    assert os.listdir(str(base)) == []
    assert not (tmp_path / "evil.py").exists()


def real_pycharm_zip():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "sparkdap", "debuggers", PYCHARM_ZIP)
    if not os.path.isfile(path):
        pytest.skip(
            "no %s in sparkdap's cache (sparkdap wrap --ide-kind pycharm "
            "--pycharm-build 253.33813.30 -o DIR builds it)" % PYCHARM_ZIP
        )
    return path


@pytest.mark.slow
def test_real_pycharm_zip_in_a_python_without_pydevd_pycharm(tmp_path):
    """The zip of the real pydevd-pycharm 253.33813.30, in a Python with no
    pydevd-pycharm (-S: no site-packages): the daemon's preload unpacks it
    and imports it from there, in pure-Python mode, saying nothing of the
    speedups it lacks, and says once that it uses it."""
    import json
    import shutil

    wrapper = tmp_path / "wrapper"
    wrapper.mkdir()
    shutil.copy(os.path.join(flat.directory(), "remote_debug.py"), str(wrapper))
    shutil.copy(real_pycharm_zip(), str(wrapper))
    code = (
        "import sys, os, json\n"
        "sys.path[:0] = %r\n"
        "import remote_debug as rd\n"
        "d = rd._load_own_or_shipped(True, True)\n"
        "import pydevd\n"
        "from _pydevd_bundle import pydevd_trace_dispatch as td\n"
        "out = {'file': d.__file__, 'pydevd': pydevd.__file__, 'dir': rd._shipped_dir,\n"
        "       'version': d.__version__, 'cython': td.use_cython,\n"
        "       'warn': bool(td.show_tracing_warning)}\n"
        "rd._close_shipped()\n"
        "out['removed'] = not os.path.exists(out['dir'])\n"
        "print(json.dumps(out))\n"
    ) % ([str(wrapper), str(wrapper / PYCHARM_ZIP)],)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SPARKDAP_", "PYTHON", "PYDEVD"))
    }
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["version"] == "253.33813.30"
    egg = os.path.join(out["dir"], "pydevd_pycharm.egg") + os.sep
    assert out["file"].startswith(egg) and out["pydevd"].startswith(egg)
    # Pure Python, and no word to the user or to PyCharm about speedups.
    assert out["cython"] == "NO" and out["warn"] is False
    assert out["removed"]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert (
        "using pydevd-pycharm 253.33813.30 shipped with the job (this Python has no pydevd-pycharm)"
        in lines[0]
    )
