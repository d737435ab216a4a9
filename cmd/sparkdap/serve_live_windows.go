package main

import "golang.org/x/sys/windows"

// terminal: a Windows console gives the width of its window
// (GetConsoleScreenBufferInfo), and interprets ANSI sequences only once
// asked to (ENABLE_VIRTUAL_TERMINAL_PROCESSING, Windows 10 and later; an
// older console refuses it, and then gets none).
var terminal = termPolicy{columns: consoleColumns, enableANSI: consoleVT}

func consoleColumns(fd uintptr) int {
	var info windows.ConsoleScreenBufferInfo
	if err := windows.GetConsoleScreenBufferInfo(windows.Handle(fd), &info); err != nil {
		return 0
	}
	return int(info.Window.Right-info.Window.Left) + 1
}

func consoleVT(fd uintptr) error {
	var mode uint32
	if err := windows.GetConsoleMode(windows.Handle(fd), &mode); err != nil {
		return err
	}
	if mode&windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING != 0 {
		return nil
	}
	return windows.SetConsoleMode(windows.Handle(fd), mode|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING)
}
