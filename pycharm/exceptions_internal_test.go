package pycharm

import "testing"

func TestExceptionTypeName(t *testing.T) {
	for in, want := range map[string]string{
		"&lt;class 'KeyError'&gt;":         "KeyError",
		"&lt;class 'mypkg.errors.Bad'&gt;": "mypkg.errors.Bad",
		"builtins.ValueError":              "ValueError",
		PyQuote("<class 'OSError'>", ""):   "OSError",
		"something else":                   "something else",
	} {
		if got := exceptionTypeName(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
