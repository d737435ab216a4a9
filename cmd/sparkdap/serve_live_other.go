//go:build !unix

package main

// width is the terminal's width in columns; elsewhere assume a common one.
func (v *liveView) width() int { return 100 }
