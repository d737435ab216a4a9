package tunnel

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/shellquote"
)

func TestGoPlatform(t *testing.T) {
	for _, tc := range []struct{ uname, goos, goarch string }{
		{"Linux x86_64", "linux", "amd64"},
		{"Linux aarch64", "linux", "arm64"},
		{"Darwin arm64", "darwin", "arm64"},
		{"Darwin x86_64", "darwin", "amd64"},
		{"Linux armv7l", "linux", "arm"},
		{"Linux ppc64le", "linux", "ppc64le"},
		{"Linux s390x", "linux", "s390x"},
		{"FreeBSD amd64", "freebsd", "amd64"},
		{"Linux mips", "", ""},
		{"CYGWIN_NT-10.0 x86_64", "", ""},
		{"Linux", "", ""},
	} {
		goos, goarch, err := goPlatform(tc.uname)
		if tc.goos == "" {
			if err == nil {
				t.Errorf("goPlatform(%q) = %s/%s, want an error", tc.uname, goos, goarch)
			}
			continue
		}
		if err != nil || goos != tc.goos || goarch != tc.goarch {
			t.Errorf("goPlatform(%q) = %s/%s, %v; want %s/%s", tc.uname, goos, goarch, err, tc.goos, tc.goarch)
		}
	}
}

// TestShellQuoting runs the quoted words through a real sh.
func TestShellQuoting(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	for _, tc := range []struct {
		word   string
		expand func(home string) string // for remotePath
	}{
		{word: "plain"},
		{word: "with space"},
		{word: "it's"},
		{word: `$(touch /tmp/pwned) "q" \ ; | & * ~ ` + "`x`"},
		{word: ""},
		{word: "~/.cache/sparkdap", expand: func(h string) string { return h + "/.cache/sparkdap" }},
		{word: "~/dir with 'quote'", expand: func(h string) string { return h + "/dir with 'quote'" }},
		{word: "~", expand: func(h string) string { return h }},
		{word: "/abs/~/x", expand: func(string) string { return "/abs/~/x" }},
	} {
		script := "printf %s " + shellquote.Quote(tc.word)
		want := tc.word
		if tc.expand != nil {
			script = "printf %s " + remotePath(tc.word)
			want = tc.expand("/home/u")
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = []string{"HOME=/home/u", "PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		if err != nil || string(out) != want {
			t.Errorf("word %q: sh printed %q, %v; want %q", tc.word, out, err, want)
		}
	}
	// shCommand survives the login shell's own parse, then sh's.
	out, err := exec.Command("sh", "-c", shCommand(`echo "a b"; echo 'c'`)).Output()
	if err != nil || strings.TrimSpace(string(out)) != "a b\nc" {
		t.Errorf("shCommand: %q, %v", out, err)
	}
}
