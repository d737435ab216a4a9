# `sparkdap replay CAPTURE` (issue 17): runs a captured call in the
# developer's Python. `sparkdap replay` writes this file next to nothing and
# runs it as `python sparkdap_replay.py CAPTURE [--force] [--debug HOST:PORT]`;
# it is a plain module so that it can be tested on its own.
#
# The function run is the developer's local one when there is one, so that
# an edit takes effect without a new capture: a function pickled by
# reference (from an importable module) is imported from the local module
# when the capture is unpickled; a top-level function of the driver script
# (pickled by value) is compiled again from the local file the proxy mapped
# its executor path to, by name, with the script's imports but nothing else
# of it run (running the script would start the Spark job). A lambda, a
# nested function or one with no local file runs as captured.
#
# Exit status: 0 the call returned, 1 it raised, 2 the capture cannot be
# replayed (the reason is printed).

import argparse
import ast
import base64
import json
import pickle
import sys
import traceback

FORMAT = "sparkdap-capture/1"


class ReplayError(Exception):
    pass


def load(path):
    with open(path, "r", encoding="utf-8") as f:
        cap = json.load(f)
    if cap.get("format") != FORMAT:
        raise ReplayError("%s is not a sparkdap capture (format %r, want %r)" % (path, cap.get("format"), FORMAT))
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


def unpickle(cap):
    try:
        return pickle.loads(base64.b64decode(cap["payload"]))
    except ModuleNotFoundError as exc:
        raise ReplayError("unpickling the capture needs module %r here (pip install it, or put your code on PYTHONPATH)" % exc.name) from None


def _local_def(path, name):
    """The top-level def of name in the local file, decorators dropped
    (a @udf would wrap it), and the file's top-level imports."""
    with open(path, "r", encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = None
    imports = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node  # the last definition wins, as when the file runs
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
    return found, imports


def choose_function(cap, fn):
    """The function to run and a line saying which one it is."""
    info = cap.get("function", {})
    local = cap.get("localFile") or ""
    captured_file = info.get("file", "")
    mod = sys.modules.get(getattr(fn, "__module__", None) or "")
    if mod is not None and fn.__module__ != "__main__" and getattr(mod, info.get("name", ""), None) is fn:
        # Pickled by reference: unpickling imported the local module.
        return fn, "using %s from %s (imported from your local module %s)" % (info.get("qualname"), getattr(mod, "__file__", "?"), fn.__module__)
    why = None
    if info.get("isLambda"):
        why = "a lambda"
    elif info.get("hasClosure") or "." in info.get("qualname", ""):
        why = "not a top-level function"
    elif not local:
        why = "its file %s is not mapped to a local file" % captured_file
    if why is None:
        try:
            node, imports = _local_def(local, info["name"])
        except OSError as exc:
            node, why = None, "cannot read %s: %s" % (local, exc)
        if node is not None:
            node.decorator_list = []
            ns = dict(getattr(fn, "__globals__", {}))
            ns.setdefault("__builtins__", __builtins__)
            ns["__name__"] = ns.get("__name__", "__main__")
            for imp in imports:
                try:
                    exec(compile(ast.Module(body=[imp], type_ignores=[]), local, "exec"), ns)
                except Exception:  # an import the replay does not need
                    pass
            exec(compile(ast.Module(body=[node], type_ignores=[]), local, "exec"), ns)
            return ns[info["name"]], "using %s from %s:%d (your local source)" % (info["name"], local, node.lineno)
        if why is None:
            why = "%s has no top-level def %s" % (local, info["name"])
    return fn, "using the captured %s (%s)" % (info.get("qualname"), why)


def run(cap, force=False, out=sys.stdout):
    """Replays the call; returns the exit status."""
    try:
        warn = check_python(cap, force)
        if warn:
            out.write(warn + "\n")
        call = unpickle(cap)
        fn, which = choose_function(cap, call["function"])
    except ReplayError as exc:
        out.write("sparkdap replay: %s\n" % exc)
        return 2
    args = list(call["args"])
    if call.get("iterator_arg") is not None:
        args[call["iterator_arg"]] = iter(args[call["iterator_arg"]])
    out.write("sparkdap replay: %s\n" % which)
    out.flush()
    try:
        result = fn(*args, **call["kwargs"])
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
    return run(cap, a.force)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
