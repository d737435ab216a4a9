// Package shellquote quotes words for a POSIX shell: the commands sparkdap
// prints for a user to paste, and the ones it runs on an SSH gateway
// through the remote user's shell.
package shellquote

import "strings"

// Quote returns s as one shell word: as it is when it holds only
// characters no POSIX shell treats specially, else in single quotes (a
// single quote inside written as '\”).
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
