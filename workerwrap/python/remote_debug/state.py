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


_state = _State(None)


def _st():
    global _state
    pid = os.getpid()
    if _state.pid != pid:
        _state = _State(pid)
    return _state


def _say(msg):
    # One line, flushed at once: worker stderr ends up in the executor log
    # interleaved with other workers.
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
