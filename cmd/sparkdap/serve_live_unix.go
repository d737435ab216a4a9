//go:build unix

package main

import "golang.org/x/sys/unix"

// width is the terminal's width in columns.
func (v *liveView) width() int {
	if ws, err := unix.IoctlGetWinsize(v.fd, unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		return int(ws.Col)
	}
	return 100
}
