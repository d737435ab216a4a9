//go:build !unix && !windows

package main

// terminal: elsewhere no width is known (defaultWidth is assumed).
var terminal = termPolicy{}
