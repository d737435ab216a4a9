"""Puts sparkdap_capture.py and sparkdap_replay.py on sys.path as plain
modules, as the proxy and `sparkdap replay` load them."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
