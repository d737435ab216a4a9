"""Module shipped to executors with --py-files."""


def scale(x):
    factor = 2
    return x * factor  # BREAKPOINT: pcmath-scale


TABLE = {}


def lookup(x):
    try:
        return TABLE[x]  # BREAKPOINT: pcmath-lookup
    except KeyError:
        return x * 2
