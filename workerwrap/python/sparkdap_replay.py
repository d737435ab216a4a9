# `sparkdap replay CAPTURE` (issue 17): runs a captured call in the
# developer's Python. `sparkdap replay` writes this file next to nothing and
# runs it as `python sparkdap_replay.py CAPTURE [--force]
# [--trust-captured-code] [--debug HOST:PORT]`; it is a plain module so that
# it can be tested on its own.
#
# The capture comes from the cluster, which is not trusted (SECURITY.md):
# an admitted executor can be hostile, and unpickling what it sent could
# run any code on this machine. So replay never runs code the cluster chose
# unless the developer says --trust-captured-code:
#   - the call's DATA (arguments, closure values, plain-data globals) is
#     unpickled by RestrictedUnpickler, which loads only the classes and
#     functions in ALLOWED (containers, datetime, decimal, numpy, pandas,
#     pyarrow, Row) and refuses any other global by name;
#   - the function comes from the developer's own source: imported from
#     their local module when it was pickled by reference (a module outside
#     the standard library and site-packages), else compiled from the local
#     file the proxy mapped its executor path to (a top-level def, a nested
#     def or a lambda, found by its qualified name and nearest line), with
#     the file's imports and defs but none of its other statements (running
#     the script would start the Spark job);
#   - with no local source it refuses, and the captured CODE (the pickled
#     function) is unpickled only with --trust-captured-code.
#
# Exit status: 0 the call returned, 1 it raised, 2 the capture cannot be
# replayed (the reason is printed).

import argparse
import ast
import base64
import builtins
import importlib
import importlib.util
import io
import json
import keyword
import os
import pickle
import stat
import sys
import sysconfig
import traceback
import types

FORMAT = "sparkdap-capture/2"

TRUST_FLAG = "--trust-captured-code"


class ReplayError(Exception):
    pass


class NoLocalSource(ReplayError):
    """The function has no local source: only the captured code could run
    it."""


def _names(module, *names):
    return [(module, n) for n in names]


