"""--wait: stop at the first line of user code of each selected task."""

import sys

from .state import _st
from .pydevd_compat import _debugger_alive, _stop_at_frame
from .task import _is_user_file


def _wait_profile(frame, event, arg):
    if event != "call" or not _is_user_file(frame.f_code.co_filename):
        return
    sys.setprofile(None)
    _st().wait_armed = False
    if not _debugger_alive():
        # settrace() without a live debugger would start a new connection.
        return
    try:
        _stop_at_frame(frame)
    except Exception:
        pass


def _arm_wait():
    st = _st()
    st.wait_armed = True
    sys.setprofile(_wait_profile)


def _disarm_wait():
    st = _st()
    if st.wait_armed:
        st.wait_armed = False
        if sys.getprofile() is _wait_profile:
            sys.setprofile(None)
