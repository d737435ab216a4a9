package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", shell}, &stdout, &stderr); code != 0 {
		t.Fatalf("completion %s: exit %d: %s", shell, code, stderr.String())
	}
	return stdout.String()
}

func TestCompletionModel(t *testing.T) {
	cmds := completionModel()
	byName := map[string]completionCmd{}
	for _, c := range cmds {
		byName[c.name] = c
	}
	if len(byName) != len(commands) {
		t.Errorf("model has %d commands, the CLI %d", len(byName), len(commands))
	}
	want := map[string][]string{
		"serve":      {"ide", "executors", "token", "ssh", "root", "map"},
		"submit":     {"n", "partitions", "proxy", "spark-submit", "ide-kind"},
		"wrap":       {"o", "proxy", "partitions", "ide-kind"},
		"vscode":     {"dir", "ide", "name", "path-mapping", "ide-token-env", "n"},
		"doctor":     {"ide", "executors", "python", "ssh", "ssh-identity", "pycharm-build"},
		"paths":      {"ide", "json"},
		"pycharm":    {"pycharm", "pycharm-build"},
		"completion": nil,
	}
	for cmd, flags := range want {
		c, ok := byName[cmd]
		if !ok {
			t.Errorf("no %s command", cmd)
			continue
		}
		have := map[string]string{}
		for _, f := range c.flags {
			have[f.name] = f.usage
			if f.usage == "" {
				t.Errorf("%s --%s: no description", cmd, f.name)
			}
			if strings.ContainsAny(f.name, " \t") || strings.HasPrefix(f.name, "-") {
				t.Errorf("%s: bad flag name %q", cmd, f.name)
			}
		}
		for _, f := range flags {
			if _, ok := have[f]; !ok {
				t.Errorf("%s: flag %q missing from %v", cmd, f, c.flags)
			}
		}
	}
	// The doctor's usage text has "  - the ports ..." bullets: not flags.
	for _, f := range byName["doctor"].flags {
		if f.name == "the" || f.name == "a" {
			t.Errorf("doctor: prose read as flag %q", f.name)
		}
	}
}

// Deprecated spellings still parse but are not offered: completion
// teaches the vocabulary.
func TestCompletionOmitsDeprecated(t *testing.T) {
	deprecated := map[string][]string{
		"vscode":  {"host", "port", "map", "ide-token"},
		"pycharm": {"host", "port", "build"},
		"wrap":    {"ide"},
		"conf":    {"ide"},
		"submit":  {"ide"},
	}
	for _, c := range completionModel() {
		for _, f := range c.flags {
			for _, old := range deprecated[c.name] {
				if f.name == old {
					t.Errorf("%s: deprecated --%s offered", c.name, old)
				}
			}
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		s := completionScript(t, shell)
		if !strings.Contains(s, "path-mapping") {
			t.Errorf("%s script lacks vscode's path-mapping", shell)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		s := completionScript(t, shell)
		for _, want := range []string{"serve", "doctor", "vscode", "completion", "ssh-known-hosts"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s script lacks %q", shell, want)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", "tcsh"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "want bash, zsh or fish") {
		t.Errorf("unknown shell: exit %d, %q", code, stderr.String())
	}
	if code := run([]string{"completion"}, &stdout, &stderr); code != 2 {
		t.Errorf("no shell: exit %d", code)
	}
}

// The bash script, sourced into a real bash, completes commands and flags.
func TestCompletionBashReal(t *testing.T) {
	bash := testenv.Tool(t, "bash", "scripts/ need it too")
	script := filepath.Join(t.TempDir(), "sparkdap.bash")
	if err := os.WriteFile(script, []byte(completionScript(t, "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = shellquote.Quote(w)
			if w == "" {
				quoted[i] = "''"
			}
		}
		prog := "source " + shellquote.Quote(script) + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_sparkdap\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("sparkdap", "do"); got != "doctor" {
		t.Errorf("sparkdap do<TAB> = %q, want doctor", got)
	}
	if got := complete("sparkdap", "s"); got != "select serve submit" {
		t.Errorf("sparkdap s<TAB> = %q", got)
	}
	if got := complete("sparkdap", "vscode", "--path-"); got != "--path-mapping" {
		t.Errorf("sparkdap vscode --path-<TAB> = %q", got)
	}
	if got := complete("sparkdap", "serve", "--ssh-a"); got != "--ssh-accept-new-host-key" {
		t.Errorf("sparkdap serve --ssh-a<TAB> = %q", got)
	}
	if got := complete("sparkdap", "completion", ""); got != "bash zsh fish --help" {
		t.Errorf("sparkdap completion <TAB> = %q", got)
	}
}

// zsh and fish, where installed, must at least parse their scripts.
func TestCompletionZshFishParse(t *testing.T) {
	for _, c := range []struct{ shell, check string }{{"zsh", "-n"}, {"fish", "--no-execute"}} {
		bin, err := exec.LookPath(c.shell)
		if err != nil {
			t.Logf("no %s here: syntax not checked", c.shell)
			continue
		}
		path := filepath.Join(t.TempDir(), "sparkdap."+c.shell)
		if err := os.WriteFile(path, []byte(completionScript(t, c.shell)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, c.check, path).CombinedOutput(); err != nil {
			t.Errorf("%s %s: %v\n%s", c.shell, c.check, err, out)
		}
	}
}

// Every command's -h shows examples, and runs nothing.
func TestEveryCommandHelpHasExamples(t *testing.T) {
	for name, c := range commands {
		var stdout, stderr bytes.Buffer
		if err := c.run([]string{"-h"}, &stdout, &stderr); err != errHelp {
			t.Errorf("%s -h: %v, want the help", name, err)
		}
		if !strings.Contains(stderr.String(), "Example") || !strings.Contains(stderr.String(), "sparkdap "+name) {
			t.Errorf("%s -h has no examples:\n%s", name, stderr.String())
		}
		if stdout.Len() > 0 {
			t.Errorf("%s -h wrote to stdout: %q", name, stdout.String())
		}
	}
}
