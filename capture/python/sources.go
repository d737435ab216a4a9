// Package python holds the Python sides of a capture, embedded so that the
// proxy and the CLI carry them: sparkdap_capture.py runs in the stopped
// executor, sparkdap_replay.py (with the modules it imports) in the
// developer's Python. They are plain
// modules with their own pytest tests (tests/), linted by the repository's
// ruff.toml; nothing here depends on the worker wrapper.
package python

import "embed"

// CaptureSource is the executor side of a capture: the proxy sends it
// inside a DAP evaluate (see dap's sparkdapCapture), so nothing needs
// installing on the executor.
//
//go:embed sparkdap_capture.py
var CaptureSource string

// ReplayMain is the file `sparkdap replay` runs; ReplayFiles are all the
// files of its Python side (ReplayMain and the modules it imports), to be
// written into one directory.
const ReplayMain = "sparkdap_replay.py"

//go:embed sparkdap_replay.py sparkdap_replay_budget.py sparkdap_replay_columnar.py
//go:embed sparkdap_replay_data.py sparkdap_replay_source.py
var replayFS embed.FS

// ReplayFiles maps the name of each file of replay's Python side to its
// text: the entry point, decoding the capture (its header and tagged JSON,
// its Arrow and .npy values, the memory budget), setting up the call.
func ReplayFiles() map[string]string {
	out := map[string]string{}
	entries, _ := replayFS.ReadDir(".")
	for _, e := range entries {
		b, _ := replayFS.ReadFile(e.Name())
		out[e.Name()] = string(b)
	}
	return out
}
