package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// wrapperIn writes a real wrapper with `sparkdap wrap` into a new directory
// (with a space in its name, to exercise the quoting) and returns its path.
func wrapperIn(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my wrapper")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("wrap: exit %d: %s", code, stderr.String())
	}
	return filepath.Join(dir, "remote_debug.py")
}

func TestConfPrintsOverridesNotToken(t *testing.T) {
	t.Setenv("SPARKDAP_TOKEN", "5ec4e7d1a90b2f6c83e0d5a7b1c94f20")
	dir := filepath.Join(t.TempDir(), "sd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "remote_debug.py")
	if err := os.WriteFile(path, []byte("# wrapper\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"conf", "-wrapper", path, "--partitions", "1", "--wait"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"--py-files " + path + "\n",
		"--conf spark.python.daemon.module=remote_debug\n",
		"--conf spark.executorEnv.PYTHONPATH=" + dir + "\n",
		"--conf spark.executorEnv.SPARKDAP_PARTITIONS=1\n",
		"--conf spark.executorEnv.SPARKDAP_WAIT=true\n",
		`--conf spark.executorEnv.SPARKDAP_TOKEN="$SPARKDAP_TOKEN"`,
		`.config("spark.python.daemon.module", "remote_debug")`,
		`.config("spark.submit.pyFiles", "` + path + `")`,
		`.config("spark.executorEnv.SPARKDAP_TOKEN", os.environ.get("SPARKDAP_TOKEN", ""))`,
		"sparkdap conf --connect",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("conf output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SPARKDAP_PROXY") || strings.Contains(out, "5ec4e7d1a90b2f6c83e0d5a7b1c94f20") {
		t.Errorf("conf output has an unrequested override or the token:\n%s", out)
	}
}

// TestConfRefusesMissingWrapper: settings naming a wrapper that is not
// there would fail every Python worker, so conf prints none.
func TestConfRefusesMissingWrapper(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{
		{"conf", "-wrapper", filepath.Join(empty, "remote_debug.py")},
		{"conf", "-wrapper", empty}, // a directory without the wrapper
		{"conf", "-connect", "-wrapper", filepath.Join(empty, "remote_debug.py")},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "write it first: sparkdap wrap -o "+empty) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, nothing printed and the wrap hint", args, code, stdout.String(), stderr.String())
		}
	}
}

// TestConfSnippetFailsOpen runs the printed SparkSession.builder snippet in
// a real Python against a stand-in pyspark that records the settings: with
// the wrapper they are all applied, without it none.
func TestConfSnippetFailsOpen(t *testing.T) {
	py := testenv.Python(t, "debugpy")
	t.Setenv("SPARKDAP_TOKEN", "70c1b3e9d2a84f65b0e7c3d91a2f5b86")
	path := wrapperIn(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"conf", "-wrapper", path, "--partitions", "0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	snippet := out[strings.Index(out, "# PySpark, before"):]

	fake := t.TempDir()
	pkg := filepath.Join(fake, "pyspark", "sql")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := `import json, sys
class _Builder:
    def __init__(self): self.conf = {}
    def config(self, k, v):
        self.conf[k] = v
        return self
    def getOrCreate(self):
        json.dump(self.conf, sys.stdout)
class SparkSession:
    builder = _Builder()
`
	for name, text := range map[string]string{
		filepath.Join(fake, "pyspark", "__init__.py"): "",
		filepath.Join(pkg, "__init__.py"):             stub,
		filepath.Join(fake, "job.py"):                 snippet,
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runSnippet := func() map[string]string {
		t.Helper()
		cmd := exec.Command(py, filepath.Join(fake, "job.py"))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+fake)
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("the snippet does not run: %v\n%s", err, snippet)
		}
		var conf map[string]string
		if err := json.Unmarshal(got, &conf); err != nil {
			t.Fatalf("%v: %q", err, got)
		}
		return conf
	}
	conf := runSnippet()
	want := map[string]string{
		"spark.submit.pyFiles":                  path,
		"spark.python.daemon.module":            "remote_debug",
		"spark.executorEnv.PYTHONPATH":          filepath.Dir(path),
		"spark.executorEnv.SPARKDAP_PARTITIONS": "0",
		"spark.executorEnv.SPARKDAP_TOKEN":      "70c1b3e9d2a84f65b0e7c3d91a2f5b86",
	}
	for k, v := range want {
		if conf[k] != v {
			t.Errorf("with the wrapper: %s = %q, want %q (all: %v)", k, conf[k], v, conf)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if conf := runSnippet(); len(conf) != 0 {
		t.Errorf("without the wrapper the snippet still sets %v: every Python worker would fail", conf)
	}
}

// TestConfConnectScript runs the script `conf -connect` prints with bash,
// against a stand-in start-connect-server.sh that records its arguments
// and environment: the wrapper's settings must reach the server process,
// the token must not be in the script, and without an importable wrapper
// the server must start with PySpark's own daemon.
func TestConfConnectScript(t *testing.T) {
	py := testenv.Python(t, "debugpy")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skipf("needs bash: %v", err)
	}
	t.Setenv("SPARKDAP_TOKEN", "e2b8d0f4a6c1937e5d0b2f8a4c6e1d39")
	path := wrapperIn(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"conf", "-connect", "-wrapper", path, "--partitions", "0,2", "--proxy", "127.0.0.1:7000"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	script := filepath.Join(t.TempDir(), "connect-server.sh")
	if err := os.WriteFile(script, stdout.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout.String(), "e2b8d0f4a6c1937e5d0b2f8a4c6e1d39") {
		t.Errorf("the script contains the token:\n%s", stdout.String())
	}

	home := t.TempDir()
	record := filepath.Join(home, "record")
	if err := os.Mkdir(filepath.Join(home, "sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	fakeServer := "#!/bin/sh\nfor a in \"$@\"; do printf 'ARG %s\\n' \"$a\"; done > " + record + "\n" +
		"env | grep -E '^(PYTHONPATH|PYSPARK_PYTHON|SPARKDAP_[A-Z_]+)=' >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(home, "sbin", "start-connect-server.sh"), []byte(fakeServer), 0o755); err != nil {
		t.Fatal(err)
	}
	start := func() (recorded, stderr string) {
		t.Helper()
		os.Remove(record)
		cmd := exec.Command(bash, script, "--master", "local[2]", "--conf", "spark.ui.enabled=false")
		cmd.Dir = t.TempDir() // no stray remote_debug.py in the working directory
		cmd.Env = append(os.Environ(), "SPARK_HOME="+home, "PYSPARK_PYTHON="+py, "PYTHONPATH=/existing")
		var errBuf bytes.Buffer
		cmd.Stderr = &errBuf
		if err := cmd.Run(); err != nil {
			t.Fatalf("the script failed: %v\n%s", err, errBuf.String())
		}
		b, err := os.ReadFile(record)
		if err != nil {
			t.Fatalf("the script did not start the server: %v\n%s", err, errBuf.String())
		}
		return string(b), errBuf.String()
	}

	got, _ := start()
	for _, want := range []string{
		"ARG --wait\n",
		"ARG --conf\nARG spark.python.daemon.module=remote_debug\n",
		"ARG --conf\nARG spark.connect.grpc.binding.address=127.0.0.1\n",
		"ARG --master\nARG local[2]\nARG --conf\nARG spark.ui.enabled=false\n", // the user's, last
		"PYTHONPATH=" + filepath.Dir(path) + ":/existing\n",
		"PYSPARK_PYTHON=" + py + "\n",
		"SPARKDAP_PARTITIONS=0,2\n",
		"SPARKDAP_PROXY=127.0.0.1:7000\n",
		"SPARKDAP_TOKEN=e2b8d0f4a6c1937e5d0b2f8a4c6e1d39\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the server got\n%s\nwant it to contain %q", got, want)
		}
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	got, msg := start()
	if !strings.Contains(got, "ARG spark.python.daemon.module=pyspark.daemon\n") || strings.Contains(got, "=remote_debug") {
		t.Errorf("without the wrapper the server got\n%s\nwant spark.python.daemon.module=pyspark.daemon", got)
	}
	if !strings.Contains(msg, "cannot import remote_debug") {
		t.Errorf("the script did not say it starts without the wrapper: %q", msg)
	}
}

// TestConfPrintsWhatSubmitSets: `sparkdap conf` prints every Spark setting
// `sparkdap submit` puts on the command line for the same driver script,
// with the same values (the wrapper's directory aside: submit writes its
// own), in both its spark-submit options and its SparkSession snippet. The
// one intended difference is the token: submit bakes it into the wrapper it
// generates, conf passes it from the environment.
func TestConfPrintsWhatSubmitSets(t *testing.T) {
	t.Setenv("SPARKDAP_TOKEN", "c7a2e5f1b0d94c83a6e2f7b1d0c5a948")
	app := filepath.Join(t.TempDir(), "proj", "loans.py")
	wrapDir := filepath.Join(t.TempDir(), "wrap")
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", wrapDir}, &stdout, &stderr); code != 0 {
		t.Fatalf("wrap: exit %d: %s", code, stderr.String())
	}
	flags := []string{"--partitions", "2", "--proxy", "10.0.0.5:5678"}

	// submit, as it would run spark-submit: a cluster master, where every
	// setting must travel in the conf.
	stdout.Reset()
	args := append(append([]string{"submit", "-n", "--spark-submit", "/bin/spark-submit"}, flags...),
		"--", "--master", "yarn", app)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("submit -n: exit %d: %s", code, stderr.String())
	}
	fields := strings.Fields(stdout.String())
	submitted := map[string]string{}
	wrapperDir := ""
	for i := 1; i+1 < len(fields); i++ {
		switch fields[i] {
		case "--conf":
			k, v, _ := strings.Cut(fields[i+1], "=")
			submitted[k] = v
		case "--py-files":
			submitted["spark.submit.pyFiles"] = fields[i+1]
			wrapperDir = filepath.Dir(fields[i+1])
		}
	}
	if wrapperDir == "" {
		t.Fatalf("submit -n printed no --py-files: %s", stdout.String())
	}
	for k, v := range submitted {
		submitted[k] = strings.ReplaceAll(v, wrapperDir, "WRAPPER_DIR")
	}
	// Options given to submit are baked into its wrapper; conf passes them
	// as executor environment overrides. Both reach the worker as such.
	submitted["spark.executorEnv.SPARKDAP_PARTITIONS"] = "2"
	submitted["spark.executorEnv.SPARKDAP_PROXY"] = "10.0.0.5:5678"

	stdout.Reset()
	args = append([]string{"conf", "--wrapper", filepath.Join(wrapDir, "remote_debug.py"),
		"--driver-dir", filepath.Dir(app)}, flags...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("conf: exit %d: %s", code, stderr.String())
	}
	options, snippet := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		line = strings.ReplaceAll(line, wrapDir, "WRAPPER_DIR")
		if v, ok := strings.CutPrefix(line, "--conf "); ok {
			k, v, _ := strings.Cut(v, "=")
			options[k] = v
		} else if v, ok := strings.CutPrefix(line, "--py-files "); ok {
			options["spark.submit.pyFiles"] = v
		} else if v, ok := strings.CutPrefix(strings.TrimSpace(line), ".config("); ok {
			var k, val string
			dec := json.NewDecoder(strings.NewReader(v))
			if err := dec.Decode(&k); err != nil {
				t.Fatalf("snippet line %q: %v", line, err)
			}
			if err := json.Unmarshal([]byte("["+strings.TrimSuffix(v, ")")+"]"), &[]any{&k, &val}); err == nil {
				snippet[k] = val
			} else {
				snippet[k] = "(from the environment)" // the token's os.environ.get(...)
			}
		}
	}
	const tokenKey = "spark.executorEnv.SPARKDAP_TOKEN"
	if _, ok := options[tokenKey]; !ok {
		t.Errorf("conf does not pass the token:\n%s", stdout.String())
	}
	if _, ok := submitted[tokenKey]; ok {
		t.Errorf("submit put the token on the command line: %s", fields)
	}
	delete(options, tokenKey)
	delete(snippet, tokenKey)
	for name, got := range map[string]map[string]string{"spark-submit options": options, "SparkSession snippet": snippet} {
		for k, want := range submitted {
			if got[k] != want {
				t.Errorf("conf's %s: %s=%q, submit sets %q", name, k, got[k], want)
			}
		}
		for k := range got {
			if _, ok := submitted[k]; !ok {
				t.Errorf("conf's %s set %s, which submit does not", name, k)
			}
		}
	}
	if submitted["spark.executorEnv.SPARKDAP_DRIVER_DIR"] != filepath.Dir(app) {
		t.Errorf("submit sets SPARKDAP_DRIVER_DIR=%q, want the script's directory %s", submitted["spark.executorEnv.SPARKDAP_DRIVER_DIR"], filepath.Dir(app))
	}
}

