"""The worker wrapper as executors import it: the remote_debug package
built into one file (flat.py), with no settings header (tests bake their
own settings with the `baked` fixture). The package's modules themselves
stay importable as `remote_debug.<module>` (test_layout, test_compat)."""

import importlib.util
import os
import sys
import types

import pytest

MODULE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, MODULE_DIR)

import flat  # noqa: E402
from wrapper_settings import default_settings  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "remote_debug_flat", os.path.join(flat.directory(), "remote_debug.py")
)
remote_debug = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(remote_debug)


@pytest.fixture
def rd():
    """The module, with its per-process state, caches and backoff directory
    reset around each test."""
    remote_debug._state = remote_debug._State(None)
    remote_debug._user_file_cache.clear()
    remote_debug._library_prefixes = None
    remote_debug._backoff_dir = None
    remote_debug._preload_problem = None
    yield remote_debug
    remote_debug._state = remote_debug._State(None)
    remote_debug._user_file_cache.clear()
    remote_debug._library_prefixes = None
    remote_debug._backoff_dir = None
    remote_debug._preload_problem = None


@pytest.fixture
def baked(rd, monkeypatch):
    """Bakes settings as the header of a default `sparkdap wrap` would;
    returns the dict so a test can change it."""
    settings = default_settings()
    monkeypatch.setattr(rd, "_BAKED", settings)
    for var in list(os.environ):
        if var.startswith("SPARKDAP_"):
            monkeypatch.delenv(var)
    return settings


@pytest.fixture
def fake_debugpy(monkeypatch):
    """A debugpy (and pydevd) of another version in sys.modules; .connects
    counts its connect calls."""
    debugpy = types.ModuleType("debugpy")
    debugpy.__version__ = "9.9.9"
    debugpy.connects = []
    debugpy.configure = lambda **kw: None
    debugpy.connect = lambda *a, **kw: debugpy.connects.append(a)
    server = types.ModuleType("debugpy.server")
    api = types.ModuleType("debugpy.server.api")
    server.api = api
    debugpy.server = server
    for name, mod in (
        ("debugpy", debugpy),
        ("debugpy.server", server),
        ("debugpy.server.api", api),
        ("debugpy.common", None),
        ("pydevd", types.ModuleType("pydevd")),
    ):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delenv("SPARKDAP_UNTESTED_DEBUGGER", raising=False)
    return debugpy
