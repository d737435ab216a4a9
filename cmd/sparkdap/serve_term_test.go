package main

import (
	"errors"
	"testing"
)

// TestTermPolicyWidth: the live view is as wide as the terminal says,
// and 100 columns where it says nothing (a failed query, a zero width, or
// a platform with no query).
func TestTermPolicyWidth(t *testing.T) {
	says := func(n int) func(uintptr) int { return func(uintptr) int { return n } }
	for _, tc := range []struct {
		name   string
		policy termPolicy
		want   int
	}{
		{"gives 132", termPolicy{columns: says(132)}, 132},
		{"gives 40", termPolicy{columns: says(40)}, 40},
		{"gives 0", termPolicy{columns: says(0)}, 100},
		{"fails", termPolicy{columns: says(-1)}, 100},
		{"no query", termPolicy{}, 100},
	} {
		if got := tc.policy.width(3); got != tc.want {
			t.Errorf("%s: width %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTermPolicyANSI: ANSI sequences (redraws, colours) go to a terminal
// only: on Unix to any; where the console must be asked to take them
// (Windows), only once it agreed, and a file or pipe is never asked.
func TestTermPolicyANSI(t *testing.T) {
	for _, tc := range []struct {
		name      string
		enable    error // the console's answer; nil: agrees
		asks      bool  // the platform asks the console
		tty       bool
		want      bool
		wantAsked bool
	}{
		{name: "unix terminal", tty: true, want: true},
		{name: "unix pipe", tty: false, want: false},
		{name: "windows console that agrees", asks: true, tty: true, want: true, wantAsked: true},
		{name: "windows console that refuses (before Windows 10)", asks: true, enable: errors.New("invalid parameter"), tty: true, want: false, wantAsked: true},
		{name: "windows pipe", asks: true, tty: false, want: false},
	} {
		asked := false
		p := termPolicy{}
		if tc.asks {
			p.enableANSI = func(fd uintptr) error {
				if fd != 7 {
					t.Errorf("%s: asked fd %d", tc.name, fd)
				}
				asked = true
				return tc.enable
			}
		}
		if got := p.ansi(tc.tty, 7); got != tc.want || asked != tc.wantAsked {
			t.Errorf("%s: ansi %v (asked %v), want %v (asked %v)", tc.name, got, asked, tc.want, tc.wantAsked)
		}
	}
}