// TestLeaseIsPrinted: conf and submit say how long a stopped worker waits
// for a silent serve: --lease when given (conf then also sets it on the
// executors), else what the wrapper file bakes.
func TestLeaseIsPrinted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"wrap", "-o", dir, "--lease", "2m"}, &stdout, &stderr); code != 0 {
		t.Fatalf("wrap: exit %d: %s", code, stderr.String())
	}
	path := filepath.Join(dir, "remote_debug.py")
	for _, tc := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"conf", "-wrapper", path}, []string{"# lease 120s (--lease): a worker stopped at a breakpoint that hears nothing from sparkdap serve for 120s"}, "SPARKDAP_LEASE"},
		{[]string{"conf", "-wrapper", path, "--lease", "45s"}, []string{"# lease 45s (--lease)", "--conf spark.executorEnv.SPARKDAP_LEASE=45\n"}, "120s"},
		{[]string{"conf", "-wrapper", path, "--lease", "0"}, []string{"# no lease (--lease 0)", "--conf spark.executorEnv.SPARKDAP_LEASE=0\n"}, "120s"},
	} {
		stdout.Reset()
		stderr.Reset()
		if code := run(tc.args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, stderr.String())
		}
		for _, want := range tc.want {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%q: output lacks %q:\n%s", tc.args, want, stdout.String())
			}
		}
		if strings.Contains(stdout.String(), tc.not) {
			t.Errorf("%q: output has %q:\n%s", tc.args, tc.not, stdout.String())
		}
	}
}

