"""The executor's backoff: once a worker found the proxy silent, the daemon's
other and later workers skip it for a while instead of each waiting out the
timeouts again."""

import os

from .state import _describe, _say
from .config import _DEFAULT_PROXY_BACKOFF

#
# A proxy that vanished without closing anything (serve stopped with
# SIGSTOP, a laptop lid closed, a VPN dropping packets) still lets the TCP
# connect through, or lets it hang: each worker that starts a selected task
# then waits connect_timeout or handshake_timeout before it runs undebugged,
# and with spark.python.worker.reuse=false that is every task. So the first
# worker to find the proxy silent (a timeout, or a lease that lapsed) leaves
# a marker in a directory the daemon made before it forked any worker;
# workers that start while the marker is fresh do not try. Failures that
# come at once (connection refused, a refused hello, another token) leave
# none: they cost nothing, and a user who starts serve after the job gets
# debugging with the next task. A proxy that answers a hello clears it. How
# long a marker holds is cfg["proxy_backoff"] (--proxy-backoff). The marker
# is advice: any error reading or writing it means the worker tries the
# proxy as it would without one.

# The marker's name in the daemon's directory; writers stage it beside it.
_MARKER = "proxy-silent"

# The daemon's private directory for the marker: made in the daemon before
# it forks (_open_backoff), so every worker it forks inherits the path.
# None without one (no daemon, or mkdtemp failed): every worker tries.
_backoff_dir = None
_backoff_owner = None  # the pid that made _backoff_dir, the one to remove it


def _open_backoff():
    """Makes the daemon's private directory for the marker. Runs in the
    daemon before it forks; never raises (without it, no backoff)."""
    global _backoff_dir, _backoff_owner
    if _backoff_dir is not None:
        return
    try:
        import tempfile

        _backoff_dir = tempfile.mkdtemp(prefix="sparkdap-backoff-")
        _backoff_owner = os.getpid()
    except Exception as exc:
        _say(
            "no backoff for this executor (%s): every worker tries a silent proxy on its own"
            % (_describe(exc),)
        )


def _close_backoff():
    """Removes the daemon's directory as the daemon exits; a worker forked
    from it leaves it alone."""
    global _backoff_dir
    if _backoff_dir is None or _backoff_owner != os.getpid():
        return
    try:
        import shutil

        shutil.rmtree(_backoff_dir, ignore_errors=True)
    except Exception:
        pass
    _backoff_dir = None


class _Backoff:
    """The marker in directory `path`: where the proxy was found silent,
    and when, on `clock`. time.monotonic is one clock for every process of
    the machine (CLOCK_MONOTONIC), and unlike the wall clock it does not
    jump. Every method raises on an error; the callers below fail open."""

    def __init__(self, path, seconds, clock=None):
        import time

        self.path = path
        self.seconds = seconds
        self.clock = clock or time.monotonic

    def _check_dir(self):
        # The daemon made it private to this user; a path that is anything
        # else now is none of ours to read or write.
        import stat

        info = os.lstat(self.path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise OSError("%s is not a private directory" % (self.path,))

    def record(self, proxy):
        """Marks proxy ("host:port") silent as of now. The marker is staged
        in a file of its own, never through a symlink, and renamed over
        the old one, so a reader sees a whole marker or none."""
        import binascii
        import json

        self._check_dir()
        data = json.dumps({"proxy": proxy, "at": self.clock()}).encode("utf-8")
        staged = os.path.join(
            self.path,
            "%s.%d.%s" % (_MARKER, os.getpid(), binascii.hexlify(os.urandom(8)).decode("ascii")),
        )
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(staged, os.path.join(self.path, _MARKER))
        except BaseException:
            try:
                os.unlink(staged)
            except OSError:
                pass
            raise

    def clear(self):
        """The proxy answered: the next worker tries it."""
        self._check_dir()
        try:
            os.unlink(os.path.join(self.path, _MARKER))
        except FileNotFoundError:
            pass

    def fresh(self, proxy):
        """(ago, left) in seconds if a worker found proxy silent less than
        `seconds` ago, else None. A missing, unreadable, malformed or
        symlinked marker, or one for another proxy, is none."""
        import json
        import math
        import stat

        self._check_dir()
        try:
            # O_NONBLOCK: opening a FIFO planted there must not block.
            fd = os.open(
                os.path.join(self.path, _MARKER), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            )
        except FileNotFoundError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.read(fd, 4097)
        finally:
            os.close(fd)
        if len(data) > 4096:
            return None
        marker = json.loads(data.decode("utf-8"))
        if not isinstance(marker, dict) or marker.get("proxy") != proxy:
            return None
        at = marker.get("at")
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            return None
        ago = self.clock() - at
        if not (math.isfinite(ago) and 0 <= ago < self.seconds):
            return None
        return ago, self.seconds - ago


def _backoff(cfg, clock=None):
    """The marker for cfg's backoff, or None without a daemon directory or
    with the backoff off (cfg["proxy_backoff"] 0, --proxy-backoff)."""
    seconds = cfg.get("proxy_backoff", _DEFAULT_PROXY_BACKOFF)
    if _backoff_dir is None or not seconds or seconds <= 0:
        return None
    return _Backoff(_backoff_dir, seconds, clock)


def _proxy_name(cfg):
    host, port = cfg["proxy"]
    return "%s:%d" % (host, port)


def _skip_reason(cfg, clock=None):
    """Why this worker should not try the proxy now: another worker of the
    executor found it silent a moment ago; None to try it. Never raises."""
    try:
        backoff = _backoff(cfg, clock)
        if backoff is None:
            return None
        where = _proxy_name(cfg)
        found = backoff.fresh(where)
        if found is None:
            return None
        ago, left = found
        return (
            "another worker of this executor found proxy %s silent %ds ago; retrying after %ds"
            % (where, int(ago), int(left + 0.999))
        )
    except Exception:
        return None


def _proxy_silent(cfg, clock=None):
    """Records that this worker found the proxy silent, for the daemon's
    other workers. Returns the words to add to the worker's line ("" if
    nothing was recorded). Never raises."""
    backoff = None
    try:
        backoff = _backoff(cfg, clock)
        if backoff is None:
            return ""
        backoff.record(_proxy_name(cfg))
        return "; this executor's other workers skip it for %gs" % (backoff.seconds,)
    except Exception as exc:
        _say(
            "cannot tell this executor's other workers that the proxy is silent (%s); each tries "
            "it on its own" % (_describe(exc),)
        )
        return ""


def _proxy_heard(cfg):
    """The proxy answered this worker: the others need not skip it. Never
    raises."""
    try:
        backoff = _backoff(cfg)
        if backoff is not None:
            backoff.clear()
    except Exception:
        pass
