package testenv

import "testing"

// HostileTerminalText is what a hostile executor puts in its words: a
// clipboard write (OSC 52), a window title (OSC 0), a carriage return
// with an erased line to forge a line of sparkdap's own, and a C1 CSI.
const HostileTerminalText = "boom\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\r\x1b[2Ksparkdap: all good\n\u009b2J"

// NoTerminalControls fails t if s holds a rune a terminal acts on (C0,
// DEL, C1).
func NoTerminalControls(t testing.TB, what, s string) {
	t.Helper()
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			t.Errorf("%s holds control %U: %q", what, r, s)
			return
		}
	}
}
