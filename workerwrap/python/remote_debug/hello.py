"""The hello: before any debugger is loaded, the worker and the proxy prove to
each other that they know the token (admission/challenge.go is the other side)."""

import os

from .state import _st
from .task import _task_body


class _NoHelloReply(Exception):
    """The proxy accepted the connection but did not answer in time."""


_HELLO = b"SPARKDAP/2 "


class _HelloClosed(ConnectionResetError):
    """The proxy closed the connection before it answered the hello."""

    def __init__(self, received):
        ConnectionResetError.__init__(self, "proxy closed the connection without a hello reply")
        self.received = received  # what it sent instead, for diagnostics


class _ProxyUnproven(Exception):
    """Whatever answered on the executor port did not prove it knows the
    token: not the proxy (another program bound the port first), or a proxy
    with another token. The worker says nothing more and loads no debugger."""


def _mac(token, label, wn, pn):
    """HMAC-SHA256(token, label, wn, pn), hex: the hello's proofs and its
    one-time pydevd token (admission/challenge.go computes the same)."""
    import hashlib
    import hmac

    msg = "%s\n%s\n%s" % (label, wn, pn)
    return hmac.new(token.encode("utf-8"), msg.encode("utf-8"), hashlib.sha256).hexdigest()


def _hello_exchange(sock, token, body, timeout, nonces=None, rest=None):
    """The worker's side of the hello (see admission/challenge.go): sends a
    fresh nonce, checks the proxy's proof of the token, and only then sends
    body with the worker's own proof. The token itself never crosses the
    wire. Returns (reply, pydevd_token): the proxy's last line less its
    "SPARKDAP/2 " prefix, and the one-time token the debugger presents
    instead of the real one. The whole exchange is bounded by timeout
    seconds: raises _NoHelloReply past it, _HelloClosed if the proxy closes
    the connection first, _ProxyUnproven if its proof does not hold. A
    nonces list gets this hello's (wn, pn), which name the worker later; a
    rest list gets what the proxy sent after its reply line (a connection
    kept open reads on from there)."""
    import binascii
    import hmac
    import json
    import socket
    import time

    deadline = time.monotonic() + timeout
    buf = [b""]

    def reply_line():
        # The proxy may have sent pydevd's first request before it saw the
        # hello: skip to the next hello line.
        while True:
            data = buf[0]
            mark = data.find(_HELLO)
            end = data.find(b"\n", mark) if mark >= 0 else -1
            if end >= 0:
                buf[0] = data[end + 1 :]
                return data[mark + len(_HELLO) : end].decode("utf-8", "replace")
            left = deadline - time.monotonic()
            if left <= 0 or len(data) > 65536:
                raise _NoHelloReply()
            sock.settimeout(left)
            try:
                chunk = sock.recv(4096)
            except socket.timeout:
                raise _NoHelloReply() from None
            if not chunk:
                raise _HelloClosed(data)
            buf[0] = data + chunk

    token = token or ""
    wn = binascii.hexlify(os.urandom(16)).decode("ascii")
    sock.settimeout(timeout)
    sock.sendall(_HELLO + b"HELLO " + wn.encode("ascii") + b"\n")
    challenge = reply_line()
    if challenge.startswith("REFUSED "):
        return challenge, None
    parts = challenge.split(" ")
    if (
        len(parts) != 3
        or parts[0] != "CHALLENGE"
        or not hmac.compare_digest(
            parts[2].encode("utf-8"), _mac(token, "sparkdap/2 proxy", wn, parts[1]).encode("ascii")
        )
    ):
        raise _ProxyUnproven()
    pn = parts[1]
    if nonces is not None:
        nonces[:] = [wn, pn]
    body = dict(body, proof=_mac(token, "sparkdap/2 worker", wn, pn))
    sock.sendall(_HELLO + json.dumps(body).encode("utf-8") + b"\n")
    reply = reply_line()
    if rest is not None:
        rest[:] = [buf[0]]
    return reply, _mac(token, "sparkdap/2 pydevd", wn, pn)


