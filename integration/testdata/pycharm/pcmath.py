"""Module shipped to executors with --py-files."""


def scale(x):
    factor = 2
    return x * factor  # BREAKPOINT: pcmath-scale
