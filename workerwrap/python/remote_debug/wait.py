"""--wait: stop at the first line of user code of each selected task."""

import sys

from .state import _st
from .config import _pycharm
from .pydevd_compat import _debugger_alive
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
        import pydevd

        # What debugpy.breakpoint() does, but stopping in the user's frame:
        # pydevd steps over until the next line event of stop_at_frame, which
        # is the first line of the user's function.
        kwargs = {}
        if not _pycharm():
            kwargs["notify_stdin"] = False  # debugpy's pydevd only
        pydevd.settrace(
            suspend=True,
            trace_only_current_thread=True,
            patch_multiprocessing=False,
            stop_at_frame=frame,
            **kwargs
        )
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
