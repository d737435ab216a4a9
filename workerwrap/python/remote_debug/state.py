"""Per worker process state, and the wrapper's one-line messages on stderr."""

import os
import sys


class _State:
    """Per worker process state. A worker is always forked from the daemon
    parent, never from another worker, so state keyed by pid is fresh in each
    worker even though the parent's copy is inherited."""

    def __init__(self, pid):
        self.pid = pid
        self.config = None  # dict once parsed
        self.disabled = False  # config invalid or debugger unusable
        self.debugger = None  # None: not tried, "connected", "failed"
        self.task_key = None  # taskAttemptId of the task being read
        self.selected = False
        self.read_depth = 0
        self.wait_armed = False
        self.tracing = True
        self.prepared = False
        # A selected task whose debugger is not attached yet: (cfg, task).
        # Attaching waits until the task's code is unpickled (see _reader).
        self.pending = None
        self.current_task = None  # the task the debugger was last attached for
        # Source files of the code this worker unpickled for debugged tasks,
        # and the directories among them that no other root names.
        # code_dirs: the current task's first, then the most recent ones.
        self.code_files = set()
        self.code_dirs = []
        self.task_dirs = []  # the directories of the current task's code
        self.sent_dirs = None  # code_dirs as the proxy last heard them
        self.hello_nonce = ""  # PyCharm mode: the accepted hello's nonce
        self.pydevd_token = None  # the accepted hello's one-time pydevd token
        self.hello_nonces = None  # (wn, pn) of the accepted hello: name this worker to the proxy
        # The live selection (selection.py): the proxy's latest, in the keys
        # of cfg that task._selected reads, or None to select by cfg. Set by
        # the watch's thread in one assignment; the value never changes.
        self.live = None
        self.watch = None  # the selection._Watch of this worker process
        self.watch_started = False


_state = _State(None)


def _st():
    global _state
    pid = os.getpid()
    if _state.pid != pid:
        _state = _State(pid)
    return _state


# How many lines _say wrote in this process (forked workers inherit the
# daemon's count: compare, never read as absolute).
_lines_said = [0]


def _said_count():
    return _lines_said[0]


def _say(msg):
    # One line, flushed at once: worker stderr ends up in the executor log
    # interleaved with other workers.
    _lines_said[0] += 1
    try:
        sys.stderr.write("sparkdap: [pid %d] %s\n" % (os.getpid(), msg))
        sys.stderr.flush()
    except Exception:
        pass


def _unavailable(reason):
    st = _st()
    st.debugger = "failed"
    _say("debugger unavailable (%s); task runs undebugged" % reason)


def _describe(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0]) if text else type(exc).__name__
