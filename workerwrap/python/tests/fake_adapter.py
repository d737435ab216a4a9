"""A minimal stand-in for the proxy's side of a pydevd connection: it accepts
debugpy.connect() and does the handshake the proxy does (dap/executor.go,
handshake): pydevdAuthorize, pydevdSystemInfo, initialize, attach,
configurationDone. Real pydevd answers it; tests use it to drive a real
debugpy.connect() to completion without the Go proxy."""

import json
import socket
import threading


def _send(sock, msg):
    body = json.dumps(msg).encode("utf-8")
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _recv(f):
    length = None
    while True:
        line = f.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return json.loads(f.read(length).decode("utf-8"))


def _handshake(conn):
    f = conn.makefile("rb")
    seq = 0
    for command, args in (
        ("pydevdAuthorize", {"debugServerAccessToken": None}),
        ("pydevdSystemInfo", None),
        (
            "initialize",
            {
                "clientID": "test",
                "adapterID": "debugpy",
                "pathFormat": "path",
                "linesStartAt1": True,
                "columnsStartAt1": True,
            },
        ),
        ("attach", {"justMyCode": True, "redirectOutput": True}),
        ("configurationDone", None),
    ):
        seq += 1
        msg = {"seq": seq, "type": "request", "command": command}
        if args is not None:
            msg["arguments"] = args
        _send(conn, msg)
        while True:
            reply = _recv(f)
            if reply is None:
                return
            if reply.get("type") == "response" and reply.get("request_seq") == seq:
                break
    while _recv(f) is not None:  # until the worker goes away
        pass


class FakeAdapter:
    """Listens on 127.0.0.1; each connection gets the handshake on a thread."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            _handshake(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.listener.close()


if __name__ == "__main__":
    import sys

    a = FakeAdapter()
    print(a.port, flush=True)
    sys.stdin.read()
