"""The `sparkdap` console command: runs the binary this package carries,
with the same arguments, and exits with its status."""

import os
import subprocess
import sys

from sparkdap import binary


def main():
    exe = binary()
    if not os.path.isfile(exe):
        sys.stderr.write(
            "sparkdap: this installation has no binary at %s; "
            "reinstall the wheel for this platform\n" % exe
        )
        return 1
    args = [exe] + sys.argv[1:]
    if sys.platform == "win32":
        # Windows has no exec that keeps the console's process: wait, and
        # pass Ctrl+C on to the child, which gets it from the console too.
        proc = subprocess.Popen(args)
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue
    # The binary takes this process's place: signals, the terminal and the
    # exit status are its own.
    os.execv(exe, args)


if __name__ == "__main__":
    sys.exit(main())
