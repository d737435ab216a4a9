"""`sparkdap doctor`'s test worker."""

import os
import sys

from .hello import (
    _hello_accepted,
    _hello_with_retries,
    _HelloClosed,
    _NoHelloReply,
    _ProxyUnproven,
)


class _Unreachable(Exception):
    """The executor port could not be connected to."""


_PROBE_FLAG = "--sparkdap-probe"
_PROBE_TIMEOUT = 10.0


def _probe(host, port, stdin, out):
    """The worker side of `sparkdap doctor`'s test connection: the hello a
    worker sends, then debugpy.connect, then it stays connected until stdin
    closes. The token is stdin's first line, never on a command line. Each
    outcome is one line on out that doctor reads: UNREACHABLE, NOHELLO,
    UNPROVEN, REFUSED, NODEBUGPY or CONNECTED <pid>, after ADMITTED once
    the hello is accepted. Returns the exit status."""
    import socket

    def say(line):
        out.write(line + "\n")
        out.flush()

    token = stdin.readline().strip()
    body = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "executorId": "doctor",
        "label": "sparkdap doctor test connection",
        "roots": {"cwd": os.getcwd(), "sysPath": []},
    }

    def connect():
        try:
            return socket.create_connection((host, port), timeout=_PROBE_TIMEOUT)
        except OSError as exc:
            raise _Unreachable(exc) from None

    try:
        reply, pydevd_token = _hello_with_retries(
            connect, token, body, _PROBE_TIMEOUT, _PROBE_TIMEOUT
        )
    except _Unreachable as exc:
        say("UNREACHABLE %s:%d: %s" % (host, port, exc.args[0]))
        return 3
    except _ProxyUnproven:
        say(
            "UNPROVEN whatever listens on %s:%d did not prove it knows the token: not sparkdap "
            "serve, or another token" % (host, port)
        )
        return 3
    except _NoHelloReply:
        say(
            "NOHELLO proxy accepted the connection but did not answer the hello within %gs"
            % (_PROBE_TIMEOUT,)
        )
        return 3
    except _HelloClosed as exc:
        say(
            "NOHELLO proxy closed the connection without answering the hello (it sent %d bytes: %r)"
            % (len(exc.received), exc.received[:120])
        )
        return 3
    except OSError as exc:
        say("NOHELLO proxy reset the connection before answering the hello: %s" % (exc,))
        return 3
    accepted, detail = _hello_accepted(reply)
    if not accepted:
        say("REFUSED " + detail)
        return 3
    say("ADMITTED")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    os.environ.setdefault("PYDEVD_CONNECT_TIMEOUT", "%d" % _PROBE_TIMEOUT)
    try:
        import debugpy
    except ImportError as exc:
        say("NODEBUGPY %s: %s" % (sys.executable, exc))
        return 3
    debugpy.connect((host, port), access_token=pydevd_token)
    say("CONNECTED %d" % os.getpid())
    stdin.read()
    return 0
