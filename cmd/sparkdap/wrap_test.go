package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrapWritesFile(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", dir, "--partitions", "0,7", "--stages", "3", "--sample-rate", "0.5",
		"--connect-timeout", "2s", "--wait", "--post-mortem", "--proxy", "10.1.2.3:7000"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "remote_debug.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"proxy": "10.1.2.3:7000"`, `"partitions": [0, 7]`, `"stages": [3]`,
		`"sample_rate": 0.5`, `"connect_timeout": 2.0`, `"wait": True`, `"post_mortem": True`, `"token": None`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("generated file lacks %s", want)
		}
	}
}

func TestWrapEmbedToken(t *testing.T) {
	t.Setenv("MY_TOK", "5ec4e7d1a90b2f6c83e0d5a7b1c94f20")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", "-", "--token-env", "MY_TOK", "--embed-token"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"token": "5ec4e7d1a90b2f6c83e0d5a7b1c94f20"`) {
		t.Error("token not embedded")
	}
	if strings.Contains(stderr.String(), "5ec4e7d1a90b2f6c83e0d5a7b1c94f20") {
		t.Error("token printed on stderr")
	}
}

func TestWrapFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"wrap", "--partitions", "a"}, 1, `-partitions: "a" is not an id`},
		{[]string{"wrap", "--sample-rate", "0"}, 1, "--sample-rate: 0: want a number"},
		{[]string{"wrap", "--proxy", "nohost"}, 1, `--proxy: "nohost": want host:port`},
		{[]string{"wrap", "--connect-timeout", "3"}, 2, "invalid value"},
		{[]string{"wrap", "--nope"}, 2, "flag provided but not defined: --nope"},
		{[]string{"wrap", "-o", "/tmp/other.py"}, 1, "must be named remote_debug.py"},
		{[]string{"wrap", "extra"}, 1, "wrap takes only flags"},
		{[]string{"wrap", "--embed-token", "--token-env", "SPARKDAP_TEST_UNSET_VAR"}, 1, "$SPARKDAP_TEST_UNSET_VAR is empty or unset"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// fakeSparkSubmit writes a spark-submit stand-in that records its arguments
// and environment and exits with code.
func fakeSparkSubmit(t *testing.T, code string) (bin, record string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "spark-submit")
	record = filepath.Join(dir, "record")
	script := "#!/bin/sh\n" +
		"for a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + record + "\n" +
		"printf 'PYTHONPATH=%s\\nTOKEN=%s\\n' \"$PYTHONPATH\" \"$SPARKDAP_TOKEN\" >> " + record + "\n" +
		"for a in \"$@\"; do case \"$a\" in *remote_debug.py*) test -f \"${a##*,}\" || echo missing >> " + record + ";; esac; done\n" +
		"echo out-from-spark; echo err-from-spark >&2\nexit " + code + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, record
}

