// Package python holds the Python sides of a capture, embedded so that the
// proxy and the CLI carry them: sparkdap_capture.py runs in the stopped
// executor, sparkdap_replay.py in the developer's Python. They are plain
// modules with their own pytest tests (tests/), linted by the repository's
// ruff.toml; nothing here depends on the worker wrapper.
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
