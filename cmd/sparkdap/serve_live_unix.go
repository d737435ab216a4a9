//go:build unix

package main

import "golang.org/x/sys/unix"

// terminal: a Unix terminal gives its size (TIOCGWINSZ) and interprets
// ANSI sequences as it is.
var terminal = termPolicy{columns: winsizeColumns}

func winsizeColumns(fd uintptr) int {
	if ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ); err == nil {
		return int(ws.Col)
	}
	return 0
}