# At most this many hellos per task: each one a connection, so that a proxy
# that keeps closing them costs the task a bounded number of tries.
_MAX_HELLO_TRIES = 8


def _hello_with_retries(
    connect, token, body, timeout, budget, sleep=None, rand=None, nonces=None, keep=None
):
    """_hello_exchange on a fresh connection from connect(), tried again
    when the proxy closed it before it answered anything: a proxy whose
    unadmitted budget is full of connections that prove nothing closes the
    oldest of them to make room, which may be this one if it was slow to
    speak. The tries, with random jitter between them so that workers
    closed together do not come back together, stop after budget seconds
    (the connect timeout) or _MAX_HELLO_TRIES; the last error is raised.
    A connection refused, a hello line of any kind from the proxy, or a
    reply that does not come in time is never tried again. The connection
    is closed, unless keep is a list: it then gets (sock, rest), the
    connection of a hello that got its reply and what followed the reply."""
    import random
    import time

    sleep = sleep or time.sleep
    rand = rand or random.random
    deadline = time.monotonic() + budget
    pause = 0.02
    tries = 0
    while True:
        tries += 1
        sock = connect()
        rest = [] if keep is not None else None
        answered = False
        try:
            result = _hello_exchange(sock, token, body, timeout, nonces, rest)
            answered = True
            return result
        except _HelloClosed as e:
            # What the proxy sends before it reads a hello, pydevd's first
            # request, is no answer to it; anything else is.
            if e.received and (
                _HELLO in e.received or not e.received.startswith(b"Content-Length: ")
            ):
                raise
            err = e
        except (ConnectionResetError, BrokenPipeError) as e:
            err = e
        finally:
            if answered and keep is not None:
                keep[:] = [sock, rest[0] if rest else b""]
            else:
                sock.close()
        wait = pause * (0.5 + rand())
        if tries >= _MAX_HELLO_TRIES or time.monotonic() + wait >= deadline:
            raise err
        sleep(wait)
        pause = min(pause * 2, 0.5)


def _hello_accepted(reply):
    """Reads a hello reply: (True, nonce) if the proxy admitted the worker,
    with the nonce PyCharm mode sends ("" from a DAP proxy), else (False,
    the reason it gave)."""
    if reply == "OK" or reply.startswith("OK "):
        return True, reply[3:]
    return False, reply.replace("REFUSED ", "", 1)


def _sparkdap_version(cfg):
    """The sparkdap version both hellos report (the session's and the
    selection watch's): the one that wrote this file, "" if it baked none.
    A cfg made without _load_config may lack it."""
    return cfg.get("sparkdap_version") or ""


def _hello(cfg, task, undebugged=None):
    """Introduces this worker to the proxy before any debugger is loaded:
    each side proves it knows the token, then the proxy checks its session
    limit and learns the task label and where this worker loads code from
    (see admission/hello.go). Returns None if accepted, else the reason.
    Raises OSError if unreachable, _ProxyUnproven if the peer is no proxy
    of this token. With undebugged (why this worker cannot load a
    debugger), the hello only tells the proxy that, and the proxy refuses
    it: it holds no session."""
    import socket

    host, port = cfg["proxy"]
    body = _task_body(cfg, task)
    # Only the hello says it, not each task's event: the version is the
    # worker's, not the task's.
    body["sparkdapVersion"] = _sparkdap_version(cfg)
    if undebugged is not None:
        body["undebugged"] = undebugged
    nonces = []
    reply, pydevd_token = _hello_with_retries(
        lambda: socket.create_connection((host, port), timeout=cfg["connect_timeout"]),
        cfg["token"],
        body,
        cfg["handshake_timeout"],
        cfg["connect_timeout"],
        nonces=nonces,
    )
    accepted, detail = _hello_accepted(reply)
    if not accepted:
        return detail
    st = _st()
    # PyCharm mode: a one-time nonce that names the guard thread.
    st.hello_nonce = detail
    # What debugpy.connect presents as its access token: pydevd hands that
    # to whoever asks, so it is good for this hello only.
    st.pydevd_token = pydevd_token
    st.hello_nonces = tuple(nonces)
    return None
