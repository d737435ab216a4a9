# Setting up a replayed call (sparkdap_replay.py runs it): which function
# of the developer's own source runs, and the sys.path its imports resolve
# against. Everything here is decided on this machine: the module loaded is
# the one holding the local file the proxy mapped the function's executor
# path to, never a module the capture names (SECURITY.md).

import ast
import builtins
import importlib
import importlib.util
import keyword
import os
import stat
import sys
import sysconfig
import types

from sparkdap_replay_data import NoLocalSource, ReplayError


def _system_dirs():
    """Where the standard library and installed packages live: a module from
    there is not the developer's code, and the cluster must not pick one
    for replay to call."""
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p))
    for p in sys.path:
        if os.path.basename(p) in ("site-packages", "dist-packages"):
            dirs.add(os.path.realpath(p))
    return dirs


def _under(path, dirs):
    path = os.path.realpath(path)
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def _import_local(imp):
    """Only with --trust-captured-code: the function named by {"module",
    "qualname"} from the developer's own module (not the standard library,
    not site-packages: importing runs the module, and the cluster chose its
    name). Returns (fn, file) or (None, why)."""
    mod_name, qual = imp.get("module") or "", imp.get("qualname") or ""
    parts = mod_name.split(".")
    if not all(p.isidentifier() for p in parts) or not all(
        q.isidentifier() for q in qual.split(".")
    ):
        return None, "%r / %r is not a module and function name" % (mod_name, qual)
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: imports nothing
    except (ImportError, ValueError):
        spec = None
    origin = getattr(spec, "origin", None) if spec else None
    if spec is None or not origin:
        return None, "module %s is not importable here" % mod_name
    if origin in ("built-in", "frozen") or _under(origin, _system_dirs()):
        return (
            None,
            "module %s here is %s, in the standard library or site-packages, not your source"
            % (mod_name, origin),
        )
    if _under(origin, {os.path.dirname(os.path.realpath(__file__))}):
        # sparkdap's own Python (this file's main would replay any file).
        return None, "module %s here is %s, sparkdap's own code, not your source" % (
            mod_name,
            origin,
        )
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:
        return None, "importing your module %s failed: %s: %s" % (mod_name, type(exc).__name__, exc)
    obj = mod
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if not callable(obj) or getattr(obj, "__module__", None) != mod_name:
        return None, "your module %s has no function %s" % (mod_name, qual)
    return obj, getattr(mod, "__file__", "?")


def _param_names(args):
    out = [a.arg for a in getattr(args, "posonlyargs", [])] + [a.arg for a in args.args]
    if args.vararg:
        out.append("*" + args.vararg.arg)
    out.extend(a.arg for a in args.kwonlyargs)
    if args.kwarg:
        out.append("**" + args.kwarg.arg)
    return out


def _functions(tree):
    """Every def and lambda in tree with the __qualname__ Python gives it."""
    out = []
    inlined = sys.version_info >= (3, 12)  # PEP 709: comprehensions are no functions

    def visit(node, prefix):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            q = prefix + (node.name if not isinstance(node, ast.Lambda) else "<lambda>")
            out.append((q, node))
            for d in getattr(node, "decorator_list", []):
                visit(d, prefix)
            visit(node.args, prefix)
            for stmt in node.body if isinstance(node.body, list) else [node.body]:
                visit(stmt, q + ".<locals>.")
            return
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                visit(d, prefix)
            for stmt in node.body:
                visit(stmt, prefix + node.name + ".")
            return
        comp = {
            ast.ListComp: "<listcomp>",
            ast.SetComp: "<setcomp>",
            ast.DictComp: "<dictcomp>",
            ast.GeneratorExp: "<genexpr>",
        }.get(type(node))
        if comp and not (inlined and comp != "<genexpr>"):
            for child in ast.iter_child_nodes(node):
                visit(child, prefix + comp + ".")
            return
        for child in ast.iter_child_nodes(node):
            visit(child, prefix)

    for stmt in tree.body:
        visit(stmt, "")
    return out


