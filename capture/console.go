package capture

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/shellquote"
)

// ConsolePrefix starts sparkdap's own commands typed in the IDE's Debug
// Console: "!capture" is no valid Python expression or statement, so no
// user expression is ever taken for one.
const ConsolePrefix = "!"

// localShell is the shell the user pastes the replay command into: that
// of this machine, where the capture file is (PowerShell on Windows).
// Tests set it to check the other one's form.
var localShell = shellquote.Local

// ConsoleHelp is what "!help" answers.
const ConsoleHelp = `sparkdap commands for the Debug Console (anything else goes to Python):
  !capture              capture the function of the selected stopped frame and the arguments it holds,
                        to a file for 'sparkdap replay' (your data: written only on this machine, mode 0600)
  !capture maxBytes=N   the same, refused if the captured call is over N bytes
  !help                 this list`

// IsConsoleCommand reports whether a console line is sparkdap's.
func IsConsoleCommand(line string) bool {
	return strings.HasPrefix(strings.TrimSpace(line), ConsolePrefix)
}

// ParseArgs reads !capture's arguments: at most "maxBytes=N".
func ParseArgs(args []string) (int64, error) {
	var maxBytes int64
	for _, f := range args {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != "maxBytes" {
			return 0, fmt.Errorf("unknown argument %q: the only one is maxBytes=N", f)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("maxBytes=%s: want a positive number of bytes", v)
		}
		maxBytes = n
	}
	return maxBytes, nil
}

// Summary is the text a capture's answer body becomes in the console
// (and in `sparkdap capture`): a line saying what, from where, to which
// file, and the command that replays it, then a "note:" line for each of
// the executor's notes.
func Summary(body map[string]any) string {
	path, _ := body["path"].(string)
	fn, _ := body["function"].(string)
	task, _ := body["task"].(string)
	// The function's name comes from the executor: no control characters
	// reach the console or the terminal.
	fn, task = admission.Clean(fn, admission.MaxTextRunes), admission.Clean(task, 4*admission.MaxTextRunes)
	n, _ := toInt(body["bytes"])
	from := ""
	if task != "" {
		from = " (" + task + ")"
	}
	line := fmt.Sprintf("captured %s%s to %s (%d bytes) — replay: sparkdap replay %s", fn, from, path, n, localShell.Quote(path))
	// The executor's notes: above all, a value the capture carries only
	// pickled, which replay runs only with --trust-captured-code. Cleaned
	// like the name, and bounded in number.
	var notes []string
	switch v := body["notes"].(type) {
	case []string:
		notes = v
	case []any:
		for _, n := range v {
			if s, ok := n.(string); ok {
				notes = append(notes, s)
			}
		}
	}
	for i, note := range notes {
		if i == maxNotes {
			line += fmt.Sprintf("\nnote: %d more notes are in the capture file", len(notes)-i)
			break
		}
		line += "\nnote: " + admission.Clean(note, maxNoteRunes)
	}
	return line
}
