"""The daemon module's entry point."""

import sys

from .debugger import _preload_debugger
from .hooks import _install
from .probe import _probe, _PROBE_FLAG


def _main(argv):
    if argv[1:2] == [_PROBE_FLAG] and len(argv) == 4:
        sys.exit(_probe(argv[2], int(argv[3]), sys.stdin, sys.stdout))
    from pyspark import daemon

    _install(daemon)
    _preload_debugger()
    daemon.manager()


if __name__ == "__main__":
    _main(sys.argv)
