//go:build linux

package integration

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestYARNRecipe runs examples/README.md's YARN recipe on a real one-node
// YARN (yarn_cluster_test.go, shared by the package's YARN tests): the
// loans job in client mode with loanlib.py shipped as a --py-files zip, in
// both of the recipe's forms. "submit": the README's `sparkdap submit`
// block with the proxy beside the job. "wrap-ssh": the recipe end to end
// as printed — `sparkdap serve --ssh` through a real sshd, whose agent is
// the executors' address, the wrapper from `sparkdap wrap`, the README's
// ssh/scp copy to the edge node, the edge node's packed environment built
// by the README's own commands, the README's doctor block with serve up,
// and the README's spark-submit command. The packed environment has no
// debugpy: the containers debug with the one the job ships. Each must stop
// in the zipped module, a UDF and a driver lambda with the developer's
// path and line, the YARN container id as the task label and the task's
// real values, and end with the result of a plain YARN run.
func TestYARNRecipe(t *testing.T) {
	testenv.SkipIfShort(t, "starts YARN and a Spark job on it")
	py := python(t)
	sparkHome, sparkSubmit := requireStandalone(t, py)
	ctx := testContext(t, 15*time.Minute)
	start := time.Now()
	y := sharedYARN(t)

	// The site's Spark configuration, as a YARN cluster's spark-defaults
	// would hold it, so that the recipe's command lines stay as printed:
	// Spark's jars from the local disk (nothing large is uploaded), the
	// staging directory under the cluster's, one small executor.
	confDir := y.smallSparkConf(t, sparkHome)
	// The pip-installed pyspark has no python/lib/pyspark.zip for Spark to
	// ship; the containers run on this machine, so they get pyspark and py4j
	// from a directory holding only those two (links to the installed
	// ones): whatever else the job imports (pandas, pyarrow) must come from
	// the executors' Python, and debugpy from the job, as on a real cluster.
	site := []string{"HADOOP_CONF_DIR=" + y.ConfDir, "YARN_CONF_DIR=" + y.ConfDir, "SPARK_CONF_DIR=" + confDir,
		"SPARK_HOME=" + sparkHome, "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_ARCHIVES_PATH=local:" + yarnPySparkOnly(t, py)}
	// The plain run's executors run this machine's Python, which has
	// pandas and pyarrow.
	env := append(append([]string{}, site...), "PYSPARK_PYTHON="+py, "PYSPARK_DRIVER_PYTHON="+py)

	lp := yarnLoans(t)
	plainOut := filepath.Join(t.TempDir(), "plain.json")
	plain := startSpark(t, ctx, lp.ship, env, sparkSubmit, "--master", "yarn", "--deploy-mode", "client",
		"--py-files", "loanlib.zip", "loans.py", "--output", plainOut)
	plain.wait(t, ctx)
	t.Logf("plain YARN run: %s", plain.elapsed.Round(time.Second))
	want := readJSON(t, plainOut)

	t.Run("submit", func(t *testing.T) {
		// On the edge node, with the proxy beside the job (no tunnel: the
		// recipe's edge.example.com:5678 is the proxy's executor port): the
		// README's submit block as printed, with the packed environment
		// where its --archives ../pyenv.tar.gz#pyenv finds it.
		if _, err := exec.LookPath("zip"); err != nil {
			testenv.Missing(t, "the recipe zips loanlib.py with Info-ZIP's zip (apt-get install zip): %v", err)
		}
		l := newLoansLayout(t)
		if err := os.Symlink(packedEnv(t, py), filepath.Join(filepath.Dir(l.ship), "pyenv.tar.gz")); err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, ctx, "--root", l.src)
		ide := yarnAttach(t, ctx, p, l)
		script := strings.ReplaceAll(readmeBlock(t, "sparkdap submit --proxy", "cd loans", "export SPARKDAP_TOKEN="),
			"edge.example.com:5678", p.Executors)
		path := filepath.Dir(sparkdapBinary(t)) + string(os.PathListSeparator) + yarnPath(py, sparkSubmit)
		job := startSpark(t, ctx, l.ship, append(append([]string{}, site...), "SPARKDAP_TOKEN="+p.Token, "PATH="+path),
			"bash", "-euc", script)
		yarnStops(t, ctx, ide, job, l, y, inPackedEnv(t, ctx, ide))
		job.wait(t, ctx)
		t.Logf("debugged YARN run: %s", job.elapsed.Round(time.Second))
		if g, w := fmt.Sprint(printedResult(t, job.out.String())), fmt.Sprint(want); g != w {
			t.Errorf("result under sparkdap differs from the plain YARN run:\n got %s\nwant %s", g, w)
		}
	})

	t.Run("wrap-ssh", func(t *testing.T) {
		begin := time.Now()
		// On the edge node, once: the packed environment (built once per
		// package run by the README's commands) beside the job's directory,
		// where the recipe's --archives ../pyenv.tar.gz#pyenv finds it.
		if _, err := exec.LookPath("zip"); err != nil {
			testenv.Missing(t, "the recipe zips loanlib.py with Info-ZIP's zip (apt-get install zip): %v", err)
		}
		// The developer's sources on the laptop (~/src/loans).
		l := newLoansLayout(t)
		laptopHome := t.TempDir()
		if err := os.MkdirAll(filepath.Join(laptopHome, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.src, filepath.Join(laptopHome, "src", "loans")); err != nil {
			t.Fatal(err)
		}
		// The edge node's home directory, with the packed environment (built
		// once per package run by the README's commands) where the recipe
		// made it: pyenv/ and pyenv.tar.gz.
		edge := t.TempDir()
		packed := packedEnv(t, py)
		for _, name := range []string{"pyenv.tar.gz", "pyenv"} {
			if err := os.Symlink(filepath.Join(filepath.Dir(packed), name), filepath.Join(edge, name)); err != nil {
				t.Fatal(err)
			}
		}
		// On the laptop: sparkdap serve --root ~/src/loans --ssh me@edge.example.com --remote-listen 0.0.0.0:5678
		// (the edge node is this machine's sshd; executors reach the agent
		// on its loopback).
		g := startGateway(t, ctx, "127.0.0.1")
		remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
		p := tunnelProxy(t, ctx, g, remote, "--root", l.src, "--agent-path", sparkdapBinary(t))
		ide := yarnAttach(t, ctx, p, l)
		// sparkdap wrap -o /tmp --proxy edge.example.com:5678
		wrapped := t.TempDir()
		if out, err := exec.CommandContext(ctx, sparkdapBinary(t), "wrap", "-o", wrapped, "--proxy", remote).CombinedOutput(); err != nil {
			t.Fatalf("sparkdap wrap: %v\n%s", err, out)
		}
		laptop := edgeShell(t, g, edge, wrapped, remote, p)
		// The laptop's cache stays the one `sparkdap wrap` put the
		// debugpy wheel in, for doctor's test worker.
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		laptopEnv := append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CACHE_HOME=")
		}), "HOME="+laptopHome, "XDG_CACHE_HOME="+cache, "SPARKDAP_TOKEN="+p.Token, "PATH="+yarnPath(py, sparkSubmit))
		// The README's copy to the edge node, as printed: its ssh (the
		// job's directory) and scp lines.
		copyJob := onlyLines(readmeBlock(t, "sparkdap wrap -o /tmp"), "ssh ", "scp ")
		cmd := exec.CommandContext(ctx, "bash", "-euc", laptop+copyJob)
		cmd.Env = laptopEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the README's copy to the edge node:\n%s\nfailed: %v\n%s", copyJob, err, out)
		}
		// The README's doctor block, with serve up, passes: the packed
		// Python on the edge node has no debugpy, which is a WARN saying
		// the job ships its own, and the test worker run with it uses the
		// wheel the job ships (doctor's, from the laptop's cache, where
		// `sparkdap wrap` put it) and reaches serve through the tunnel.
		doctorCmd := readmeBlock(t, "sparkdap doctor --ssh")
		cmd = exec.CommandContext(ctx, "bash", "-euc", laptop+doctorCmd)
		cmd.Env = laptopEnv
		out, err := cmd.CombinedOutput()
		t.Logf("the README's doctor block:\n%s", out)
		if err != nil {
			t.Errorf("the README's doctor block failed: %v", err)
		}
		edgePython := filepath.Join(edge, "pyenv", "bin", "python")
		for _, w := range []string{
			"OK    SSH gateway " + g.Target() + ": connected",
			"WARN  executors' Python " + edgePython + " (spark.pyspark.python) on the gateway " + g.Target() +
				": cannot import debugpy; the job ships its own debugger, which the workers use instead",
			"OK    test connection through the gateway (worker on the gateway → tunnel → proxy → IDE port): a worker on the gateway with the debugpy the job ships (" +
				edgePython + " has none; debugpy-1.8.21-py2.py3-none-any.whl uploaded beside the wrapper and unpacked as the executors' daemon does) reached " + remote,
		} {
			if !strings.Contains(string(out), w) {
				t.Errorf("the README's doctor block printed no %q:\n%s", w, out)
			}
		}
		// On the edge node: the README's zip and spark-submit, as printed,
		// from the job's directory with the laptop's token exported.
		script := readmeBlock(t, "spark-submit --master yarn", "cd loans", "export SPARKDAP_TOKEN=")
		job := startSpark(t, ctx, filepath.Join(edge, "loans"), append(append([]string{}, site...), "SPARKDAP_TOKEN="+p.Token, "PATH="+yarnPath(py, sparkSubmit)),
			"bash", "-euc", script)
		yarnStops(t, ctx, ide, job, l, y, inPackedEnv(t, ctx, ide))
		job.wait(t, ctx)
		t.Logf("debugged YARN run (wrap, through sshd): %s; the subtest with the packed env: %s",
			job.elapsed.Round(time.Second), time.Since(begin).Round(time.Second))
		if g, w := fmt.Sprint(printedResult(t, job.out.String())), fmt.Sprint(want); g != w {
			t.Errorf("result under sparkdap differs from the plain YARN run:\n got %s\nwant %s", g, w)
		}
	})
	t.Logf("TestYARNRecipe total: %s", time.Since(start).Round(time.Second))
}

