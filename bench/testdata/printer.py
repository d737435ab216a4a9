"""Worker for the real-debugpy output benchmark (bench/output.go).

usage: printer.py MODE HOST:PORT ID LINES

MODE plain:     no debugger: the print() loop alone.
MODE unbatched: debugpy.connect to the proxy (the attach asks for
                redirectOutput), pydevd's output as shipped: one output event
                per write (what a worker got before the wrapper batched).
MODE batched:   as unbatched, plus the worker wrapper's output batching
                (workerwrap/python/remote_debug/output.py, _batch_output), as a
                worker under `sparkdap submit` gets it.

Prints READY (on the process's real stdout, which the benchmark reads), waits
for a line on stdin, then print()s LINES lines of 80 bytes
"w<ID> <seq> ..." and a last line "END w<ID>", then reports the CPU seconds
the loop took as "CPU <seconds>" on the real stdout. The real stdout stands for the executor log: in the debugged
modes pydevd's redirection writes every line there as well.
"""
import os
import sys


def main():
    mode, addr, wid, lines = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    real = sys.stdout
    if mode != "plain":
        import debugpy

        host, port = addr.rsplit(":", 1)
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        debugpy.connect((host, int(port)), access_token=os.environ.get("SPARKDAP_TOKEN"))
        # The wrapper's package (workerwrap/python/remote_debug).
        sys.path.insert(0, os.environ["SPARKDAP_WRAPPER_DIR"])
        from remote_debug import output, pydevd_compat

        pydevd_compat._set_nodelay()
        if mode == "batched":
            if output._batch_output() is None:
                raise SystemExit("output batching did not install")
    real.write("READY\n")
    real.flush()
    sys.stdin.readline()
    start = os.times()
    pad = "x" * 80
    for i in range(lines):
        head = "w%s %d " % (wid, i)
        print(head + pad[: 79 - len(head)])  # 80 bytes with the newline
    print("END w%s" % wid)
    if mode == "batched":
        output._flush_output()  # the wrapper does this at task end
    end = os.times()
    real.write("CPU %.3f\n" % (end.user - start.user + end.system - start.system))
    real.flush()
    sys.stdin.readline()  # stay connected until the benchmark is done


if __name__ == "__main__":
    main()