# ALLOWED is every (module, name) the DATA unpickler loads: what pickling
# realistic PySpark values (Python scalars and containers, datetime,
# Decimal, numpy arrays and scalars, pandas frames, series, indexes and
# extension arrays, pyarrow arrays, batches and tables, Row) with the
# cloudpickle of PySpark 3.5 and 4 references, under numpy 1 and 2 and
# pandas 2 and 3 (tests/test_capture.py checks it round-trips them). Each
# is a value type or a function that only rebuilds one from its parts: none
# reads files, imports, evaluates or calls something it is given.
ALLOWED = frozenset(
    _names("builtins", "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list", "object", "range", "set", "slice", "str", "tuple")
    + _names("collections", "Counter", "OrderedDict", "defaultdict", "deque")
    # Rebuilds an instance of an allowed class (Row without field names).
    + _names("copyreg", "_reconstructor")
    + _names("datetime", "date", "datetime", "time", "timedelta", "timezone")
    + _names("decimal", "Decimal")
    + _names("uuid", "UUID")
    + _names("numpy", "dtype", "ndarray")
    + _names("numpy.core.multiarray", "_reconstruct", "scalar")
    + _names("numpy._core.multiarray", "_reconstruct", "scalar")
    + _names("numpy.core.numeric", "_frombuffer")
    + _names("numpy._core.numeric", "_frombuffer")
    # pandas 3 pickles its public names; pandas 2 (and 1) the defining modules.
    + _names(
        "pandas",
        "ArrowDtype",
        "BooleanDtype",
        "Categorical",
        "CategoricalDtype",
        "CategoricalIndex",
        "DataFrame",
        "DatetimeIndex",
        "DatetimeTZDtype",
        "Float32Dtype",
        "Float64Dtype",
        "Index",
        "Int8Dtype",
        "Int16Dtype",
        "Int32Dtype",
        "Int64Dtype",
        "IntervalDtype",
        "IntervalIndex",
        "MultiIndex",
        "NA",
        "Period",
        "PeriodDtype",
        "PeriodIndex",
        "RangeIndex",
        "Series",
        "StringDtype",
        "TimedeltaIndex",
        "UInt8Dtype",
        "UInt16Dtype",
        "UInt32Dtype",
        "UInt64Dtype",
    )
    + _names(
        "pandas.arrays",
        "ArrowExtensionArray",
        "ArrowStringArray",
        "BooleanArray",
        "Categorical",
        "DatetimeArray",
        "FloatingArray",
        "IntegerArray",
        "IntervalArray",
        "PeriodArray",
        "StringArray",
        "TimedeltaArray",
    )
    + _names("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked")
    + _names("pandas._libs.internals", "_unpickle_block")
    + _names("pandas._libs.interval", "__pyx_unpickle_IntervalMixin", "Interval")
    + _names("pandas._libs.missing", "NA")
    + _names("pandas._libs.tslibs.nattype", "_nat_unpickle", "__nat_unpickle")
    + _names("pandas._libs.tslibs.timedeltas", "_timedelta_unpickle")
    + _names("pandas._libs.tslibs.timestamps", "_unpickle_timestamp")
    + _names("pandas._libs.tslibs.period", "Period")
    + _names(
        "pandas._libs.tslibs.offsets",
        "Day",
        "Hour",
        "Minute",
        "Second",
        "Milli",
        "Micro",
        "Nano",
        "Week",
        "MonthEnd",
        "MonthBegin",
        "QuarterEnd",
        "QuarterBegin",
        "YearEnd",
        "YearBegin",
        "BusinessDay",
    )
    + _names("pandas.core.arrays.arrow.array", "ArrowExtensionArray")
    + _names("pandas.core.arrays.boolean", "BooleanArray", "BooleanDtype")
    + _names("pandas.core.arrays.categorical", "Categorical")
    + _names("pandas.core.arrays.datetimes", "DatetimeArray")
    + _names("pandas.core.arrays.floating", "FloatingArray", "Float32Dtype", "Float64Dtype")
    + _names("pandas.core.arrays.integer", "IntegerArray", "Int8Dtype", "Int16Dtype", "Int32Dtype", "Int64Dtype", "UInt8Dtype", "UInt16Dtype", "UInt32Dtype", "UInt64Dtype")
    + _names("pandas.core.arrays.interval", "IntervalArray")
    + _names("pandas.core.arrays.period", "PeriodArray")
    + _names("pandas.core.arrays.string_", "StringArray", "StringDtype")
    + _names("pandas.core.arrays.string_arrow", "ArrowStringArray")
    + _names("pandas.core.arrays.timedeltas", "TimedeltaArray")
    + _names("pandas.core.dtypes.dtypes", "ArrowDtype", "CategoricalDtype", "DatetimeTZDtype", "IntervalDtype", "PeriodDtype")
    + _names("pandas.core.frame", "DataFrame")
    + _names("pandas.core.series", "Series")
    + _names("pandas.core.indexes.base", "Index", "_new_Index")
    + _names("pandas.core.indexes.category", "CategoricalIndex")
    + _names("pandas.core.indexes.datetimes", "DatetimeIndex", "_new_DatetimeIndex")
    + _names("pandas.core.indexes.interval", "IntervalIndex", "_new_IntervalIndex")
    + _names("pandas.core.indexes.multi", "MultiIndex")
    + _names("pandas.core.indexes.numeric", "Int64Index", "UInt64Index", "Float64Index")
    + _names("pandas.core.indexes.period", "PeriodIndex", "_new_PeriodIndex")
    + _names("pandas.core.indexes.range", "RangeIndex")
    + _names("pandas.core.indexes.timedeltas", "TimedeltaIndex", "_new_TimedeltaIndex")
    + _names("pandas.core.internals.blocks", "new_block", "Block", "ObjectBlock", "NumericBlock", "DatetimeTZBlock", "ExtensionBlock")
    + _names("pandas.core.internals.managers", "BlockManager", "SingleBlockManager")
    + _names(
        "pyarrow.lib",
        "_reconstruct_record_batch",
        "_reconstruct_table",
        "_restore_array",
        "chunked_array",
        "py_buffer",
        "scalar",
        "schema",
        "field",
        "type_for_alias",
        "binary",
        "large_binary",
        "string",
        "large_string",
        "decimal128",
        "decimal256",
        "dictionary",
        "list_",
        "large_list",
        "map_",
        "struct",
        "timestamp",
        "time32",
        "time64",
        "duration",
        "date32",
        "date64",
        "KeyValueMetadata",
    )
    + _names("pyspark.sql.types", "Row", "_create_row")
)


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles the capture's DATA, loading no global outside ALLOWED: a
    pickle calls whatever globals it names, so one naming os.system,
    builtins.eval or a cloudpickled function would run code the cluster
    chose. The check is on the exact (module, name) pair, so a dotted name
    (protocol 4's attribute path) cannot reach past an allowed one."""

    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise ReplayError(
                "the capture's data names %s.%s, which replay does not load from a capture: unpickling it could run code the cluster chose "
                "(if you trust the cluster that made the capture, %s loads it)" % (module, name, TRUST_FLAG)
            )
        return super().find_class(module, name)


def load(path):
    with open(path, "r", encoding="utf-8") as f:
        cap = json.load(f)
    if not isinstance(cap, dict) or cap.get("format") != FORMAT:
        raise ReplayError("%s is not a sparkdap capture this replay reads (format %r, want %r)" % (path, cap.get("format") if isinstance(cap, dict) else None, FORMAT))
    # The executor wrote most of it: check the shapes replay relies on.
    info = cap.get("function")
    ok = isinstance(info, dict) and isinstance(info.get("firstLine", 0), int) and isinstance(info.get("qualname", ""), str)
    ok = ok and all(isinstance(v, str) for v in info.get("freeVars") or [])
    ok = ok and isinstance(cap.get("references", {}), dict) and all(isinstance(p, str) for p in cap.get("parameters") or [])
    ok = ok and isinstance(cap.get("data", ""), str) and isinstance(cap.get("code", ""), str) and isinstance(cap.get("localFile", ""), str)
    imp = info.get("importable") if isinstance(info, dict) else None
    ok = ok and (imp is None or (isinstance(imp, dict) and isinstance(imp.get("module"), str) and isinstance(imp.get("qualname"), str)))
    if not ok:
        raise ReplayError("%s is not a well-formed sparkdap capture" % path)
    return cap


def check_python(cap, force):
    want = cap.get("versions", {}).get("python", "")
    have = "%d.%d" % sys.version_info[:2]
    if ".".join(want.split(".")[:2]) != have:
        msg = "the capture was made by Python %s and this is Python %s: pickled code and data need the same major.minor" % (want, sys.version.split()[0])
        if not force:
            raise ReplayError(msg + " (run replay with that Python, --python, or --force to try anyway)")
        return "warning: " + msg
    return None


def _unpickle(raw, trusted):
    try:
        if trusted:
            return pickle.loads(raw)
        return RestrictedUnpickler(io.BytesIO(raw)).load()
    except ModuleNotFoundError as exc:
        raise ReplayError("unpickling the capture needs module %r here (pip install it, or put your code on PYTHONPATH)" % exc.name) from None
    except ReplayError:
        raise
    except Exception as exc:
        raise ReplayError("the capture's data cannot be unpickled: %s: %s" % (type(exc).__name__, exc)) from None


def load_data(cap, trusted=False):
    """The call's arguments, closure values and data globals."""
    data = _unpickle(base64.b64decode(cap.get("data", "")), trusted)
    if not isinstance(data, dict) or not isinstance(data.get("args"), list) or not isinstance(data.get("kwargs"), dict):
        raise ReplayError("the capture's data is not a call's arguments")
    return data


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
    """The function named by {"module", "qualname"} from the developer's
    own module (not the standard library, not site-packages: importing runs
    the module, and the cluster chose its name). Returns (fn, file) or
    (None, why)."""
    mod_name, qual = imp.get("module") or "", imp.get("qualname") or ""
    parts = mod_name.split(".")
    if not all(p.isidentifier() for p in parts) or not all(q.isidentifier() for q in qual.split(".")):
        return None, "%r / %r is not a module and function name" % (mod_name, qual)
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: imports nothing
    except (ImportError, ValueError):
        spec = None
    origin = getattr(spec, "origin", None) if spec else None
    if spec is None or not origin:
        return None, "module %s is not importable here" % mod_name
    if origin in ("built-in", "frozen") or _under(origin, _system_dirs()):
        return None, "module %s here is %s, in the standard library or site-packages, not your source" % (mod_name, origin)
    if _under(origin, {os.path.dirname(os.path.realpath(__file__))}):
        # sparkdap's own Python (this file's main would replay any file).
        return None, "module %s here is %s, sparkdap's own code, not your source" % (mod_name, origin)
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
        comp = {ast.ListComp: "<listcomp>", ast.SetComp: "<setcomp>", ast.DictComp: "<dictcomp>", ast.GeneratorExp: "<genexpr>"}.get(type(node))
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
            "%d functions in your local file match %s (parameters %s) equally near the captured line %d (lines %s): "
            "replay cannot tell which one ran; give one of them a name of its own (a def)"
            % (len(tied), qual, ", ".join(params) or "none", want, ", ".join(str(_first_line(n)) for n in tied))
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
        consts = tuple(refile(c, level + 1) if isinstance(c, types.CodeType) else c for c in code.co_consts)
        return code.replace(co_filename=path if level >= depth else _GENERATED, co_consts=consts)

    return refile(compile(mod, path, "exec"), 0)


def _local_namespace(path, tree, target):
    """The globals the local function runs with: the file's top-level
    imports (also in a try that only imports), defs and classes (their
    decorators kept; the target's own top-level def is compiled apart), and
    nothing else of the file: running its other statements would start the
    Spark job. Returns (ns, notes)."""
    ns = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
    notes = []
    for node in tree.body:
        if node is target:
            continue
        # A try whose body only imports is an import with a fallback.
        guarded = isinstance(node, ast.Try) and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body)
        if guarded or isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            try:
                exec(_compile_functions_as(ast.Module(body=[node], type_ignores=[]), path, 1), ns)
            except Exception as exc:  # one the replayed call may not need
                notes.append("%s line %d failed here (%s: %s); the call fails if it needs it" % (os.path.basename(path), node.lineno, type(exc).__name__, exc))
    return ns, notes