// inPackedEnv checks, at each stop, that the container runs the packed
// environment's Python, and the debugpy the job shipped, which the
// container's daemon unpacked into a private directory of its own.
func inPackedEnv(t testing.TB, ctx context.Context, ide *dapclient.Client) func(name string, s sparkStop) {
	return func(name string, s sparkStop) {
		for _, c := range []struct{ expr, want, what string }{
			{"__import__('sys').executable", "/pyenv/", "the packed environment ./pyenv"},
			{"__import__('debugpy').__file__", "/sparkdap-debugger-", "the debugpy the job shipped"},
			{"__import__('debugpy').__version__", "1.8.21", "the debugpy the job shipped"},
		} {
			r, err := ide.Evaluate(ctx, s.frameID, c.expr)
			if err != nil {
				t.Errorf("%s: evaluate %s: %v", name, c.expr, err)
			} else if !strings.Contains(r.Result, c.want) {
				t.Errorf("%s: %s = %s, not %s", name, c.expr, r.Result, c.what)
			}
		}
	}
}

// edgeShell is a bash prelude under which the README's laptop commands
// run as printed against g, standing in for me@edge.example.com: ssh and
// scp reach g with its key and known host, and the edge node's home
// directory is edge; scp speaks the legacy protocol (scp -O, the only one
// before OpenSSH 9.0), which fails on a missing target directory where
// OpenSSH 9's SFTP mode creates it; what `sparkdap wrap -o /tmp` wrote (the
// wrapper and the debugpy wheel) is in wrapped; sparkdap (doctor) gets g's key and known host, the proxy's
// ports, remote for the recipe's --remote-listen 0.0.0.0:5678, and the
// edge node's relative paths under edge.
func edgeShell(t testing.TB, g *gateway, edge, wrapped, remote string, p *proxy) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	conf := fmt.Sprintf("Host edge.example.com\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n"+
		"  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n", g.Host, g.Port, g.User, g.ClientKey, g.KnownHosts)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	q := shellquote.Quote
	return strings.Join([]string{
		`ssh() { local dest=${1#me@}; shift; command ssh -F ` + q(cfg) + ` "$dest" "cd ` + q(edge) + ` && $*"; }`,
		`scp() { local a=() x; for x; do case $x in` +
			` me@edge.example.com:*) x=edge.example.com:` + q(edge) + `/${x#*:} ;;` +
			` /tmp/remote_debug.py | /tmp/debugpy-*.whl) x=` + q(wrapped) + `/${x#/tmp/} ;;` +
			` esac; a+=("$x"); done; command scp -O -F ` + q(cfg) + ` "${a[@]}"; }`,
		`sparkdap() { local a=() x; for x; do case $x in` +
			` me@edge.example.com) x=` + q(g.Target()) + ` ;;` +
			` 0.0.0.0:5678) x=` + q(remote) + ` ;;` +
			` pyenv/bin/python) x=` + q(filepath.Join(edge, "pyenv", "bin", "python")) + ` ;;` +
			` spark.pyspark.python=./pyenv/bin/python) x=spark.pyspark.python=` + q(filepath.Join(edge, "pyenv", "bin", "python")) + ` ;;` +
			` esac; a+=("$x"); done; ` + q(sparkdapBinary(t)) + ` "${a[@]}" --ide ` + q(p.IDE) + ` --executors ` + q(p.Executors) +
			` --ssh-identity ` + q(g.ClientKey) + ` --ssh-known-hosts ` + q(g.KnownHosts) + `; }`,
	}, "\n") + "\n"
}

