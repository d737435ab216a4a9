# The errors replay refuses a capture with, and the memory it may spend
# building the capture's values (sparkdap_replay_data.py and
# sparkdap_replay_columnar.py import it; it imports neither). ReplayError
# is the one exception replay lets out of decoding: every refusal and
# every malformed part is one. The sizes the capture declares are the
# executor's (SECURITY.md): Budget (--max-memory, default_budget of the
# file's size) is charged each value's declared size before the value is
# built, and refuses one over it (TooLarge); _PTR and _OBJ are what a built
# item costs in those estimates.

import re


class ReplayError(Exception):
    pass


class _Malformed(ReplayError):
    pass


MAX_MEMORY_FLAG = "--max-memory"

# The default budget: 64 times the capture file's size (a capture's values
# built take a few times their encoded bytes; 64 leaves room for pandas'
# Python objects per row of text), at least 64 MiB (a small capture of
# text columns), at most 1 GiB (what a laptop spares without noticing).
# A larger value the developer trusts takes --max-memory.
DEFAULT_FACTOR = 64
DEFAULT_FLOOR = 64 << 20
DEFAULT_CEILING = 1 << 30

_SIZE = re.compile(r"\A([0-9]+)\s*(?:([KMGT])(?:I?B)?|B)?\Z", re.IGNORECASE)
_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def parse_size(text):
    """Bytes of a SIZE: 512MiB, 2GiB, 2G, 1048576 (K, M, G and T are
    binary, with or without iB or B); ValueError for anything else."""
    m = _SIZE.match(str(text).strip())
    if not m or int(m.group(1)) <= 0:
        raise ValueError("want a size above 0 such as 512MiB or 2GiB, got %r" % (text,))
    return int(m.group(1)) << _SHIFT[(m.group(2) or "").upper()]


def default_budget(file_size):
    return min(DEFAULT_CEILING, max(DEFAULT_FLOOR, DEFAULT_FACTOR * file_size))


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return "%.1f %s" % (n / (1 << shift), unit)
    return "%d bytes" % n


class TooLarge(ReplayError):
    """A value whose declared size is over the memory budget."""


class Budget:
    """The memory replay may spend building the capture's values: each
    value's size, as its encoding declares it, is charged before it is
    built, and a value that would go over is refused (TooLarge) instead."""

    def __init__(self, limit):
        self.limit = limit
        self.used = 0

    def charge(self, nbytes, what, where):
        nbytes = max(0, int(nbytes))
        if self.used + nbytes > self.limit:
            raise TooLarge(
                "%s: %s would take about %s here, over replay's memory budget of %s (%s of it "
                "spent); if you trust the capture, raise it with %s SIZE"
                % (
                    where,
                    what,
                    human(nbytes),
                    human(self.limit),
                    human(self.used),
                    MAX_MEMORY_FLAG,
                )
            )
        self.used += nbytes


# What a built value costs, per item, in the estimates Budget is charged:
# a pointer in a list or an object array, and a Python object (a str, a
# bytes, a dict or list of a row) beside it.
_PTR = 8
_OBJ = 56
