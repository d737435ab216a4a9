package shellquote

import (
	"os/exec"
	"runtime"
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
		if got := POSIX.Quote(c.in); got != c.want {
			t.Errorf("POSIX.Quote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPowerShellQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain/path-1.0_x.json", "plain/path-1.0_x.json"},
		{`C:\Users\me\remote_debug.py`, `C:\Users\me\remote_debug.py`},
		{"spark.executorEnv.PYTHONPATH=/a:/b", "spark.executorEnv.PYTHONPATH=/a:/b"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", "'it''s'"},
		{`C:\Program Files\Python311\python.exe`, `'C:\Program Files\Python311\python.exe'`},
		{`C:\it's\x`, `'C:\it''s\x'`},
		{"$env:HOME", "'$env:HOME'"},
		{"$(rm x)", "'$(rm x)'"},
		{"a`b", "'a`b'"},
		{`a"b`, `'a"b'`},
		{"x;y|z&w", "'x;y|z&w'"},
		{"a,b", "'a,b'"}, // , makes an array
		{"@x", "'@x'"},   // splatting
		{"a%b", "'a%b'"},
		{"--%", "'--%'"}, // stop-parsing token
		{"-x", "'-x'"},   // a parameter's name
		{"1kb", "'1kb'"}, // a number: 1024
		{".5", "'.5'"},
		{"~/file", "'~/file'"},
		{"*", "'*'"},
		{"a{b}", "'a{b}'"},
		{"a(b)", "'a(b)'"},
		{"debugpy>=1.6.7,<1.9", "'debugpy>=1.6.7,<1.9'"},
		{"é", "'é'"},
		{"a\u2019b", "'a\u2019\u2019b'"}, // PowerShell takes ’ for a single quote too
		{"\u2018x\u201a\u201b", "'\u2018\u2018x\u201a\u201a\u201b\u201b'"},
	}
	for _, c := range cases {
		if got := PowerShell.Quote(c.in); got != c.want {
			t.Errorf("PowerShell.Quote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEnv(t *testing.T) {
	if got, want := POSIX.Env("SPARKDAP_TOKEN"), `"$SPARKDAP_TOKEN"`; got != want {
		t.Errorf("POSIX.Env = %q, want %q", got, want)
	}
	if got, want := PowerShell.Env("SPARKDAP_TOKEN"), `"$env:SPARKDAP_TOKEN"`; got != want {
		t.Errorf("PowerShell.Env = %q, want %q", got, want)
	}
}

func TestSetEnv(t *testing.T) {
	cases := []struct {
		d                 Dialect
		name, value, want string
	}{
		{POSIX, "SPARKDAP_TOKEN", "3f9a0c", "export SPARKDAP_TOKEN=3f9a0c"},
		{POSIX, "X", "a b'c", `export X='a b'\''c'`},
		{PowerShell, "SPARKDAP_TOKEN", "3f9a0c", "$env:SPARKDAP_TOKEN = '3f9a0c'"},
		{PowerShell, "X", "a b'c", "$env:X = 'a b''c'"},
	}
	for _, c := range cases {
		if got := c.d.SetEnv(c.name, c.value); got != c.want {
			t.Errorf("%v.SetEnv(%q, %q) = %q, want %q", c.d, c.name, c.value, got, c.want)
		}
	}
}

// TestSetEnvRoundTripsThroughSh: the variable sh sets holds the value given.
func TestSetEnvRoundTripsThroughSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range roundTripWords {
		out, err := exec.Command(sh, "-c", POSIX.SetEnv("SPARKDAP_X", s)+`; printf %s "$SPARKDAP_X"`).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("sh set %q as %q", s, out)
		}
	}
}

func TestProgram(t *testing.T) {
	cases := []struct {
		d       Dialect
		in, out string
	}{
		{POSIX, "python3", "python3"},
		{POSIX, "/opt/my python/bin/python", "'/opt/my python/bin/python'"},
		{PowerShell, "python", "python"},
		{PowerShell, `C:\Python311\python.exe`, `C:\Python311\python.exe`},
		{PowerShell, `C:\Program Files\Python311\python.exe`, `& 'C:\Program Files\Python311\python.exe'`},
	}
	for _, c := range cases {
		if got := c.d.Program(c.in); got != c.out {
			t.Errorf("%v.Program(%q) = %q, want %q", c.d, c.in, got, c.out)
		}
	}
}

func TestLocal(t *testing.T) {
	want := POSIX
	if runtime.GOOS == "windows" {
		want = PowerShell
	}
	if Local != want {
		t.Errorf("Local on %s = %v, want %v", runtime.GOOS, Local, want)
	}
	if dialectFor("windows") != PowerShell || dialectFor("linux") != POSIX || dialectFor("darwin") != POSIX {
		t.Error("dialectFor: windows is PowerShell, linux and darwin POSIX")
	}
}

// roundTripWords are words with characters each shell treats specially.
var roundTripWords = []string{"a b", "it's", "$HOME", "x;y", "~/f", "*", "tab\there", "new\nline", "'''",
	"$env:PATH", "a`b", `a"b`, `C:\Program Files\x`, "a,b", "@x", "--%", "-x", "1kb", "$(x)", "a{b}", "a\u2019b", ""}

// TestQuoteRoundTripsThroughSh: what a shell reads back is the word given.
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range roundTripWords {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("sh read %q back as %q", s, out)
		}
	}
}

// TestQuoteRoundTripsThroughPwsh: what PowerShell reads back is the word
// given, and a quoted program runs.
func TestQuoteRoundTripsThroughPwsh(t *testing.T) {
	pwsh, err := exec.LookPath("pwsh")
	if err != nil {
		t.Skip("no pwsh on PATH: the PowerShell dialect is checked only against the table above")
	}
	for _, s := range roundTripWords {
		script := "[Console]::Out.Write(" + PowerShell.Quote(s) + ")"
		out, err := exec.Command(pwsh, "-NoProfile", "-NonInteractive", "-Command", script).Output()
		if err != nil {
			t.Fatalf("pwsh %q: %v", script, err)
		}
		if string(out) != s {
			t.Errorf("pwsh read %q back as %q", s, out)
		}
		// As an argument in argument mode, the way a printed command uses it.
		script = "function w { [Console]::Out.Write($args[0]) }; w " + PowerShell.Quote(s)
		out, err = exec.Command(pwsh, "-NoProfile", "-NonInteractive", "-Command", script).Output()
		if err != nil {
			t.Fatalf("pwsh %q: %v", script, err)
		}
		if string(out) != s {
			t.Errorf("pwsh read argument %q back as %q", s, out)
		}
	}
	out, err := exec.Command(pwsh, "-NoProfile", "-NonInteractive", "-Command",
		PowerShell.Program(pwsh)+" -NoProfile -NonInteractive -Command "+PowerShell.Quote("[Console]::Out.Write('ran')")).Output()
	if err != nil || string(out) != "ran" {
		t.Errorf("pwsh running %s: %q, %v", PowerShell.Program(pwsh), out, err)
	}
}
