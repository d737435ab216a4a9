package main

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// termPolicy is how a platform's terminal gives its width and takes ANSI
// escape sequences (the live view's redraws, the log's colours);
// terminal (serve_live_*.go) is this one's.
type termPolicy struct {
	// columns is the terminal's width in columns, 0 if it gives none.
	// nil: never known.
	columns func(fd uintptr) int
	// enableANSI, where a terminal must be asked to interpret ANSI
	// sequences (a Windows console: ENABLE_VIRTUAL_TERMINAL_PROCESSING),
	// asks it; an error means it cannot, and then none are written. nil:
	// a terminal interprets them as it is (Unix).
	enableANSI func(fd uintptr) error
}

// defaultWidth is the width assumed when the terminal gives none.
const defaultWidth = 100

// width is the terminal's width in columns, else defaultWidth.
func (p termPolicy) width(fd uintptr) int {
	if p.columns != nil {
		if n := p.columns(fd); n > 0 {
			return n
		}
	}
	return defaultWidth
}

// ansi says whether fd, a terminal if tty, takes ANSI sequences, asking
// it to where it must be asked.
func (p termPolicy) ansi(tty bool, fd uintptr) bool {
	if !tty {
		return false
	}
	return p.enableANSI == nil || p.enableANSI(fd) == nil
}

// ansiTerminal is w's file when w is a terminal that takes ANSI sequences
// (made to take them where that needs asking); ok is false otherwise.
func ansiTerminal(w io.Writer) (f *os.File, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile || !terminal.ansi(isatty.IsTerminal(f.Fd()), f.Fd()) {
		return nil, false
	}
	return f, true
}
