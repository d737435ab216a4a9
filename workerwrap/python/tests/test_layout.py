"""The remote_debug package is written to be shipped as one file (flat.py,
workerwrap/module.go): these are the rules that make the one file mean
what the modules mean."""

import ast
import importlib
import os

import flat
import pytest


def _parsed():
    out = {}
    for name in flat.modules():
        with open(os.path.join(flat.PACKAGE_DIR, name + ".py"), encoding="utf-8") as f:
            out[name] = ast.parse(f.read())
    return out


def _top_level_bindings(tree):
    """Names a module binds at its top level, other than by importing."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _relative_imports(tree):
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0]


def test_every_module_is_listed():
    files = {f[:-3] for f in os.listdir(flat.PACKAGE_DIR) if f.endswith(".py")}
    assert files - {"__init__"} == set(flat.modules())


def test_each_name_is_defined_once():
    seen = {}
    for mod, tree in _parsed().items():
        for name in _top_level_bindings(tree):
            assert name not in seen, "%s defined in both %s and %s" % (name, seen.get(name), mod)
            seen[name] = mod


def test_relative_imports_name_earlier_modules_at_top_level():
    order = flat.modules()
    for mod, tree in _parsed().items():
        top = {id(n) for n in tree.body}
        for imp in _relative_imports(tree):
            where = "%s.py line %d" % (mod, imp.lineno)
            assert id(imp) in top, where + ": a relative import inside a function"
            assert imp.level == 1 and imp.module in order, where
            assert order.index(imp.module) < order.index(mod), where + ": imports a later module"
            assert all(a.asname is None and a.name != "*" for a in imp.names), where


def test_rebound_globals_stay_in_their_module():
    # `from .m import g` copies g once: if m rebinds g later, the module
    # would see the old value where the one file sees the new one.
    trees = _parsed()
    rebound = {}
    for mod, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                for name in node.names:
                    rebound[name] = mod
    for mod, tree in trees.items():
        for imp in _relative_imports(tree):
            for alias in imp.names:
                assert alias.name not in rebound, "%s imports %s, which %s rebinds" % (
                    mod,
                    alias.name,
                    rebound[alias.name],
                )


@pytest.mark.parametrize("name", flat.modules())
def test_module_imports_on_its_own(name):
    mod = importlib.import_module("remote_debug." + name)
    assert mod.__name__ == "remote_debug." + name


def test_one_file_has_every_name(rd):
    for mod, tree in _parsed().items():
        for name in _top_level_bindings(tree):
            assert hasattr(rd, name), "%s.%s" % (mod, name)
