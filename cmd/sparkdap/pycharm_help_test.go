package main

import (
	"strings"
	"testing"
)

// TestPyCharmHelpBuilds: the steps are the ones that work for the build
// given. Inside the tested lines they pin pydevd-pycharm to it; outside,
// they say first that the build is untested and what the wrapper will do,
// and how to find out before starting; the check at the end always looks
// at pydevd-pycharm, not debugpy.
func TestPyCharmHelpBuilds(t *testing.T) {
	const untested = "is untested: sparkdap supports pydevd-pycharm 253.* to 263.*"
	tests := []struct {
		name   string
		args   []string
		code   int
		wants  []string
		nevers []string
	}{
		{name: "no build", args: nil,
			wants:  []string{"pip install 'pydevd-pycharm~=<build>'", "sparkdap doctor --executors 127.0.0.1:5678 --pycharm-build <build>"},
			nevers: []string{untested}},
		{name: "a supported build", args: []string{"--pycharm-build", "253.33813.30"},
			wants:  []string{"pip install 'pydevd-pycharm~=253.33813.30'", "--pycharm-build 253.33813.30\n"},
			nevers: []string{untested, "<build>"}},
		{name: "the newest line", args: []string{"--pycharm-build", "263.7307"},
			wants: []string{"pip install 'pydevd-pycharm~=263.7307'"}, nevers: []string{untested}},
		{name: "as Help → About shows it", args: []string{"--pycharm-build", "PY-261.17801.91"},
			wants: []string{"pip install 'pydevd-pycharm~=261.17801.91'"}, nevers: []string{untested, "PY-"}},
		{name: "an older PyCharm", args: []string{"--pycharm-build", "251.23774.444"},
			wants: []string{"PyCharm build 251.23774.444 " + untested,
				"debugs with its pydevd-pycharm if that has every pydevd\ninternal the wrapper uses",
				"each worker runs undebugged\nand names what is missing",
				"After step 3, see which:\n  sparkdap doctor --pycharm-build 251.23774.444\n",
				"pip install 'pydevd-pycharm~=251.23774.444'"}},
		{name: "a newer PyCharm", args: []string{"--pycharm-build", "264.1.2"},
			wants: []string{"PyCharm build 264.1.2 " + untested}},
		{name: "the old spelling", args: []string{"--build", "253.33813.30"},
			wants: []string{"pip install 'pydevd-pycharm~=253.33813.30'"}, nevers: []string{untested}},
		{name: "not a build", args: []string{"--pycharm-build", "253; rm -rf ~"}, code: 1},
		{name: "one number: pip's ~= needs two", args: []string{"--pycharm-build", "253"}, code: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"pycharm"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, stderr)
			}
			if tt.code != 0 {
				if !strings.Contains(stderr, "--pycharm-build: ") || out != "" {
					t.Errorf("a bad build: stderr %q, stdout %q", stderr, out)
				}
				return
			}
			for _, w := range append(tt.wants, "Python Debug Server", "sparkdap serve --ide-kind pycharm") {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.nevers {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

// The help's example is a build sparkdap supports: an example is what
// people copy.
func TestPyCharmHelpExample(t *testing.T) {
	_, _, stderr := runCLI(t, "pycharm", "-h")
	i := strings.Index(stderr, "sparkdap pycharm --pycharm 127.0.0.1:5005 --pycharm-build ")
	if i < 0 {
		t.Fatalf("no example with --pycharm-build in:\n%s", stderr)
	}
	build := strings.Fields(stderr[i:])[5]
	code, out, _ := runCLI(t, "pycharm", "--pycharm-build", build)
	if code != 0 || strings.Contains(out, "is untested") {
		t.Errorf("the example's build %s: exit %d, untested:\n%s", build, code, out)
	}
}