// onlyLines is the lines of script that start with one of prefixes.
func onlyLines(script string, prefixes ...string) string {
	var keep []string
	for _, line := range strings.Split(script, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(strings.TrimSpace(line), p) {
				keep = append(keep, line)
				break
			}
		}
	}
	return strings.Join(keep, "\n") + "\n"
}

// yarnLoans is the loans job laid out for YARN: loanlib.py reaches the
// executors only in loanlib.zip, as the recipe's `zip loanlib.zip
// loanlib.py` makes it.
func yarnLoans(t testing.TB) loansLayout {
	t.Helper()
	l := newLoansLayout(t)
	zipFiles(t, filepath.Join(l.ship, "loanlib.zip"), l.shipLib)
	if err := os.Remove(l.shipLib); err != nil {
		t.Fatal(err)
	}
	return l
}

// yarnPySparkOnly is a directory with only pyspark and py4j in it (links
// to py's), standing in for the pyspark.zip and py4j zip a Spark
// distribution ships to YARN containers.
func yarnPySparkOnly(t testing.TB, py string) string {
	t.Helper()
	out, err := exec.Command(py, "-c", "import os, pyspark, py4j\nfor m in (pyspark, py4j): print(os.path.dirname(m.__file__))").CombinedOutput()
	if err != nil {
		t.Fatalf("locating pyspark and py4j: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "pyspark-only")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if err := os.Symlink(pkg, filepath.Join(dir, filepath.Base(pkg))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// yarnPath puts py's python3 and Spark's spark-submit first on PATH, where
// the README's commands find them by name.
func yarnPath(py, sparkSubmit string) string {
	return filepath.Dir(py) + string(os.PathListSeparator) + filepath.Dir(sparkSubmit) +
		string(os.PathListSeparator) + os.Getenv("PATH")
}

// examplesSection is the "## name" section of examples/README.md, from
// its heading to the next one.
func examplesSection(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n## "+name+"\n")
	if i < 0 {
		t.Fatalf("examples/README.md has no %s section", name)
	}
	section := text[i+1:]
	if j := strings.Index(section[1:], "\n## "); j >= 0 {
		section = section[:j+1]
	}
	return section
}

// readmeBlock is the shell block of examples/README.md's YARN section that
// contains want, as a script, without the lines that start with one of
// skip (what the test does itself: cd into the job, export the token).
func readmeBlock(t testing.TB, want string, skip ...string) string {
	t.Helper()
	section := examplesSection(t, "YARN")
	blocks := strings.Split(section, "```")
	for k := 1; k < len(blocks); k += 2 {
		if !strings.Contains(blocks[k], want) {
			continue
		}
		var keep []string
		for _, line := range strings.Split(strings.TrimPrefix(blocks[k], "sh\n"), "\n") {
			drop := false
			for _, s := range skip {
				drop = drop || strings.HasPrefix(strings.TrimSpace(line), s)
			}
			if !drop {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	t.Fatalf("examples/README.md's YARN section has no shell block with %q", want)
	return ""
}

// printedResult is the loans job's result as it prints it: the last line
// of its output that is a JSON object.
func printedResult(t testing.TB, out string) map[string]any {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var m map[string]any
		// The first JSON value on the line, not the whole line: the driver
		// runs unbuffered (PySpark sets PYTHONUNBUFFERED), so print() writes
		// the newline on its own and a JVM log line can follow the JSON.
		if strings.HasPrefix(lines[i], "{") && json.NewDecoder(strings.NewReader(lines[i])).Decode(&m) == nil {
			return m
		}
	}
	t.Fatalf("the job printed no JSON result:\n%s", tail(out, 4<<10))
	return nil
}

// packedEnvState is the edge node's packed environment, built once per
// package run.
var packedEnvState struct {
	once sync.Once
	path string
	err  error
}

// packedEnv runs the README's "on the edge node, once" commands — a venv
// with pandas and pyarrow, packed by venv-pack from a venv of its own — and
// returns the archive, which must hold neither venv-pack nor debugpy (the
// job ships its own). pip installs offline from the wheels scripts/setup
// downloads into .cache/wheels, at the versions requirements-test.txt pins
// (pip reads PIP_NO_INDEX, PIP_FIND_LINKS and PIP_CONSTRAINT from the
// environment, so the README's command line stays as printed).
func packedEnv(t testing.TB, py string) string {
	t.Helper()
	wheels := os.Getenv("SPARKDAP_WHEELS")
	if wheels == "" {
		wheels = filepath.Join("..", ".cache", "wheels")
	}
	wheels, err := filepath.Abs(wheels)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(wheels, "venv_pack-*.whl")); len(m) == 0 {
		testenv.Missing(t, "needs the wheels for the packed environment in %s (scripts/setup downloads them)", wheels)
		return ""
	}
	constraints, err := filepath.Abs(filepath.Join("..", "requirements-test.txt"))
	if err != nil {
		t.Fatal(err)
	}
	script := readmeBlock(t, "venv-pack -p pyenv")
	// The README pins what it installs to the versions the tests run.
	pinned, err := os.ReadFile(constraints)
	if err != nil {
		t.Fatal(err)
	}
	for _, pin := range regexp.MustCompile(`[A-Za-z0-9_.-]+==[^\s]+`).FindAllString(script, -1) {
		if !slices.Contains(strings.Split(string(pinned), "\n"), pin) {
			t.Errorf("the README's edge-node commands install %s, which requirements-test.txt does not pin", pin)
		}
	}
	if strings.Contains(script, "debugpy") {
		t.Errorf("the README's edge-node commands install debugpy, which the job ships:\n%s", script)
	}
	packedEnvState.once.Do(func() {
		start := time.Now()
		dir, err := os.MkdirTemp(binDir, "edge-")
		if err != nil {
			packedEnvState.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euc", script)
		cmd.Dir = dir
		// As in a fresh shell on the edge node: no virtualenv active.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "VIRTUAL_ENV=") })
		cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(py)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"PIP_NO_INDEX=1", "PIP_FIND_LINKS="+wheels, "PIP_CONSTRAINT="+constraints,
			"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_PROGRESS_BAR=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			packedEnvState.err = fmt.Errorf("the README's edge-node commands:\n%s\nfailed: %w\n%s", script, err, tail(string(out), 4<<10))
			return
		}
		packedEnvState.path = filepath.Join(dir, "pyenv.tar.gz")
		// The tool that packs is not shipped to the executors, nor a
		// debugger: the job brings that.
		for _, part := range []string{"venv_pack", "debugpy"} {
			if shipped, err := tarNames(packedEnvState.path, part); err != nil || len(shipped) > 0 {
				packedEnvState.err = fmt.Errorf("pyenv.tar.gz ships %s (%v): %v", part, err, shipped)
				return
			}
		}
		t.Logf("packed environment built in %s", time.Since(start).Round(time.Second))
	})
	if packedEnvState.err != nil {
		t.Fatal(packedEnvState.err)
	}
	return packedEnvState.path
}

// tarNames is the names in the gzipped tar archive at path that contain
// part.
func tarNames(path, part string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return names, err
		}
		if strings.Contains(h.Name, part) {
			names = append(names, h.Name)
		}
	}
}

// yarnWant is each of the recipe's stops: the zipped module, a UDF, a
// driver lambda, as the developer's path and line.
func yarnWant(t testing.TB, l loansLayout) map[string]place {
	t.Helper()
	return loansPlaces(t, l.srcMain, l.srcLib, "loanlib-payment", "udf-body", "mapvalues-lambda")
}

// yarnAttach attaches an IDE to the proxy with the recipe's breakpoints set.
func yarnAttach(t testing.TB, ctx context.Context, p *proxy, l loansLayout) *dapclient.Client {
	t.Helper()
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	armed := armedLines(yarnWant(t, l))
	err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			for path, lines := range armed {
				if _, err := ide.SetBreakpoints(ctx, path, lines...); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	return ide
}

// containerRE is a YARN container id in a task label.
var containerRE = regexp.MustCompile(`^\[exec (container_\d+_\d+_\d+_\d+) · .+ · pid \d+ · partition 0 · stage \d+\]`)

// yarnStops waits for each breakpoint to stop once, checks what the IDE
// shows there (and what each, if not nil, checks), disarms it and
// continues.
func yarnStops(t testing.TB, ctx context.Context, ide *dapclient.Client, job *sparkRun, l loansLayout, y *yarnCluster,
	each func(name string, s sparkStop)) {
	t.Helper()
	want := yarnWant(t, l)
	armed := armedLines(want)
	seen := map[string]sparkStop{}
	for len(seen) < len(want) {
		s := nextStop(t, ctx, ide, job)
		name := placeName(want, s)
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), none of the breakpoints at the developer's paths", s.path, s.line, s.function)
		}
		if _, dup := seen[name]; dup {
			t.Fatalf("stopped at %s twice", name)
		}
		seen[name] = s
		t.Logf("%s, %s into the job: %s at %s:%d locals %v", name, time.Since(job.started).Round(time.Second),
			s.thread, s.path, s.line, s.locals)
		if name == "loanlib-payment" {
			checkRunsFromZip(t, ctx, ide, s)
		}
		if each != nil {
			each(name, s)
		}
		disarmAndContinue(t, ctx, ide, armed, s)
	}
	for name, s := range seen {
		m := containerRE.FindStringSubmatch(s.thread)
		if m == nil {
			t.Errorf("%s: thread %q lacks a YARN container id as its task label", name, s.thread)
			continue
		}
		// The container is one the NodeManager ran.
		if dirs, _ := filepath.Glob(filepath.Join(y.Dir, "nm-logs", "application_*", m[1])); len(dirs) == 0 {
			t.Errorf("%s: label names %s, which the NodeManager has no log directory for", name, m[1])
		}
	}
	principal := func(name, v string) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 10000 || int(f-10000)%2500 != 0 {
			t.Errorf("%s: principal = %q, not a principal of the portfolio (10000 + k·2500)", name, v)
		}
	}
	principal("loanlib-payment", seen["loanlib-payment"].locals["principal"])
	principal("udf-body", seen["udf-body"].locals["principal"])
	if n, years := seen["loanlib-payment"].locals["n"], seen["loanlib-payment"].locals["years"]; n == "" || years == "" {
		t.Errorf("loanlib-payment locals %v lack n and years", seen["loanlib-payment"].locals)
	} else if ni, _ := strconv.Atoi(n); fmt.Sprint(ni/12) != years {
		t.Errorf("loanlib-payment: n = %s but years = %s", n, years)
	}
	if seen["mapvalues-lambda"].locals["loan"] == "" {
		t.Errorf("mapvalues-lambda locals %v lack the loan", seen["mapvalues-lambda"].locals)
	}
}
