package dap

import (
	"strings"

	"github.com/sparkdap/sparkdap/capture"
)

// ConsolePrefix starts sparkdap's own commands typed in the IDE's Debug
// Console (an evaluate request with context "repl"): "!capture" is no
// valid Python expression or statement, so no user expression is ever
// taken for one. Every DAP client has a console, so this needs no
// extension (VS Code, nvim-dap's REPL, …).
const ConsolePrefix = capture.ConsolePrefix

// consoleHelp is what "!help" answers.
const consoleHelp = capture.ConsoleHelp

// isConsoleCommand reports whether req is an evaluate the proxy answers
// itself: a Debug Console line starting with ConsolePrefix. Hovers,
// watches and the variables view ("hover", "watch", "clipboard", …) are
// always Python's.
func isConsoleCommand(req Message) bool {
	if req.Command() != "evaluate" {
		return false
	}
	a := req.Arguments()
	ctx, _ := a["context"].(string)
	expr, _ := a["expression"].(string)
	return ctx == "repl" && strings.HasPrefix(strings.TrimSpace(expr), ConsolePrefix)
}

// consoleCommand serves a Debug Console command (isConsoleCommand): it
// never reaches pydevd. The answer is an evaluate result whose text the
// console shows; a bad command or a failed capture is a failed evaluate,
// whose message the console shows instead.
func (h *Hub) consoleCommand(s *IDESession, req Message) {
	a := req.Arguments()
	expr, _ := a["expression"].(string)
	fields := strings.Fields(strings.TrimSpace(expr))
	name := fields[0]
	switch name {
	case ConsolePrefix + "help":
		s.reply(newResponse(req, consoleResult(consoleHelp)))
	case ConsolePrefix + "capture":
		maxBytes, err := parseCaptureArgs(fields[1:])
		if err != nil {
			s.fail(req, "%s: %v (try !help)", name, err)
			return
		}
		frameID, ok := a["frameId"]
		if _, isInt := toInt(frameID); !ok || !isInt {
			s.fail(req, "%s: select a stopped frame first (in the Call Stack view, or your client's frame selection): "+
				"it captures that frame's function and arguments", name)
			return
		}
		h.captureFrame(s, req, name, frameID, maxBytes, func(body map[string]any) Message {
			return newResponse(req, consoleResult(captureSummary(body)))
		})
	default:
		s.fail(req, "%s is not a sparkdap command; !help lists them (Python never sees a line starting with %q)", name, ConsolePrefix)
	}
}

// parseCaptureArgs reads !capture's arguments: at most "maxBytes=N".
func parseCaptureArgs(args []string) (int64, error) { return capture.ParseArgs(args) }

// captureSummary is the line a capture's answer body becomes in the
// console (and in `sparkdap capture`).
func captureSummary(body map[string]any) string { return capture.Summary(body) }

func consoleResult(text string) map[string]any {
	return map[string]any{"result": text, "variablesReference": 0}
}
