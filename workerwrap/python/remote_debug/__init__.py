"""sparkdap's worker wrapper, by role: the Python that Spark runs as its
daemon module (`python -m remote_debug`) and that attaches selected tasks'
workers to the sparkdap proxy.

Spark needs the daemon module importable before --py-files reach sys.path,
so it ships as one file: `sparkdap wrap` (workerwrap/render.go) writes a
settings header (workerwrap/template/header.py.tmpl, which defines _BAKED)
and then these modules, concatenated in the order of MODULES below, with
their relative imports left out. The modules are written for that: each
top-level name is defined in one module only, a relative import names only
modules earlier in MODULES (`from .mod import a, b`, no `as`), and a
global that a function rebinds is read only in its own module
(tests/test_layout.py checks all three). In the repository they are a
package, imported and tested module by module (tests/), and linted (ruff).

Nothing in here may write to stdout before pyspark.daemon.manager() has
written its port: the JVM reads that number from the daemon's stdout. The
code runs on every Python PySpark 3.5 supports (3.8 and later).
"""

# The order `sparkdap wrap` concatenates the modules in; render.go reads
# this tuple, one quoted name per line.
MODULES = (
    "state",
    "config",
    "backoff",
    "support",
    "pydevd_compat",
    "shipped",
    "task",
    "hello",
    "selection",
    "debugger",
    "lease",
    "output",
    "attach",
    "wait",
    "hooks",
    "probe",
    "main",
)
