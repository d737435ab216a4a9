"""The wrapper's own code is never the user's to pydevd: with justMyCode, an
exception passing through the wrapper's frames never stops there, whatever
exception breakpoints the IDE set.

A reused PySpark worker ends when the JVM closes its socket (SparkContext
stop, or the idle-worker cleanup): PySpark's worker main reads end of file
and calls sys.exit(-1), and that SystemExit goes up through the wrapper's
main (hooks._wrap_main) to pyspark.daemon.worker, which catches it. With
"raised" exception breakpoints a wrapper counted as the user's code stopped
there: one more stop, at the end of the job, of a worker the daemon kills
a moment later."""

import json
import os
import socket
import subprocess
import sys
import threading

import flat
import pytest
import real_debugger

# A stand-in for PySpark, in a directory named site-packages on sys.path:
# library code to pydevd, as the executors' PySpark is.
_FAKE_SPARK = r'''
import sys


def worker_main(task):
    """pyspark.worker.main: runs the task, then reads end of file."""
    try:
        task()
        raise EOFError
    except BaseException:
        sys.exit(-1)


def worker(task):
    """pyspark.daemon.worker."""
    try:
        worker_main(task)
    except SystemExit:
        return -1
    return 0
'''

_CHILD = r"""
import os, sys
sys.path.insert(0, %(lib)r)
sys.path.insert(0, %(module_dir)r)
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
import remote_debug as rd
debugpy = rd._load_debugger(False)
import fakespark


def task():
    try:
        return {}["missing"]
    except KeyError:
        return -1


debugpy.configure(subProcess=False)
debugpy.connect(("127.0.0.1", %(port)d))
fakespark.worker_main = rd._wrap_main(fakespark.worker_main)
print("exit code", fakespark.worker(task), flush=True)
"""


def _stand_in(conn, stops, done):
    """The proxy's side: justMyCode, exception breakpoints on raised
    exceptions; each stop is recorded as (exception, file, function) and
    continued."""
    from fake_adapter import _recv, _send

    f = conn.makefile("rb")
    seq = [0]

    def request(command, args=None):
        seq[0] += 1
        msg = {"seq": seq[0], "type": "request", "command": command}
        if args is not None:
            msg["arguments"] = args
        _send(conn, msg)
        return seq[0]

    try:
        request(
            "initialize",
            {"clientID": "test", "adapterID": "debugpy", "pathFormat": "path"},
        )
        request("attach", {"justMyCode": True})
        request("setExceptionBreakpoints", {"filters": ["raised"]})
        request("configurationDone")
        where = {}  # request seq of a stackTrace -> (thread, exception)
        while True:
            m = _recv(f)
            if m is None:
                return
            if m.get("type") == "event" and m.get("event") == "stopped":
                body = m.get("body", {})
                tid = body.get("threadId")
                s = request("stackTrace", {"threadId": tid, "startFrame": 0, "levels": 1})
                where[s] = (tid, body.get("text"))
            elif m.get("type") == "response" and m.get("request_seq") in where:
                tid, text = where.pop(m["request_seq"])
                frames = m.get("body", {}).get("stackFrames") or [{}]
                top = frames[0]
                path = (top.get("source") or {}).get("path", "")
                stops.append((text, os.path.basename(path), top.get("name")))
                request("continue", {"threadId": tid})
    except OSError:
        pass
    finally:
        done.set()


@real_debugger.only("debugpy")
def test_worker_exit_through_the_wrapper_does_not_stop(tmp_path):
    pytest.importorskip("debugpy")
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "fakespark.py").write_text(_FAKE_SPARK)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(60)
    script = tmp_path / "child.py"
    script.write_text(
        _CHILD
        % {"lib": str(lib), "module_dir": flat.directory(), "port": listener.getsockname()[1]}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKDAP_")}
    env.pop("LIBRARY_ROOTS", None)
    env.pop("IDE_PROJECT_ROOTS", None)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=real_debugger.env(env),
    )
    stops, done = [], threading.Event()
    conn = None
    try:
        conn, _ = listener.accept()
        threading.Thread(target=_stand_in, args=(conn, stops, done), daemon=True).start()
        out, err = proc.communicate(timeout=60)
        done.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if conn is not None:
            conn.close()
        listener.close()
    assert proc.returncode == 0, err.decode("utf-8", "replace")
    assert b"exit code -1" in out, out
    # The user's KeyError stops (exception breakpoints are on); the
    # worker's SystemExit passing through the wrapper does not.
    assert stops == [("KeyError", "child.py", "task")], json.dumps(stops)
