package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// One flag name means one thing: every name more than one command takes
// has the same type in each, and its usage starts with the vocabulary's
// text (so it was declared through it). Deprecated spellings are exempt
// for their last release, but must name a replacement the command has.
func TestFlagVocabulary(t *testing.T) {
	type use struct {
		cmd   string
		typ   reflect.Type
		usage string
	}
	uses := map[string][]use{}
	for name, c := range commands {
		spec := c.spec(io.Discard)
		spec.fs.VisitAll(func(f *flag.Flag) {
			if !spec.current(f.Name) {
				repl := strings.Fields(spec.deprecated[f.Name])
				if len(repl) == 0 || spec.fs.Lookup(strings.TrimLeft(repl[0], "-")) == nil {
					t.Errorf("%s: deprecated --%s names no flag of the command as its replacement: %q", name, f.Name, spec.deprecated[f.Name])
				}
				return
			}
			uses[f.Name] = append(uses[f.Name], use{name, reflect.TypeOf(f.Value), f.Usage})
		})
	}
	var shared []string
	for n, us := range uses {
		if len(us) > 1 {
			shared = append(shared, n)
		}
	}
	sort.Strings(shared)
	if len(shared) < 10 {
		t.Fatalf("only %d shared flags found (%v): the walk is broken", len(shared), shared)
	}
	for _, n := range shared {
		us := uses[n]
		want, ok := vocab[n]
		if !ok {
			t.Errorf("--%s is taken by %d commands but is not in the vocabulary (vocab.go)", n, len(us))
			continue
		}
		for _, u := range us {
			if u.typ != us[0].typ {
				t.Errorf("--%s is a %v in %s but a %v in %s", n, u.typ, u.cmd, us[0].typ, us[0].cmd)
			}
			if !strings.HasPrefix(u.usage, want) {
				t.Errorf("%s --%s: usage %q does not start with the vocabulary's meaning %q", u.cmd, n, u.usage, want)
			}
		}
	}
	// The vocabulary names no flag that nothing takes.
	for n := range vocab {
		if len(uses[n]) == 0 {
			t.Errorf("vocabulary entry --%s: no command takes it", n)
		}
	}
	// The names the issue found overloaded, pinned to their one meaning.
	for n, typ := range map[string]reflect.Type{
		"ide":       reflect.TypeOf((*addrValue)(nil)),
		"ide-kind":  reflect.TypeOf((*kindValue)(nil)),
		"executors": reflect.TypeOf((*addrValue)(nil)),
		"pycharm":   reflect.TypeOf((*addrValue)(nil)),
	} {
		for _, u := range uses[n] {
			if u.typ != typ {
				t.Errorf("%s --%s: %v, want %v", u.cmd, n, u.typ, typ)
			}
		}
	}
	if got := len(uses["ide"]); got < 4 {
		t.Errorf("--ide (the IDE address) is taken by %d commands, want serve, doctor, paths, vscode", got)
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

const deprecationNotice = "is deprecated and will be removed in the next release"

// Each deprecated spelling still does what it did, says so on one stderr
// line, and gives the same result as the new spelling, which says nothing.
func TestDeprecatedSpellings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ideTokenEnv, "")
	tests := []struct {
		name     string
		old, new []string
		notice   string // the replacement the notice names
		notices  int    // deprecated flags given: one line each
	}{
		{"vscode --host/--port", []string{"vscode", "--dir", dir, "-n", "--host", "10.0.0.7", "--port", "4800"},
			[]string{"vscode", "--dir", dir, "-n", "--ide", "10.0.0.7:4800"}, "use --ide HOST:PORT", 2},
		{"vscode --port alone", []string{"vscode", "--dir", dir, "-n", "--port", "4800"},
			[]string{"vscode", "--dir", dir, "-n", "--ide", "127.0.0.1:4800"}, "use --ide HOST:PORT", 1},
		{"vscode --map", []string{"vscode", "--dir", dir, "-n", "--map", "/opt/jobs=${workspaceFolder}"},
			[]string{"vscode", "--dir", dir, "-n", "--path-mapping", "/opt/jobs=${workspaceFolder}"}, "use --path-mapping", 1},
		{"vscode --ide-token (boolean)", []string{"vscode", "--dir", dir, "-n", "--ide-token"},
			[]string{"vscode", "--dir", dir, "-n", "--ide-token-env", ideTokenEnv}, "use --ide-token-env " + ideTokenEnv, 1},
		{"pycharm --host/--port", []string{"pycharm", "--host", "10.0.0.7", "--port", "5005"},
			[]string{"pycharm", "--pycharm", "10.0.0.7:5005"}, "use --pycharm HOST:PORT", 2},
		{"pycharm --build", []string{"pycharm", "--build", "253.33813.30"},
			[]string{"pycharm", "--pycharm-build", "253.33813.30"}, "use --pycharm-build BUILD", 1},
		{"wrap --ide pycharm", []string{"wrap", "-o", "-", "--ide", "pycharm"},
			[]string{"wrap", "-o", "-", "--ide-kind", "pycharm"}, "use --ide-kind", 1},
		{"submit --ide pycharm", []string{"submit", "-n", "--spark-submit", "/bin/true", "--ide", "pycharm", "--", "app.py"},
			[]string{"submit", "-n", "--spark-submit", "/bin/true", "--ide-kind", "pycharm", "--", "app.py"}, "use --ide-kind", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oc, oout, oerr := runCLI(t, tt.old...)
			nc, nout, nerr := runCLI(t, tt.new...)
			if oc != 0 || nc != 0 {
				t.Fatalf("exit %d (old), %d (new)\nold stderr: %s\nnew stderr: %s", oc, nc, oerr, nerr)
			}
			// submit's wrapper lives in a fresh temp dir each run.
			tmp := regexp.MustCompile(`sparkdap-submit-[0-9]+`)
			oout, nout = tmp.ReplaceAllString(oout, "TMP"), tmp.ReplaceAllString(nout, "TMP")
			if oout != nout {
				t.Errorf("old and new spellings differ:\nold:\n%s\nnew:\n%s", oout, nout)
			}
			if strings.Contains(nerr, deprecationNotice) {
				t.Errorf("new spelling warned: %s", nerr)
			}
			var notices []string
			for _, l := range strings.Split(oerr, "\n") {
				if strings.Contains(l, deprecationNotice) {
					notices = append(notices, l)
					if !strings.Contains(l, tt.notice) {
						t.Errorf("notice %q does not say %q", l, tt.notice)
					}
				}
			}
			if len(notices) != tt.notices {
				t.Errorf("%d notices, want %d (one per deprecated flag): %q", len(notices), tt.notices, notices)
			}
		})
	}
	// The pycharm kind baked in by the old spelling is really pycharm's.
	_, out, _ := runCLI(t, "wrap", "-o", "-", "--ide", "pycharm")
	_, dapOut, _ := runCLI(t, "wrap", "-o", "-")
	if out == dapOut {
		t.Error("wrap --ide pycharm made the dap wrapper")
	}
}

