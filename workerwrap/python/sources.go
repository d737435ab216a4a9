// Package python holds the Python files sparkdap runs outside the worker
// wrapper (issue 17's capture and replay), embedded so that the proxy and
// the CLI carry them. They are plain modules beside remote_debug.py so that
// pytest (tests/) and ruff check them the same way.
package python

import _ "embed"

// CaptureSource is the executor side of a capture: the proxy sends it
// inside a DAP evaluate (see dap's sparkdapCapture), so nothing needs
// installing on the executor.
//
//go:embed sparkdap_capture.py
var CaptureSource string

// ReplaySource is `sparkdap replay`'s Python side, run in the developer's
// Python.
//
//go:embed sparkdap_replay.py
var ReplaySource string
