// Package pathmap translates between the paths a Spark executor's Python
// worker knows its code by (userFiles-<uuid> directories, --py-files zips,
// YARN containers, the driver's directory for closures pickled from its
// __main__) and the developer's local files.
//
// A Mapper holds the local side: explicit rules, the local project root and
// an index of its Python files. A Cache is one executor's view through it:
// the roots that worker reported and every answer already computed for it.
// Both front ends (package dap for DAP clients, package pycharm for
// PyCharm) use a Cache per executor: local → remote for breakpoints (each
// candidate path is tried), remote → local for what names a source on the
// way back.
package pathmap
