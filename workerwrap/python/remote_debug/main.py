"""The daemon module's entry point."""

import sys

from .config import _disabled_by_env
from .backoff import _close_backoff, _open_backoff
from .shipped import _close_shipped
from .debugger import _preload_debugger
from .hooks import _install
from .probe import _probe, _PROBE_FLAG


def _main(argv):
    if argv[1:2] == [_PROBE_FLAG] and len(argv) == 4:
        sys.exit(_probe(argv[2], int(argv[3]), sys.stdin, sys.stdout))
    from pyspark import daemon

    _install(daemon)
    _preload_debugger()
    if not _disabled_by_env():
        # Before the first fork: every worker inherits the directory.
        _open_backoff()
    try:
        daemon.manager()
    finally:
        _close_backoff()
        _close_shipped()


if __name__ == "__main__":
    _main(sys.argv)