def compile_local(path, node, tree, info, data, refs):
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
            raise ReplayError("the capture names a free variable %r, which is no Python name" % (v,))
        if v == own and v not in closure:
            closure[v] = None  # the def below binds it, in the outer function
        if v not in closure:
            what = refs.get(v, "not captured")
            raise NoLocalSource("its closure variable %r is %s, and replay rebuilds a closure from captured data only" % (v, what))
    ns, notes = _local_namespace(path, tree, node)
    for name, value in (data.get("globals") or {}).items():
        ns.setdefault(name, value)
    for name, ref in sorted(refs.items()):
        if name not in ns and name not in free and name not in vars(builtins):
            notes.append("global %r (%s on the executor) is not defined by %s's top-level imports and defs: the call fails if it uses it" % (name, ref, os.path.basename(path)))
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


def local_function(cap, data):
    """The function to run, from the developer's own source, and a line
    saying which one it is; NoLocalSource when there is none."""
    info = cap.get("function", {})
    refs = cap.get("references") or {}
    whys = []
    imp = info.get("importable")
    if imp:
        fn, where = _import_local(imp)
        if fn is not None:
            if info.get("freeVars"):
                raise ReplayError("%s.%s is importable but the capture says it has a closure" % (imp.get("module"), imp.get("qualname")))
            return fn, "using %s from %s (imported from your local module %s)" % (imp.get("qualname"), where, imp.get("module")), []
        whys.append(where)
    local = cap.get("localFile") or ""
    if not local:
        whys.append("its file %s is not mapped to a local file (serve --root, --map)" % info.get("file", "?"))
        raise NoLocalSource("; ".join(whys))
    bad = _regular_py(local)
    if bad:
        whys.append(bad)
        raise NoLocalSource("; ".join(whys))
    with open(local, "r", encoding="utf-8") as f:
        src = f.read()
    try:
        tree = ast.parse(src, filename=local)
    except SyntaxError as exc:
        raise ReplayError("your local file %s does not parse: %s" % (local, exc)) from None
    node, why = find_local(tree, info, list(cap.get("parameters") or []))
    if node is None:
        whys.append("%s has %s" % (local, why))
        raise NoLocalSource("; ".join(whys))
    fn, notes = compile_local(local, node, tree, info, data, refs)
    kind = "lambda" if isinstance(node, ast.Lambda) else "def"
    return fn, "using %s (a %s) from %s:%d (your local source)" % (info.get("qualname"), kind, local, node.lineno), notes