def _first_line(node):
    """co_firstlineno of the code node compiles to: a decorated def's
    starts at its first decorator."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def find_local(tree, info, params):
    """The def or lambda in tree that the captured function is: its
    qualified name, its parameters when that leaves any, and the nearest
    first line (an edit moves lines). Returns (node, why) or raises
    ReplayError when two are equally near."""
    qual = info.get("qualname") or info.get("name") or ""
    cands = [n for q, n in _functions(tree) if q == qual]
    if not cands:
        return None, "no def or lambda %s" % qual
    same = [n for n in cands if _param_names(n.args) == params]
    if same:
        cands = same
    want = int(info.get("firstLine") or 0)
    cands.sort(key=lambda n: abs(_first_line(n) - want))
    best = abs(_first_line(cands[0]) - want)
    tied = [n for n in cands if abs(_first_line(n) - want) == best]
    if len(tied) > 1:
        raise ReplayError(
            "%d functions in your local file match %s (parameters %s) equally near the captured "
            "line %d (lines %s): "
            "replay cannot tell which one ran; give one of them a name of its own (a def)"
            % (
                len(tied),
                qual,
                ", ".join(params) or "none",
                want,
                ", ".join(str(_first_line(n)) for n in tied),
            )
        )
    return cands[0], None


# The file name of the code replay generates around the developer's.
_GENERATED = "<sparkdap replay>"


def _compile_functions_as(mod, path, depth):
    """mod compiled with only the code at depth (the developer's defs and
    lambdas: 1 in a module, 2 in the generated closure wrapper) and below
    filed under path; the levels above are replay's own, and filed apart.
    pydevd matches breakpoints by file and line: were the module statement
    or the wrapper filed under path, a breakpoint on a lambda's line (or a
    def's) would first stop there, in <module>, before the call."""

    def refile(code, level):
        consts = tuple(
            refile(c, level + 1) if isinstance(c, types.CodeType) else c for c in code.co_consts
        )
        return code.replace(co_filename=path if level >= depth else _GENERATED, co_consts=consts)

    return refile(compile(mod, path, "exec"), 0)


