"""The daemon loads the debugger once, before it forks workers
(remote_debug._preload_debugger, called by _main before pyspark.daemon's
manager()). Each case runs the real module's _main in a fresh interpreter,
with pyspark.daemon.manager replaced by a probe that records the daemon's
state at the moment it would start forking workers, and forks one worker
that attaches with real debugpy to a stand-in for the proxy."""

import json
import os
import subprocess
import sys

import flat
import pytest
import real_debugger
from wrapper_settings import default_settings as settings

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

DEBUGGER_MODULES = ("debugpy", "debugpy.server.api", "pydevd", "_pydevd_bundle.pydevd_comm")
PYCHARM_MODULES = ("pydevd_pycharm", "pydevd", "_pydevd_bundle.pydevd_comm")

_DAEMON = r"""
import gc, json, os, sys, threading
module_dir, out = sys.argv[1], sys.argv[2]
settings, port = json.loads(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, module_dir)
import remote_debug
from pyspark import daemon

remote_debug._BAKED = settings
WATCH = %(watch)r


def fds():
    names = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            names[fd] = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            pass
    return names


before = {"threads": [t.name for t in threading.enumerate()], "fds": fds()}
import builtins, warnings
builtins_before, environ_before = set(vars(builtins)), set(os.environ)
recursion_before, filters_before = sys.getrecursionlimit(), list(warnings.filters)


def manager():
    # What the daemon is when it starts forking workers.
    state = {
        "loaded": [m for m in WATCH if sys.modules.get(m) is not None],
        "problem": remote_debug._debugger_problem(),
        "threads_before": before["threads"],
        "threads": [t.name for t in threading.enumerate()],
        "fds_before": before["fds"],
        "fds": fds(),
        "trace": repr(sys.gettrace()),
        "file_validation_env": os.environ.get("PYDEVD_DISABLE_FILE_VALIDATION"),
        "default_breakpointhook": sys.breakpointhook is sys.__breakpointhook__,
        "builtins": sorted(set(vars(builtins)) - builtins_before),
        "environ": sorted(k for k in os.environ if k not in environ_before),
        "recursion": [recursion_before, sys.getrecursionlimit()],
        "filters": [repr(f) for f in warnings.filters if f not in filters_before],
        "gc_frozen": gc.get_freeze_count(),
        "debugger_file": getattr(sys.modules.get(WATCH[0]), "__file__", None),
        "gc_tracked": len(gc.get_objects()),
        "start_sleep_skipped": getattr(
            getattr(getattr(sys.modules.get("pydevd"), "PyDB", None), "initialize_network", None),
            "_sparkdap",
            False,
        ),
    }
    if port:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            # A worker that attaches: what _connect does, short of the hello.
            os.close(r)
            os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
            mods = set(sys.modules)
            with remote_debug._QuietPydevd():
                debugger = remote_debug._import_debugger()
            hook = getattr(sys.breakpointhook, "__name__", "")
            redone = {
                "execfile": hasattr(builtins, "execfile"),
                "frame_eval": os.environ.get("PYDEVD_USE_FRAME_EVAL"),
            }
            debugger.configure(subProcess=False)
            import time

            sleeps, real_sleep, me = [], time.sleep, threading.get_ident()

            def sleep(seconds):
                if threading.get_ident() == me:
                    sleeps.append(seconds)
                return real_sleep(seconds)

            time.sleep = sleep
            debugger.connect(("127.0.0.1", port))
            time.sleep = real_sleep
            child = {
                "new_modules": sorted(set(sys.modules) - mods),
                "connected": debugger.is_client_connected(),
                "sleeps": sleeps,
                "breakpointhook": hook,
                "redone": redone,
            }
            os.write(w, json.dumps(child).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
        _, status = os.waitpid(pid, 0)
        state["child"] = json.loads(data) if data else {"status": status}
    with open(out, "w") as f:
        json.dump(state, f)


daemon.manager = manager
remote_debug._main(["remote_debug.py"])
"""