def run(cap, force=False, trust=False, out=None):
    """Replays the call; returns the exit status."""
    out = out or sys.stdout
    notes = []
    try:
        warn = check_python(cap, force)
        if warn:
            out.write(warn + "\n")
        data = load_data(cap, trust)
        try:
            fn, which, notes = local_function(cap, data)
        except NoLocalSource as exc:
            if not trust:
                raise ReplayError(
                    "no local source for %s (%s): running it would take its code from the capture, that is from the cluster; "
                    "map its file to your copy (serve --root / --map), or if you trust the cluster that made the capture, pass %s"
                    % (cap.get("function", {}).get("qualname"), exc, TRUST_FLAG)
                ) from None
            out.write("warning: %s: running the captured function, code from the cluster (%s)\n" % (TRUST_FLAG, exc))
            fn = _unpickle(base64.b64decode(cap.get("code", "")), True)
            which = "using the captured %s" % cap.get("function", {}).get("qualname")
    except ReplayError as exc:
        out.write("sparkdap replay: %s\n" % exc)
        return 2
    if trust:
        out.write("warning: %s: the capture's data was unpickled without the allowlist\n" % TRUST_FLAG)
    args = list(data["args"])
    it = data.get("iterator_arg")
    if it is not None:
        args[it] = iter(args[it])
    out.write("sparkdap replay: %s\n" % which)
    for n in notes:
        out.write("sparkdap replay: note: %s\n" % n)
    out.flush()
    try:
        result = fn(*args, **data["kwargs"])
        if info_is_generator(cap) or (hasattr(result, "__next__") and hasattr(result, "__iter__")):
            result = list(result)
    except BaseException as exc:  # the user's exception is the answer
        out.write("sparkdap replay: raised %s: %s\n" % (type(exc).__name__, exc))
        out.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return 1
    out.write("sparkdap replay: returned %s\n" % (result if _is_frame(result) else repr(result),))
    return 0


