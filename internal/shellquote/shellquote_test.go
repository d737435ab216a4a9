package shellquote

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain/path-1.0_x.json", "plain/path-1.0_x.json"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(rm -rf ~)", "'$(rm -rf ~)'"},
		{"x;y|z&`w`", "'x;y|z&`w`'"},
		{"key=v,al:ue+@%", "key=v,al:ue+@%"},
		{"~/file", "'~/file'"},
		{"*", "'*'"},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestQuoteRoundTripsThroughSh: what a shell reads back is the word given.
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"a b", "it's", "$HOME", "x;y", "~/f", "*", "tab\there", "new\nline", "'''"} {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("sh read %q back as %q", s, out)
		}
	}
}
