//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/sshdtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestStandaloneClusterStopsInExecutor is examples/README.md's Spark
// standalone recipe run for real: a master and a worker started from the
// pip-installed pyspark on loopback, `sparkdap serve`, an IDE attached, and
// the loans example submitted to spark://… with `sparkdap submit`. The
// breakpoint in loanlib.py must stop a task in the worker's executor JVM's
// Python worker — labelled with that executor's id, not "driver" —
// showing the developer's file and the task's values; the job must then
// finish with the same result as a plain run.
func TestStandaloneClusterStopsInExecutor(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Spark standalone cluster")
	py := python(t)
	sparkHome, sparkSubmit := requireStandalone(t, py)
	ctx := testContext(t, 10*time.Minute)

	root := t.TempDir()
	src := filepath.Join(root, "home", "dev", "loans") // where the IDE's files are
	ship := filepath.Join(root, "deploy", "loans")     // what is submitted
	for _, dir := range []string{src, ship} {
		for _, f := range []string{"loans.py", "loanlib.py"} {
			copyFile(t, filepath.Join("..", "examples", "loans", f), filepath.Join(dir, f))
		}
	}
	srcLib := filepath.Join(src, "loanlib.py")
	line := testenv.MarkedLine(t, srcLib, "loanlib-payment")
	env := []string{"PYSPARK_PYTHON=" + py, "PYSPARK_DRIVER_PYTHON=" + py, "SPARK_LOCAL_IP=127.0.0.1", "SPARK_HOME=" + sparkHome}

	// The reference result, from a plain local run while the cluster starts.
	plainOut := filepath.Join(root, "plain.json")
	plain := standaloneStart(t, ship, env, "plain spark-submit", sparkSubmit,
		"--master", "local[1]", "--conf", "spark.ui.enabled=false",
		"--py-files", filepath.Join(ship, "loanlib.py"), filepath.Join(ship, "loans.py"), "--output", plainOut)

	masterURL, worker := startStandaloneCluster(t, ctx, sparkHome, root, env, 1)
	work := filepath.Join(root, "work") // the worker's --work-dir

	plain.wait(t, ctx, 5*time.Minute)
	// The same job twice: loanlib.py shipped as itself, then zipped. On a
	// cluster the worker puts --py-files on sys.path relative to the
	// executor's directory (./loanlib.zip), which pydevd cannot resolve
	// inside an archive unless the wrapper makes it absolute.
	zipped := filepath.Join(ship, "loanlib.zip")
	zipFiles(t, zipped, filepath.Join(ship, "loanlib.py"))
	for _, pyFiles := range []string{filepath.Join(ship, "loanlib.py"), zipped} {
		t.Run(filepath.Ext(pyFiles)[1:], func(t *testing.T) {
			// The proxy and the IDE, with a breakpoint in the --py-files module.
			p := startProxy(t, ctx, "--root", src)
			ide := dialIDE(t, ctx, p.IDE)
			if _, err := ide.Initialize(ctx, false); err != nil {
				t.Fatal(err)
			}
			err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
				func(ctx context.Context) error {
					_, err := ide.SetBreakpoints(ctx, srcLib, line)
					return err
				})
			if err != nil {
				t.Fatalf("attach: %v", err)
			}

			// The job on the cluster, debugging partition 0 only.
			out := filepath.Join(t.TempDir(), "debugged.json")
			job := standaloneStart(t, ship, append(env, "SPARKDAP_TOKEN="+p.Token), "sparkdap submit", sparkdapBinary(t),
				"submit", "--proxy", p.Executors, "--partitions", "0", "--",
				"--master", masterURL, "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m",
				"--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
				"--py-files", pyFiles, filepath.Join(ship, "loans.py"), "--output", out)

			stopped := make(chan error, 1)
			var tid int
			go func() {
				st, err := ide.StoppedEvent(ctx)
				if err == nil {
					tid = st.ThreadId
				}
				stopped <- err
			}()
			select {
			case err := <-stopped:
				if err != nil {
					t.Fatalf("waiting for the breakpoint: %v", err)
				}
			case <-job.done:
				t.Fatalf("the job ended (%v) without stopping at loanlib.py:%d", job.err, line)
			}

			threads, err := ide.Threads(ctx)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			for _, th := range threads {
				if th.Id == tid {
					name = th.Name
				}
			}
			// [exec 0 · host · pid N · partition 0 · stage S] MainThread
			m := regexp.MustCompile(`^\[exec (\S+) · .+ · pid \d+ · partition 0 · stage \d+\]`).FindStringSubmatch(name)
			if m == nil {
				t.Fatalf("stopped thread %q lacks the task label", name)
			}
			if m[1] == "driver" {
				t.Fatalf("stopped thread %q says driver: the task did not run in the standalone executor", name)
			}
			// The executor id the label shows is one the worker launched.
			if _, err := os.Stat(work); err != nil {
				t.Fatal(err)
			}
			execDirs, _ := filepath.Glob(filepath.Join(work, "app-*", m[1]))
			if len(execDirs) == 0 {
				t.Errorf("label says executor %q but %s has no app-*/%s directory", m[1], work, m[1])
			}

			frames, err := ide.StackTrace(ctx, tid)
			if err != nil || len(frames) == 0 {
				t.Fatalf("stackTrace: %v (%d frames)", err, len(frames))
			}
			top := frames[0]
			if top.Source == nil || top.Source.Path != srcLib || top.Line != line {
				t.Fatalf("stopped at %+v line %d, want %s:%d (the developer's file, not the executor's copy)", top.Source, top.Line, srcLib, line)
			}
			scopes, err := ide.Scopes(ctx, top.Id)
			if err != nil || len(scopes) == 0 {
				t.Fatalf("scopes: %v", err)
			}
			vars, err := ide.Variables(ctx, scopes[0].VariablesReference)
			if err != nil {
				t.Fatal(err)
			}
			locals := map[string]string{}
			for _, v := range vars {
				locals[v.Name] = v.Value
			}
			years, err1 := strconv.Atoi(locals["years"])
			n, err2 := strconv.Atoi(locals["n"])
			if err1 != nil || err2 != nil || n != years*12 || locals["principal"] == "" {
				t.Errorf("locals at loanlib.py:%d are not a real task's: %v", line, locals)
			}
			t.Logf("stopped in %q at %s:%d with principal=%s annual_rate=%s years=%s n=%s",
				name, top.Source.Path, top.Line, locals["principal"], locals["annual_rate"], locals["years"], locals["n"])

			// Let the job finish: no more stops, then continue.
			if _, err := ide.SetBreakpoints(ctx, srcLib); err != nil {
				t.Fatal(err)
			}
			if err := ide.Continue(ctx, tid); err != nil {
				t.Fatal(err)
			}
			job.wait(t, ctx, 5*time.Minute)
			got, want := readJSON(t, out), readJSON(t, plainOut)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("result under sparkdap on the cluster:\n%v\nplain run:\n%v", got, want)
			}
			if !strings.Contains(job.out.String(), masterURL) && !strings.Contains(worker.out.String(), "Asked to launch executor") {
				t.Errorf("the job does not seem to have run on the standalone cluster")
			}
		})
	}
}