def info_is_generator(cap):
    return bool(cap.get("function", {}).get("isGenerator"))


def _is_frame(v):
    return (type(v).__module__ or "").split(".")[0] == "pandas"


def main(argv):
    ap = argparse.ArgumentParser(prog="sparkdap replay")
    ap.add_argument("capture")
    ap.add_argument("--force", action="store_true")
    ap.add_argument(TRUST_FLAG, dest="trust", action="store_true")
    ap.add_argument("--debug", metavar="HOST:PORT")
    a = ap.parse_args(argv)
    try:
        cap = load(a.capture)
    except (OSError, ValueError, ReplayError) as exc:
        sys.stdout.write("sparkdap replay: %s\n" % exc)
        return 2
    if a.debug:
        host, _, port = a.debug.rpartition(":")
        try:
            import debugpy
        except ImportError:
            sys.stdout.write("sparkdap replay: --debug needs debugpy in this Python (%s): pip install debugpy\n" % sys.executable)
            return 2
        debugpy.listen((host or "127.0.0.1", int(port)))
        sys.stdout.write("sparkdap replay: waiting for a debugger to attach to %s:%s\n" % (host or "127.0.0.1", port))
        sys.stdout.flush()
        debugpy.wait_for_client()
    return run(cap, a.force, a.trust)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