def _local_namespace(path, tree, target, name="__main__", package=None):
    """The globals the local function runs with: the file's top-level
    imports (also in a try that only imports), defs and classes (their
    decorators kept; the target's own top-level def is compiled apart), and
    nothing else of the file: running its other statements would start the
    Spark job. Returns (ns, notes)."""
    ns = {"__name__": name, "__package__": package, "__file__": path, "__builtins__": builtins}
    notes = []
    for node in tree.body:
        if node is target:
            continue
        # A try whose body only imports is an import with a fallback.
        guarded = isinstance(node, ast.Try) and all(
            isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body
        )
        if guarded or isinstance(
            node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            try:
                exec(_compile_functions_as(ast.Module(body=[node], type_ignores=[]), path, 1), ns)
            except Exception as exc:  # one the replayed call may not need
                notes.append(
                    "%s line %d failed here (%s: %s); the call fails if it needs it"
                    % (os.path.basename(path), node.lineno, type(exc).__name__, exc)
                )
    return ns, notes


def compile_local(path, node, tree, info, data, refs, name="__main__", package=None):
    """Compiles the local def or lambda node inside a generated outer
    function whose parameters are its captured free variables, so that
    its closure binds to the captured closure values; globals from
    _local_namespace, then the captured data globals for names still
    missing. Returns (fn, notes)."""
    free = list(info.get("freeVars") or [])
    closure = data.get("closure") or {}
    own = getattr(node, "name", None)  # a nested def that calls itself
    for v in free:
        if not isinstance(v, str) or not v.isidentifier() or keyword.iskeyword(v):
            raise ReplayError(
                "the capture names a free variable %r, which is no Python name" % (v,)
            )
        if v == own and v not in closure:
            closure[v] = None  # the def below binds it, in the outer function
        if v not in closure:
            what = refs.get(v, "not captured")
            raise NoLocalSource(
                "its closure variable %r is %s, and replay rebuilds a closure from captured data "
                "only" % (v, what)
            )
    ns, notes = _local_namespace(path, tree, node, name, package)
    for name, value in (data.get("globals") or {}).items():
        ns.setdefault(name, value)
    for name, ref in sorted(refs.items()):
        if name not in ns and name not in free and name not in vars(builtins):
            notes.append(
                "global %r (%s on the executor) is not defined by %s's top-level imports and "
                "defs: the call fails if it uses it" % (name, ref, os.path.basename(path))
            )
    if isinstance(node, ast.Lambda):
        stmt = ast.Assign(targets=[ast.Name(id="__sparkdap_fn__", ctx=ast.Store())], value=node)
        ast.copy_location(stmt, node)
        fn_name = "__sparkdap_fn__"
    else:
        node.decorator_list = []  # a @udf would wrap it
        stmt, fn_name = node, node.name
    ret = ast.Return(value=ast.Name(id=fn_name, ctx=ast.Load()))
    ast.copy_location(ret, node)
    outer = ast.parse("def __sparkdap_outer__():\n    pass\n").body[0]
    outer.args.args = [ast.arg(arg=v) for v in free]
    outer.body = [stmt, ret]
    ast.copy_location(outer, node)
    mod = ast.Module(body=[outer], type_ignores=[])
    ast.fix_missing_locations(mod)
    exec(_compile_functions_as(mod, path, 2), ns)
    fn = ns.pop("__sparkdap_outer__")(*[closure[v] for v in free])
    if info.get("qualname"):
        fn.__qualname__ = info["qualname"]
    if node in tree.body:
        ns[own] = fn  # a top-level def that calls itself finds itself
    return fn, notes


def _regular_py(path):
    try:
        st = os.stat(path)
    except OSError as exc:
        return "cannot read %s: %s" % (path, exc.strerror)
    if not stat.S_ISREG(st.st_mode) or not path.endswith(".py"):
        return "%s is not a regular .py file" % path
    return None


def _within(path, roots):
    path = os.path.realpath(path)
    for r in roots:
        r = os.path.realpath(r)
        if path.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


def local_module(local, roots):
    """The module a local file is, decided from the file system alone:
    (name, package, directory to import from). A file in a package (its
    directory has an __init__.py, and so on up, stopping at a local root)
    is pkg.sub.mod, imported from the directory above pkg, so that its
    relative imports resolve; any other file is a script, "__main__",
    imported from its own directory. The capture's module name is never
    used: the executor wrote it."""
    local = os.path.abspath(local)
    d = os.path.dirname(local)
    stem = os.path.basename(local)[: -len(".py")]
    stops = {os.path.normpath(os.path.abspath(r)) for r in roots}
    parts = []
    while (
        d not in stops
        and os.path.isfile(os.path.join(d, "__init__.py"))
        and os.path.basename(d).isidentifier()
        and os.path.dirname(d) != d
    ):
        parts.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    if not parts or not (stem.isidentifier() or stem == "__init__"):
        return "__main__", None, os.path.dirname(local)
    if stem == "__init__":
        return ".".join(parts), ".".join(parts), d
    return ".".join(parts + [stem]), ".".join(parts), d


def local_function(cap, data, trust=False):
    """The function to run, from the developer's own source, and a line
    saying which one it is; NoLocalSource when there is none.

    Without trust it is always compiled from the local file the proxy
    mapped the function's executor path to (localFile, which must lie
    under the proxy's local roots), running only that file's top-level
    imports, defs and classes (_local_namespace): never its other
    statements, so a driver script's job does not start, and never a
    module the capture names. With trust, the module the capture names is
    imported first, as the executor had it."""
    info = cap.get("function", {})
    refs = cap.get("references") or {}
    whys = []
    imp = info.get("importable")
    if imp and trust:
        fn, where = _import_local(imp)
        if fn is not None:
            if info.get("freeVars"):
                raise ReplayError(
                    "%s.%s is importable but the capture says it has a closure"
                    % (imp.get("module"), imp.get("qualname"))
                )
            return (
                fn,
                "using %s from %s (imported from your local module %s)"
                % (imp.get("qualname"), where, imp.get("module")),
                [],
            )
        whys.append(where)
    local = cap.get("localFile") or ""
    if not local:
        whys.append(
            "its file %s is not mapped to a local file (serve --root, --map)"
            % info.get("file", "?")
        )
        raise NoLocalSource("; ".join(whys))
    bad = _regular_py(local)
    roots = cap.get("localRoots") or []
    if not bad and not _within(local, roots):
        bad = "its local file %s is not under the local roots (%s)" % (
            local,
            ", ".join(roots) or "the capture names none",
        )
    if bad:
        whys.append(bad)
        raise NoLocalSource("; ".join(whys))
    try:
        with open(local, encoding="utf-8") as f:
            src = f.read()
    except (OSError, ValueError) as exc:
        raise ReplayError("cannot read your local file %s: %s" % (local, exc)) from None
    try:
        tree = ast.parse(src, filename=local)
    except (SyntaxError, ValueError) as exc:
        raise ReplayError("your local file %s does not parse: %s" % (local, exc)) from None
    node, why = find_local(tree, info, list(cap.get("parameters") or []))
    if node is None:
        whys.append("%s has %s" % (local, why))
        raise NoLocalSource("; ".join(whys))
    name, package, _ = local_module(local, roots)
    fn, notes = compile_local(local, node, tree, info, data, refs, name, package)
    kind = "lambda" if isinstance(node, ast.Lambda) else "def"
    return (
        fn,
        "using %s (a %s) from %s:%d (your local source)"
        % (info.get("qualname"), kind, local, node.lineno),
        notes,
    )


def import_roots(cap):
    """Where the job's own imports are found here: the directory of the
    captured function's local file (as `python script.py` puts the script's
    directory first; for a module of a package, the directory above the
    package), then the local roots the proxy maps the executor's code to
    (serve --root: the local counterparts of the job's --py-files). Both
    are the proxy's mapping, never a path the executor named."""
    out = []
    local = cap.get("localFile") or ""
    if local and os.path.isfile(local):
        out.append(local_module(local, cap.get("localRoots") or [])[2])
    for r in cap.get("localRoots") or []:
        if isinstance(r, str) and os.path.isabs(r) and os.path.isdir(r):
            out.append(r)
    seen, uniq = set(), []
    for d in out:
        d = os.path.normpath(d)
        if d not in seen:
            seen.add(d)
            uniq.append(d)
    return uniq


def set_import_path(cap):
    """sys.path as the job had it: import_roots first, in place of this
    script's own (temporary) directory."""
    own = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if not (p and os.path.realpath(p) == own)]
    roots = import_roots(cap)
    sys.path[:] = roots + [p for p in rest if p not in roots]
    importlib.invalidate_caches()
