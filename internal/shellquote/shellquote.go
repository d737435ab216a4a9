// Package shellquote quotes words for a shell: POSIX sh for the commands
// sparkdap runs on an SSH gateway through the remote user's shell (and
// for the ones it prints on Linux and macOS), PowerShell for the commands
// it prints for a Windows user to paste into their own shell.
package shellquote

import (
	"runtime"
	"strings"
)

// Dialect is the syntax of one shell.
type Dialect int

const (
	// POSIX is sh and the shells that read its syntax (bash, zsh, dash).
	POSIX Dialect = iota
	// PowerShell is Windows PowerShell 5.1 and PowerShell 7 (pwsh), the
	// shell Windows Terminal opens by default.
	PowerShell
)

// Local is the dialect of the shell a user of this machine pastes a
// printed command into: PowerShell on Windows, POSIX elsewhere. Commands
// run on another machine (an SSH gateway, cluster nodes) are POSIX.
var Local = dialectFor(runtime.GOOS)

func dialectFor(goos string) Dialect {
	if goos == "windows" {
		return PowerShell
	}
	return POSIX
}

// String names the dialect.
func (d Dialect) String() string {
	if d == PowerShell {
		return "PowerShell"
	}
	return "POSIX"
}

// Quote returns s as one POSIX shell word (POSIX.Quote): kept for the
// callers whose commands run in a POSIX shell wherever sparkdap runs.
func Quote(s string) string { return POSIX.Quote(s) }

// Quote returns s as one word of the dialect: as it is when no character
// of it means anything to the shell, else in single quotes. In POSIX a
// single quote inside closes the quotes, comes escaped with a backslash
// and opens them again; in PowerShell, whose single-quoted strings are
// literal (backslashes, $ and backticks included), it is doubled, and so
// are the typographic single quotes PowerShell takes for one.
//
// PowerShell leaves a word bare only when it starts with a letter, _, /
// or \ (not -, a digit or ., which could read as a parameter or a number
// such as 1kb) and holds only letters, digits and -_./\:+=.
func (d Dialect) Quote(s string) string {
	if d == PowerShell {
		if s != "" && isPowerShellBare(s) {
			return s
		}
		return "'" + psQuotes.Replace(s) + "'"
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(isAlnum(r) || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// psQuotes doubles each character PowerShell reads as a single quote.
var psQuotes = strings.NewReplacer("'", "''", "\u2018", "\u2018\u2018", "\u2019", "\u2019\u2019",
	"\u201a", "\u201a\u201a", "\u201b", "\u201b\u201b")

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func isPowerShellBare(s string) bool {
	first := rune(s[0])
	if !(first >= 'a' && first <= 'z' || first >= 'A' && first <= 'Z' || strings.ContainsRune(`_/\`, first)) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(isAlnum(r) || strings.ContainsRune(`-_./\:+=`, r))
	}) < 0
}

// Env returns a reference to the environment variable name that expands
// to its value as one word, also when it holds spaces: "$NAME" in POSIX,
// "$env:NAME" in PowerShell. name must be a plain identifier (letters,
// digits, _).
func (d Dialect) Env(name string) string {
	if d == PowerShell {
		return `"$env:` + name + `"`
	}
	return `"$` + name + `"`
}

// SetEnv returns a command that sets the environment variable name to
// value for the commands the shell runs after it: export NAME=value in
// POSIX, $env:NAME = 'value' in PowerShell. name must be a plain
// identifier (letters, digits, _).
func (d Dialect) SetEnv(name, value string) string {
	if d == PowerShell {
		return "$env:" + name + " = '" + psQuotes.Replace(value) + "'"
	}
	return "export " + name + "=" + d.Quote(value)
}

// Program returns program, a command's first word (a path to an
// executable, say), so that the shell runs it: quoted like any word, and
// in PowerShell after the call operator (& ) when quoting it was needed,
// since PowerShell takes a quoted first word for a string to print, not a
// command to run.
func (d Dialect) Program(program string) string {
	q := d.Quote(program)
	if d == PowerShell && q != program {
		return "& " + q
	}
	return q
}
