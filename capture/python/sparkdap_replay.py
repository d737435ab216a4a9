# `sparkdap replay CAPTURE`: runs a captured call in the developer's
# Python. `sparkdap replay` writes this file and the modules it imports
# into a directory of their own and runs it as `python
# sparkdap_replay.py CAPTURE [--force] [--trust-captured-code]
# [--raw-output] [--debug HOST:PORT] [--max-memory SIZE]`; they are plain
# modules so that they can be tested on their own. By role:
#   - sparkdap_replay_data.py: decoding the capture (the header's shapes,
#     DATA's tagged JSON, CODE only with --trust-captured-code);
#   - sparkdap_replay_columnar.py: DATA's Arrow IPC and .npy values;
#   - sparkdap_replay_budget.py: ReplayError and the memory budget;
#   - sparkdap_replay_source.py: setting up the call (which local function,
#     its namespace, sys.path);
#   - this file: running it, and printing every line replay prints.
#
# The capture comes from the cluster, which is not trusted (SECURITY.md):
# an admitted executor can be hostile, and unpickling what it sent could
# run any code on this machine, or (numpy's and pandas' C reconstructors
# given hostile state) read and call memory it chose; no allowlist of
# globals makes pickle safe. So replay unpickles no byte of the capture
# unless the developer says --trust-captured-code:
#   - the call's DATA (arguments, closure values, plain-data globals) is
#     tagged JSON, decoded by Decoder: Python scalars and containers,
#     datetime, Decimal, UUID, Row, numpy arrays as .npy without pickles,
#     pandas and pyarrow values as Arrow IPC; a value of another type is a
#     placeholder, refused with its name and type (a global: left out,
#     with a note);
#   - the function comes from the developer's own source, decided on this
#     machine: the local file the proxy mapped its executor path to
#     (localFile, which must lie under the proxy's localRoots), never a
#     module the capture names. In that file replay finds the def or
#     lambda by its qualified name and nearest line, and runs only the
#     file's top-level imports (also in a try that only imports), defs and
#     classes (their decorators included), in that order, then the def
#     itself; no other statement runs (a driver script's would start the
#     Spark job), whether or not the file has a __main__ guard. Names the
#     function reads that those statements do not define come from the
#     captured plain-data globals. The file runs as the module its place
#     says: in a package (an __init__.py in its directory, and so on up to
#     a local root) as pkg.mod, so its relative imports resolve (importing
#     pkg runs pkg/__init__.py, as any import of it would); otherwise as
#     "__main__". What the file imports is imported normally: those are
#     the developer's own import statements;
#   - with no local source it refuses, and the captured CODE (the pickled
#     function) is unpickled only with --trust-captured-code (which also
#     imports the module the capture names, when the function was pickled
#     by reference, before it falls back to the local file).
#
# Everything replay prints goes through Printer: the header's fields, a
# placeholder's name and type, the returned value's text and an
# exception's message and traceback hold bytes the cluster chose, so
# their control characters (escape sequences, carriage returns, bidi
# controls, newlines) are printed as visible escapes; a value of several
# lines (a DataFrame) has its further lines indented, so none can pass for
# a line of replay's. --raw-output prints them as they are. What the
# developer's function prints itself is not replay's and passes as is.
#
# The job's imports resolve as on the executor: sys.path starts with the
# local file's directory (for a package module, the directory above the
# package) and the proxy's local roots (import_roots), not with the
# temporary directory this file runs from. Under --debug pydevd is told
# not to trace replay's files (hide_from_debugger): the developer's
# debugger shows and steps only their code.
#
# The sizes the capture declares (Arrow lengths, .npy shapes, JSON
# containers) are the executor's too: each value is charged to a memory
# budget before it is built (--max-memory, default
# sparkdap_replay_budget.default_budget of the file's size), and one over it
# is refused on one line on stderr.
#
# Exit status: 0 the call returned, 1 it raised, 2 the capture cannot be
# replayed, the reason on one line: a refusal, a capture that is
# malformed in any way, or a value over the memory budget (never a
# traceback, never the status of a raise).

