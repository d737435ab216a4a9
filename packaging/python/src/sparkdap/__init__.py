"""sparkdap: breakpoints in PySpark code that runs on executors.

This package carries the sparkdap binary for one platform; the `sparkdap`
command runs it. See https://github.com/sparkdap/sparkdap."""

import os
import sys


def binary():
    """The path of the sparkdap binary inside this package."""
    name = "sparkdap.exe" if sys.platform == "win32" else "sparkdap"
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