// TestLeaseRefused: a lease the worker would not honour is refused by
// every command that takes it, naming the flag.
func TestLeaseRefused(t *testing.T) {
	wrapper := wrapperIn(t)
	for _, cmd := range [][]string{{"wrap", "-o", t.TempDir()}, {"conf", "-wrapper", wrapper}, {"submit", "-n"}} {
		for _, bad := range []string{"5s", "-1s", "25h"} {
			args := append(append([]string{}, cmd...), "--lease", bad)
			if cmd[0] == "submit" {
				args = append(args, "--", "app.py")
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), "--lease") || !strings.Contains(stderr.String(), "want 0 (no lease) or from 10s to 24h0m0s") {
				t.Errorf("%q: exit %d, stderr %q; want a refusal naming --lease", args, code, stderr.String())
			}
		}
	}
}

// TestProxyBackoffFlag: --proxy-backoff reaches the executors (conf sets
// it on them, in the seconds the worker reads) and one the worker would
// not take is refused by every command that takes it, naming the flag.
func TestProxyBackoffFlag(t *testing.T) {
	wrapper := wrapperIn(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"conf", "-wrapper", wrapper, "--proxy-backoff", "2m"}, &stdout, &stderr); code != 0 {
		t.Fatalf("conf: exit %d: %s", code, stderr.String())
	}
	if want := "--conf spark.executorEnv.SPARKDAP_PROXY_BACKOFF=120\n"; !strings.Contains(stdout.String(), want) {
		t.Errorf("conf --proxy-backoff 2m: output lacks %q:\n%s", want, stdout.String())
	}
	for _, cmd := range [][]string{{"wrap", "-o", t.TempDir()}, {"conf", "-wrapper", wrapper}, {"submit", "-n"}} {
		for _, bad := range []string{"-1s", "25h"} {
			args := append(append([]string{}, cmd...), "--proxy-backoff", bad)
			if cmd[0] == "submit" {
				args = append(args, "--", "app.py")
			}
			stdout.Reset()
			stderr.Reset()
			code := run(args, &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), "--proxy-backoff") || !strings.Contains(stderr.String(), "want 0 (none) to 24h0m0s") {
				t.Errorf("%q: exit %d, stderr %q; want a refusal naming --proxy-backoff", args, code, stderr.String())
			}
		}
	}
}

