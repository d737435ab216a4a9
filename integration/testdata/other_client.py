def scale(x):
    return x * 5  # BREAKPOINT: other-client