// requireStandalone finds the pip-installed Spark (its bin/spark-class) and
// spark-submit, or skips (fails in CI) without them or Java.
// startStandaloneCluster starts a master and one worker of cores cores
// with exactly the recipe's commands, on free loopback ports, in root
// (the worker's --work-dir is root/work), and returns the master's URL and
// the worker.
func startStandaloneCluster(t testing.TB, ctx context.Context, sparkHome, root string, env []string, cores int) (string, *standaloneProc) {
	t.Helper()
	masterPort, masterUI, workerUI := threeFreePorts(t)
	work := filepath.Join(root, "work")
	sparkClass := filepath.Join(sparkHome, "bin", "spark-class")
	// The master's REST submission server has a fixed port (6066): off,
	// so that concurrent clusters on this machine do not collide.
	masterEnv := append(slices.Clip(env), "SPARK_MASTER_OPTS=-Dspark.master.rest.enabled=false")
	master := standaloneStart(t, root, masterEnv, "master", sparkClass, "org.apache.spark.deploy.master.Master",
		"--host", "127.0.0.1", "--port", strconv.Itoa(masterPort), "--webui-port", strconv.Itoa(masterUI))
	master.waitFor(t, ctx, "I have been elected leader", 3*time.Minute)
	masterURL := fmt.Sprintf("spark://127.0.0.1:%d", masterPort)
	worker := standaloneStart(t, root, env, "worker", sparkClass, "org.apache.spark.deploy.worker.Worker", masterURL,
		"--host", "127.0.0.1", "--cores", strconv.Itoa(cores), "--memory", "1g", "--work-dir", work, "--webui-port", strconv.Itoa(workerUI))
	worker.waitFor(t, ctx, "Successfully registered with master", 3*time.Minute)
	return masterURL, worker
}