import argparse
import os
import sys
import traceback

from sparkdap_replay_data import (  # noqa: F401 (the tests' names)
    FORMAT,
    MAX_MEMORY_FLAG,
    TRUST_FLAG,
    Budget,
    Decoder,
    NoLocalSource,
    ReplayError,
    TooLarge,
    default_budget,
    human,
    load,
    load_code,
    load_data,
    parse_size,
    unpickle,
)
from sparkdap_replay_source import local_function, set_import_path

# Characters of cluster bytes that never reach the terminal as such: C0
# controls (newline and tab too: a value is one line), DEL, C1 controls,
# bidi overrides, isolates and marks, line and paragraph separators, and
# lone surrogates (which the terminal's encoding would fail on). Each
# becomes a visible escape, as Python writes it in a repr.
_UNSAFE = (
    list(range(0x20))
    + list(range(0x7F, 0xA0))
    + [0x61C, 0x200E, 0x200F, 0x2028, 0x2029]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
    + list(range(0xD800, 0xE000))
)
_ESCAPES = {
    c: {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(c)
    or ("\\x%02x" % c if c <= 0xFF else "\\u%04x" % c)
    for c in _UNSAFE
}


def clean(text):
    """text with every character in _UNSAFE escaped: it can neither move
    the cursor, set a title, write the clipboard nor start a line."""
    return str(text).translate(_ESCAPES)


class Printer:
    """Every line replay prints goes through here: the header's fields,
    refusals, notes, the returned value's text and the exception's
    message and traceback all hold bytes the cluster chose. raw (the
    --raw-output flag) prints them as they are."""

    def __init__(self, out, raw=False):
        self.out = out
        self.raw = raw

    def line(self, text):
        """One line: a newline in text is escaped, not a line break."""
        self.out.write((text if self.raw else clean(text)) + "\n")

    def block(self, prefix, text):
        """A value that may span lines (a DataFrame's table): its first
        line after prefix, the others indented by four spaces, so that
        none of them can pass for a line of replay's own."""
        if self.raw:
            self.out.write(prefix + text + "\n")
            return
        first, *rest = str(text).split("\n")
        self.out.write(prefix + clean(first) + "\n")
        for line in rest:
            self.out.write("    " + clean(line) + "\n")

    def flush(self):
        self.out.flush()


def _describe(exc):
    """TYPE: MESSAGE of an exception, even one whose str() fails."""
    try:
        msg = str(exc)
    except Exception:  # the user's __str__ is broken: say so, not crash
        msg = "<str() of the exception failed>"
    name = type(exc).__name__
    return "%s: %s" % (name, msg) if msg else name


def _traceback_lines(exc, seen=None):
    """The lines of exc's traceback, chained ones first, as the
    interpreter prints them, but one line per frame line and per message:
    a frame's file and name (the captured code's, under trust) and the
    message cannot add lines of their own, as they could in
    traceback.format_exception's text."""
    seen = seen if seen is not None else set()
    seen.add(id(exc))
    lines = []
    cause, context = exc.__cause__, exc.__context__
    if cause is not None and id(cause) not in seen:
        lines += _traceback_lines(cause, seen)
        lines += ["", "The above exception was the direct cause of the following exception:", ""]
    elif context is not None and not exc.__suppress_context__ and id(context) not in seen:
        lines += _traceback_lines(context, seen)
        lines += ["", "During handling of the above exception, another exception occurred:", ""]
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        lines.append("Traceback (most recent call last):")
    for fs in frames:
        lines.append('  File "%s", line %s, in %s' % (fs.filename, fs.lineno, fs.name))
        if fs.line:
            lines.append("    " + fs.line.strip())
    lines.append(_describe(exc))
    for note in getattr(exc, "__notes__", None) or []:
        lines.append(str(note))
    return lines


def check_python(cap, force, trust):
    """A warning when the capture was made by another Python major.minor,
    or ReplayError: its pickles (loaded only with TRUST_FLAG) need the same
    one unless forced; the data and your local source do not."""
    want = str(cap.get("versions", {}).get("python", ""))
    have = "%d.%d" % sys.version_info[:2]
    if ".".join(want.split(".")[:2]) == have:
        return None
    msg = "the capture was made by Python %s and this is Python %s" % (want, sys.version.split()[0])
    if not trust:
        return "warning: %s: your function may behave differently here" % msg
    msg += ": the capture's pickles need the same major.minor"
    if not force:
        raise ReplayError(
            msg + " (run replay with that Python, --python, or --force to try anyway)"
        )
    return "warning: " + msg


def _prepare(cap, force, trust, p, budget=None):
    """Everything before the call, decided on this machine: the function
    and its arguments. Returns (fn, args, kwargs) or raises ReplayError."""
    warn = check_python(cap, force, trust)
    if warn:
        p.line(warn)
    code = load_code(cap) if trust else None
    data, unpickled = load_data(cap, code, budget)
    notes = []
    qualname = cap.get("function", {}).get("qualname")
    try:
        fn, which, notes = local_function(cap, data, trust)
    except NoLocalSource as exc:
        if not trust:
            raise ReplayError(
                "no local source for %s (%s): running it would take its code from the "
                "capture, that is from the cluster; "
                "map its file to your copy (serve --root / --map), or if you trust the "
                "cluster that made the capture, pass %s" % (qualname, exc, TRUST_FLAG)
            ) from None
        if code.get("function") is None:
            raise ReplayError(
                "no local source for %s (%s), and the capture holds no pickled function"
                % (qualname, exc)
            ) from None
        p.line(
            "warning: %s: running the captured function, code from the cluster (%s)"
            % (TRUST_FLAG, exc)
        )
        fn = unpickle(code["function"])
        which = "using the captured %s" % qualname
    if unpickled:
        p.line(
            "warning: %s: unpickled %d value(s) of the capture's data, code from the cluster"
            % (TRUST_FLAG, unpickled)
        )
    args = list(data["args"])
    it = data.get("iterator_arg")
    if it is not None:
        args[it] = iter(args[it])
    p.line("sparkdap replay: %s" % which)
    for n in data["left_out"] + notes:
        p.line("sparkdap replay: note: %s" % n)
    return fn, args, data["kwargs"]


def run(cap, force=False, trust=False, out=None, raw_output=False, budget=None):
    """Replays the call; returns the exit status: 0 it returned, 1 it
    raised, 2 the capture could not be replayed (whatever went wrong
    before the call: a malformed capture never looks like the function
    raising). budget bounds the memory its values take built (default:
    default_budget of the capture's size); a value over it is refused on
    one line on stderr."""
    p = Printer(out or sys.stdout, raw_output)
    try:
        fn, args, kwargs = _prepare(cap, force, trust, p, budget)
    except TooLarge as exc:
        p.flush()
        Printer(sys.stderr, raw_output).line("sparkdap replay: %s" % exc)
        return 2
    except ReplayError as exc:
        p.line("sparkdap replay: %s" % exc)
        return 2
    except (Exception, SystemExit) as exc:  # a shape load did not foresee
        p.line("sparkdap replay: the capture could not be replayed: %s" % _describe(exc))
        return 2
    p.flush()
    try:
        result = fn(*args, **kwargs)
        if info_is_generator(cap) or (hasattr(result, "__next__") and hasattr(result, "__iter__")):
            result = list(result)
    except BaseException as exc:  # the user's exception is the answer
        p.line("sparkdap replay: raised %s" % _describe(exc))
        for line in _traceback_lines(exc):
            p.line(line)
        return 1
    try:
        text = str(result) if _is_frame(result) else repr(result)
    except Exception as exc:  # it returned; only its text failed
        text = "a %s, whose text failed: %s" % (type(result).__name__, _describe(exc))
    p.block("sparkdap replay: returned ", text)
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
    ap.add_argument("--raw-output", action="store_true")
    ap.add_argument("--debug", metavar="HOST:PORT")
    ap.add_argument(MAX_MEMORY_FLAG, dest="max_memory", metavar="SIZE")
    a = ap.parse_args(argv)
    p = Printer(sys.stdout, a.raw_output)
    try:
        if a.max_memory is not None:
            budget = Budget(parse_size(a.max_memory))
        else:
            budget = Budget(default_budget(os.path.getsize(a.capture)))
    except ValueError as exc:
        p.line("sparkdap replay: %s: %s" % (MAX_MEMORY_FLAG, exc))
        return 2
    except OSError as exc:
        p.line("sparkdap replay: cannot read %s: %s" % (a.capture, exc.strerror or exc))
        return 2
    try:
        # Reading it takes the file, its text and its parsed header.
        size = os.path.getsize(a.capture)
        budget.charge(3 * size, "the file of %s, read and parsed" % human(size), a.capture)
        cap = load(a.capture)
        set_import_path(cap)
    except TooLarge as exc:
        Printer(sys.stderr, a.raw_output).line("sparkdap replay: %s" % exc)
        return 2
    except OSError as exc:
        p.line("sparkdap replay: cannot read %s: %s" % (a.capture, exc.strerror or exc))
        return 2
    except ReplayError as exc:
        p.line("sparkdap replay: %s" % exc)
        return 2
    except Exception as exc:  # a shape load did not foresee: still no traceback
        p.line(
            "sparkdap replay: %s is not a capture this replay reads: %s"
            % (a.capture, _describe(exc))
        )
        return 2
    if a.debug:
        host, _, port = a.debug.rpartition(":")
        if not port.isdigit():
            p.line("sparkdap replay: --debug wants HOST:PORT, got %r" % a.debug)
            return 2
        try:
            import debugpy
        except ImportError:
            p.line(
                "sparkdap replay: --debug needs debugpy in this Python (%s): pip install debugpy"
                % sys.executable
            )
            return 2
        debugpy.listen((host or "127.0.0.1", int(port)))
        p.line(
            "sparkdap replay: waiting for a debugger to attach to %s:%s"
            % (host or "127.0.0.1", port)
        )
        p.flush()
        hide_from_debugger()
        debugpy.wait_for_client()
    return run(cap, a.force, a.trust, raw_output=a.raw_output, budget=budget)


def hide_from_debugger():
    """Tells pydevd never to trace this file, so that the developer's
    debugger shows and steps only their function: no stop, step or Step
    Out lands in replay's own frames, whatever justMyCode says. It uses
    pydevd's API for files not to trace (the one its
    setDebuggerProperty request sets); when that API is missing, replay's
    frames merely show."""
    try:
        import pydevd
        from _pydevd_bundle.pydevd_api import PyDevdAPI

        py_db = pydevd.get_global_debugger()
        here = os.path.dirname(os.path.abspath(__file__))
        paths = tuple(
            sorted(
                {
                    f(os.path.join(here, name))
                    for f in (os.path.abspath, os.path.realpath)
                    for name in _FILES
                }
            )
        )
        if py_db is not None:
            PyDevdAPI().set_dont_trace_start_end_patterns(py_db, paths, ())
    except Exception:  # another debugpy: its frames show, nothing worse
        pass


# replay's own files, all written beside this one by `sparkdap replay`.
_FILES = (
    "sparkdap_replay.py",
    "sparkdap_replay_budget.py",
    "sparkdap_replay_columnar.py",
    "sparkdap_replay_data.py",
    "sparkdap_replay_source.py",
)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