func TestSubmitRunsSparkSubmit(t *testing.T) {
	bin, record := fakeSparkSubmit(t, "0")
	t.Setenv("SPARKDAP_TOKEN", "70c1b3e9d2a84f65b0e7c3d91a2f5b86")
	t.Setenv("PYTHONPATH", "/existing")
	var stdout, stderr bytes.Buffer
	err := runSubmit([]string{"-spark-submit", bin, "--partitions", "1", "--", "--master", "local[2]", "--py-files", "dep.py", "app.py", "arg1"},
		strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Fatalf("runSubmit: %v\nstderr: %s", err, stderr.String())
	}
	lease := "sparkdap: lease 60s (--lease): a worker stopped at a breakpoint that hears nothing from sparkdap serve for 60s clears its breakpoints, resumes and runs on undebugged\n"
	if stdout.String() != "out-from-spark\n" || stderr.String() != lease+"err-from-spark\n" {
		t.Errorf("stdio not passed through: stdout %q stderr %q", stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	got := strings.Join(lines, " ")
	for _, want := range []string{"--master local[2] --py-files dep.py,/", "/remote_debug.py --conf spark.python.daemon.module=remote_debug --conf spark.executorEnv.PYTHONPATH=/",
		" app.py arg1 PYTHONPATH=/", ":/existing TOKEN=70c1b3e9d2a84f65b0e7c3d91a2f5b86"} {
		if !strings.Contains(got, want) {
			t.Errorf("spark-submit got %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "missing") {
		t.Error("the wrapper file did not exist while spark-submit ran")
	}
	if strings.Contains(got, "spark.executorEnv.SPARKDAP_TOKEN") {
		t.Error("token put on the command line of a local-mode job")
	}
}

func TestSubmitPropagatesExitStatus(t *testing.T) {
	bin, _ := fakeSparkSubmit(t, "3")
	var stdout, stderr bytes.Buffer
	err := runSubmit([]string{"-spark-submit", bin, "--", "app.py"}, strings.NewReader(""), &stdout, &stderr)
	var st exitStatusError
	if !errors.As(err, &st) || int(st) != 3 {
		t.Fatalf("runSubmit error = %v, want exit status 3", err)
	}
}

func TestSubmitErrors(t *testing.T) {
	bin, record := fakeSparkSubmit(t, "0")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-spark-submit", bin}, "no spark-submit arguments: put them after --"},
		{[]string{"-spark-submit", bin, "--", "--master", "local"}, "no application"},
		{[]string{"-spark-submit", bin, "--", "--conf", "spark.python.daemon.module=x", "app.py"}, "is already set"},
		{[]string{"-spark-submit", bin, "--sample-rate", "2", "--", "app.py"}, "--sample-rate: 2: want a number"},
		{[]string{"-spark-submit", bin, "--master", "local", "app.py"}, "flag provided but not defined: --master"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		err := runSubmit(tc.args, strings.NewReader(""), &stdout, &stderr)
		msg := stderr.String()
		if err != nil {
			msg += err.Error()
		}
		if err == nil || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: err %v, output %q; want an error mentioning %q", tc.args, err, msg, tc.want)
		}
	}
	if _, err := os.Stat(record); err == nil {
		t.Error("spark-submit ran despite the errors")
	}
}

// TestSubmitKeepsTheTokenOffTheCommandLine: on a cluster master the token
// reaches the executors baked into the shipped wrapper, not as
// spark.executorEnv (which ps, the event log and the UI would show).
func TestSubmitKeepsTheTokenOffTheCommandLine(t *testing.T) {
	for _, dry := range []bool{true, false} {
		bin, record := fakeSparkSubmit(t, "0")
		// The fake copies the shipped wrapper aside before it is removed.
		kept := filepath.Join(t.TempDir(), "kept.py")
		script, _ := os.ReadFile(bin)
		script = []byte(strings.Replace(string(script), "echo out-from-spark",
			`for a in "$@"; do case "$a" in *remote_debug.py*) cp "${a##*,}" `+kept+`;; esac; done; echo out-from-spark`, 1))
		if err := os.WriteFile(bin, script, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("SPARKDAP_TOKEN", "a3f9c0e7b1d54e28c6f0a9b7d3e1c254")
		args := []string{"-spark-submit", bin, "--", "--master", "yarn", "app.py"}
		if dry {
			args = append([]string{"-n"}, args...)
		}
		var stdout, stderr bytes.Buffer
		if err := runSubmit(args, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		argv := stdout.String()
		if !dry {
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			argv, _, _ = strings.Cut(string(b), "PYTHONPATH=")
			wrapper, err := os.ReadFile(kept)
			if err != nil || !strings.Contains(string(wrapper), `"token": "a3f9c0e7b1d54e28c6f0a9b7d3e1c254"`) {
				t.Errorf("the shipped wrapper does not carry the token (%v)", err)
			}
		}
		if strings.Contains(argv, "a3f9c0e7b1d54e28c6f0a9b7d3e1c254") || strings.Contains(argv, "SPARKDAP_TOKEN") {
			t.Errorf("dry run %v: spark-submit arguments %q carry the token", dry, argv)
		}
	}
}

// TestWrapErrorsNameTheFlags: workerwrap reports settings by field; the CLI
// names the flag the user typed, every problem at once.
func TestWrapErrorsNameTheFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--proxy", "nohost"}, []string{`--proxy: "nohost": want host:port`}},
		{[]string{"--sample-rate", "2", "--token-env", "1BAD"}, []string{"--sample-rate: 2: want a number in (0, 1]", `--token-env: "1BAD": not a valid environment variable name`}},
		{[]string{"--connect-timeout", "0s"}, []string{"--connect-timeout: 0s: want more than 0"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"wrap", "-o", t.TempDir()}, tc.args...), &stdout, &stderr); code == 0 {
			t.Fatalf("wrap %v: exit 0", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("wrap %v: stderr %q does not contain %q", tc.args, stderr.String(), w)
			}
		}
	}
}