func requireStandalone(t testing.TB, py string) (sparkHome, sparkSubmit string) {
	t.Helper()
	fail := func(format string, args ...any) { t.Helper(); testenv.Missing(t, format, args...) }
	if _, err := exec.LookPath("java"); err != nil {
		fail("needs Java 17 for the Spark standalone cluster: %v", err)
		return
	}
	out, err := exec.Command(py, "-c", "import os, pyspark, pandas, pyarrow; print(os.path.dirname(pyspark.__file__))").CombinedOutput()
	if err != nil {
		fail("needs pyspark, pandas and pyarrow importable by %s (pip install -r requirements-test.txt): %v\n%s", py, err, out)
		return
	}
	sparkHome = strings.TrimSpace(string(out))
	if h := os.Getenv("SPARK_HOME"); h != "" {
		sparkHome = h
	}
	if _, err := os.Stat(filepath.Join(sparkHome, "bin", "spark-class")); err != nil {
		fail("no bin/spark-class in %s: %v", sparkHome, err)
		return
	}
	return sparkHome, filepath.Join(sparkHome, "bin", "spark-submit")
}

// threeFreePorts returns three distinct free loopback ports: a master's,
// its UI's and a worker's UI's.
func threeFreePorts(t testing.TB) (int, int, int) {
	t.Helper()
	p, err := sshdtest.FreePorts("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	return p[0], p[1], p[2]
}

// standaloneProc is a process of the test in its own process group, so
// that stopping it also ends what it started (the worker's executor JVM,
// the job's Python workers, YARN's containers).
type standaloneProc struct {
	name string
	pgid int
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

// spawnProc starts bin in its own process group; the caller stops it.
// Tests use standaloneStart; spawnProc serves what outlives one test (the
// package's YARN).
func spawnProc(dir string, env []string, name, bin string, args ...string) (*standaloneProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &standaloneProc{name: name, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p.pgid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends the process group: TERM first (a Spark worker then stops its
// executors itself), then KILL for whatever is left.
func (p *standaloneProc) stop() error {
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", p.name, p.pgid)
	}
}

func standaloneStart(t testing.TB, dir string, env []string, name, bin string, args ...string) *standaloneProc {
	t.Helper()
	p, err := spawnProc(dir, env, name, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s output (last 6 KiB):\n%s", name, tail(p.out.String(), 6<<10))
		}
	})
	return p
}

// waitFor waits until the process has printed want.
func (p *standaloneProc) waitFor(t testing.TB, ctx context.Context, want string, limit time.Duration) {
	t.Helper()
	if err := p.waitOutput(ctx, want, limit); err != nil {
		t.Fatal(err)
	}
}

func (p *standaloneProc) waitOutput(ctx context.Context, want string, limit time.Duration) error {
	deadline := time.After(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.out.String(), want) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before printing %q", p.name, p.err, want)
		case <-deadline:
			return fmt.Errorf("%s did not print %q within %s", p.name, want, limit)
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", p.name, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// wait waits for a successful exit.
func (p *standaloneProc) wait(t testing.TB, ctx context.Context, limit time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("%s still running after %s", p.name, limit)
	case <-ctx.Done():
		t.Fatalf("%s: %v", p.name, ctx.Err())
	}
	if p.err != nil {
		t.Fatalf("%s failed: %v\n%s", p.name, p.err, tail(p.out.String(), 6<<10))
	}
}