// withLocalShell makes the user's shell d for the rest of the test.
func withLocalShell(t *testing.T, d shellquote.Dialect) {
	t.Helper()
	old := localShell
	localShell = d
	t.Cleanup(func() { localShell = old })
}

// TestConfSubmitOptionsPowerShell: on Windows the spark-submit options are
// what PowerShell reads back as the settings: paths bare or in literal
// single quotes (backslashes as they are, ' doubled), the token from
// $env:, and a comment saying which shell they are for.
func TestConfSubmitOptionsPowerShell(t *testing.T) {
	var b strings.Builder
	writeSubmitOptions(&b, shellquote.PowerShell, `C:\Users\me\remote_debug.py`, []confOption{
		{key: "spark.python.daemon.module", value: "remote_debug"},
		{key: "spark.executorEnv.PYTHONPATH", value: `C:\Users\me`},
		{key: "spark.executorEnv.SPARKDAP_DRIVER_DIR", value: `C:\Users\me\my job's dir`},
		{key: "spark.executorEnv.SPARKDAP_TOKEN", env: "SPARKDAP_TOKEN"},
	})
	want := `# spark-submit options, in PowerShell syntax (put them before the application .py file):
--py-files C:\Users\me\remote_debug.py
--conf spark.python.daemon.module=remote_debug
--conf spark.executorEnv.PYTHONPATH=C:\Users\me
--conf 'spark.executorEnv.SPARKDAP_DRIVER_DIR=C:\Users\me\my job''s dir'
--conf spark.executorEnv.SPARKDAP_TOKEN="$env:SPARKDAP_TOKEN"
`
	if got := b.String(); got != want {
		t.Errorf("PowerShell options:\n%s\nwant:\n%s", got, want)
	}
}

// TestConfPowerShell: conf prints its options for the user's shell, and
// only those: the SparkSession snippet is Python either way.
func TestConfPowerShell(t *testing.T) {
	withLocalShell(t, shellquote.PowerShell)
	path := wrapperIn(t) // in a directory whose name has a space
	var stdout, stderr bytes.Buffer
	if code := run([]string{"conf", "-wrapper", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"# spark-submit options, in PowerShell syntax",
		"--py-files '" + path + "'\n",
		`--conf spark.executorEnv.SPARKDAP_TOKEN="$env:SPARKDAP_TOKEN"` + "\n",
		`.config("spark.executorEnv.SPARKDAP_TOKEN", os.environ.get("SPARKDAP_TOKEN", ""))`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("conf output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"$SPARKDAP_TOKEN"`) {
		t.Errorf("conf output has the POSIX token reference:\n%s", out)
	}
}