@pytest.fixture
def adapter():
    """The stand-in for the proxy, in its own process: the daemon must not
    have threads of the test's."""
    proc = subprocess.Popen(
        [sys.executable, os.path.join(TESTS_DIR, "fake_adapter.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def run_daemon(tmp_path, cfg, port=0, env=None, watch=DEBUGGER_MODULES, setup=""):
    out = tmp_path / "state.json"
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPARKDAP_", "PYDEVD_", "DEBUGPY_"))
    }
    full_env = real_debugger.env(full_env, **(env or {}))
    code = setup + _DAEMON % {"watch": watch}
    proc = subprocess.run(
        [sys.executable, "-c", code, flat.directory(), str(out), json.dumps(cfg), str(port)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # The JVM reads the daemon's port from its stdout: nothing else may be there.
    assert proc.stdout == ""
    return json.loads(out.read_text()), proc.stderr


@pytest.mark.slow
@real_debugger.only("debugpy")
def test_daemon_loads_debugpy_before_it_forks(tmp_path, adapter):
    state, stderr = run_daemon(tmp_path, settings(), port=adapter)
    assert state["loaded"] == list(DEBUGGER_MODULES)
    real_debugger.check_loaded_from_dir(state["debugger_file"])
    # Nothing that a fork would not carry: no thread, no descriptor, no tracing.
    assert state["threads"] == state["threads_before"] == ["MainThread"]
    assert state["fds"] == state["fds_before"]
    assert state["trace"] == "None"
    # breakpoint() in a task that is not debugged is Python's, as before,
    # and nothing else the import changed is left for such a task to see.
    assert state["default_breakpointhook"]
    assert state["builtins"] == state["environ"] == state["filters"] == []
    assert state["recursion"][0] == state["recursion"][1]
    # Set for pydevd's import only; a worker's environment is as it was.
    assert state["file_validation_env"] is None
    assert stderr == ""
    # The forked worker attaches without importing any of the debugger.
    child = state["child"]
    assert child.get("connected"), child
    loaded = [
        m
        for m in child["new_modules"]
        if m.split(".")[0]
        in ("debugpy", "pydevd", "_pydevd_bundle", "_pydev_bundle", "pydevd_file_utils")
    ]
    assert loaded == []
    # Its breakpoint() is the debugger's, as when it imported debugpy itself.
    assert child["breakpointhook"] == "debugpy_breakpointhook"
    assert child["redone"] == {"execfile": True, "frame_eval": "NO"}
    # Nor sleeps the 0.1 s pydevd's initialize_network gives its threads.
    assert state["start_sleep_skipped"]
    # A worker's garbage collections do not walk the daemon's objects (the
    # debugger's among them): frozen before the fork, they are most of
    # what the daemon holds.
    assert state["gc_frozen"] > 2 * state["gc_tracked"], (state["gc_frozen"], state["gc_tracked"])
    assert 0.1 not in child["sleeps"], child["sleeps"]


@pytest.mark.slow
@real_debugger.only("pydevd-pycharm")
def test_daemon_loads_pydevd_pycharm_before_it_forks(tmp_path):
    if not real_debugger.DIR:
        pytest.importorskip("pydevd_pycharm")
    state, _ = run_daemon(tmp_path, settings(ide="pycharm"), watch=PYCHARM_MODULES)
    assert state["loaded"] == list(PYCHARM_MODULES)
    real_debugger.check_loaded_from_dir(state["debugger_file"])
    assert state["start_sleep_skipped"]
    # pydevd-pycharm's breakpoint() would connect to localhost:5678, and
    # IPython, which it imports, raises the recursion limit.
    assert state["default_breakpointhook"]
    assert state["builtins"] == state["environ"] == state["filters"] == []
    assert state["recursion"][0] == state["recursion"][1]
    assert state["threads"] == state["threads_before"] == ["MainThread"]
    assert state["fds"] == state["fds_before"]
    assert state["trace"] == "None"


@pytest.mark.parametrize(
    "cfg,env",
    [
        (settings(), {"SPARKDAP_DISABLE": "1"}),
        # Selects no task, and the proxy may not select any later.
        (settings(partitions=[]), {"SPARKDAP_LIVE_SELECTION": "0"}),
        (settings(), {"SPARKDAP_PARTITIONS": ",", "SPARKDAP_LIVE_SELECTION": "off"}),
        (settings(), {"SPARKDAP_SAMPLE_RATE": "2"}),  # invalid: each worker says so, as before
        (None, {}),  # not generated by `sparkdap wrap`
    ],
    ids=["disabled", "no-partitions", "no-partitions-env", "invalid-settings", "no-settings"],
)
def test_daemon_leaves_the_debugger_alone(tmp_path, cfg, env):
    state, stderr = run_daemon(tmp_path, cfg, env=env)
    assert state["loaded"] == []
    assert state["gc_frozen"] == 0
    assert stderr == ""


@real_debugger.only("debugpy")
@pytest.mark.parametrize(
    "cfg,env",
    [(settings(partitions=[]), {}), (settings(), {"SPARKDAP_PARTITIONS": "none"})],
    ids=["no-partitions", "no-partitions-env"],
)
def test_daemon_loads_the_debugger_for_a_job_that_selects_later(tmp_path, cfg, env):
    """With live selection, a job submitted with nothing selected
    (--partitions none) may select tasks while it runs: its workers attach
    as fast as any."""
    state, stderr = run_daemon(tmp_path, cfg, env=env)
    assert state["loaded"] == list(DEBUGGER_MODULES)
    assert state["threads"] == state["threads_before"] == ["MainThread"]
    assert stderr == ""


@pytest.mark.slow
def test_daemon_fails_open_when_the_debugger_does_not_load(tmp_path):
    # A debugpy whose import breaks: one line, the daemon runs on, and each
    # worker that attaches tries again.
    state, stderr = run_daemon(
        tmp_path,
        settings(),
        setup="import sys, types\nsys.modules['debugpy'] = types.ModuleType('debugpy')\n",
    )
    assert state["loaded"] == ["debugpy"]
    assert state["problem"] is None
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "could not load the debugger in the daemon" in lines[0]


@pytest.mark.slow
def test_daemon_without_a_debugger_leaves_the_words_to_its_workers(tmp_path):
    # No debugpy and none shipped: the daemon says nothing and keeps why,
    # for each worker that would attach to tell the proxy in its hello.
    state, stderr = run_daemon(
        tmp_path, settings(), setup="import sys\nsys.modules['debugpy'] = None\n"
    )
    assert state["loaded"] == []
    assert stderr == ""
    assert state["problem"].startswith("debugpy is not installed in "), state["problem"]