// New spellings validate like the old ones and name the flag given.
func TestVocabularyErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"vscode", "--dir", dir, "-n", "--ide", "nonsense"}, 2, `invalid value "nonsense" for flag --ide: want HOST:PORT`},
		{[]string{"vscode", "--dir", dir, "-n", "--ide", "127.0.0.1:0"}, 1, "--ide 127.0.0.1:0: port \"0\": want 1..65535"},
		{[]string{"vscode", "--dir", dir, "-n", "--path-mapping", "nolocal"}, 1, `--path-mapping "nolocal": want REMOTE=LOCAL`},
		{[]string{"vscode", "--dir", dir, "-n", "--ide-token-env", "not a name"}, 1, `--ide-token-env "not a name": not an environment variable name`},
		{[]string{"pycharm", "--pycharm", "127.0.0.1:70000"}, 1, "--pycharm 127.0.0.1:70000: port 70000: want 1..65535"},
		{[]string{"wrap", "-o", "-", "--ide-kind", "emacs"}, 2, `invalid value "emacs" for flag --ide-kind: want dap or pycharm`},
		{[]string{"wrap", "-o", "-", "--ide", "127.0.0.1:4711"}, 2, `for flag --ide: want dap or pycharm`},
		{[]string{"serve", "--ide-kind", "emacs"}, 2, "want dap or pycharm"},
		{[]string{"serve", "--max-stop", "-5s"}, 1, "--max-stop -5s: want a duration of 0 (no limit) or more"},
		{[]string{"paths", "--ide", "4711"}, 2, "for flag --ide: want HOST:PORT"},
		{[]string{"wrap", "-o", "-", "--partitions", "x"}, 1, "--partitions: "},
		{[]string{"doctor", "--ssh", "me@", "--timeout", "1s", "--ide", "bad"}, 2, "for flag --ide"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tt.args, code, firstLine(stderr), tt.code, tt.want)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// vscode --ide-token-env writes a reference to the variable, never a token.
func TestVSCodeIDETokenEnv(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runCLI(t, "vscode", "--dir", dir, "-n", "--ide-token-env", "MY_IDE_TOKEN", "--ide", "[::1]:4800")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`"sparkdapToken": "${env:MY_IDE_TOKEN}"`, `"host": "::1"`, `"port": 4800`} {
		if !strings.Contains(out, want) {
			t.Errorf("launch.json lacks %s:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".vscode")); err == nil {
		t.Error("-n wrote something")
	}
}
