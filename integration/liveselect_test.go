//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// liveSelectionJob is a job whose tasks start with nothing selected, and
// the breakpoint a test sets in it.
type liveSelectionJob struct {
	dir, src, job string // the job's directory, the developer's copy, the submitted file
	line          int
}

func newLiveSelectionJob(t *testing.T) liveSelectionJob {
	src, dir := t.TempDir(), t.TempDir()
	j := liveSelectionJob{dir: dir, src: filepath.Join(src, "live_select.py"), job: filepath.Join(dir, "live_select.py")}
	copyFile(t, filepath.Join("testdata", "live_select.py"), j.job)
	copyFile(t, filepath.Join("testdata", "live_select.py"), j.src)
	j.line = testenv.MarkedLine(t, j.src, "inc")
	return j
}

// sparkdapCLI runs a sparkdap command and returns its stdout.
func sparkdapCLI(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, sparkdapBinary(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sparkdap %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// knownWorkers is `sparkdap workers --json`.
func knownWorkers(t *testing.T, ctx context.Context, ide string) []control.KnownWorker {
	t.Helper()
	var ans struct{ Workers []control.KnownWorker }
	out := sparkdapCLI(t, ctx, "workers", "--ide", ide, "--json")
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatalf("workers --json: %v: %q", err, out)
	}
	return ans.Workers
}

// checkLiveSelection submits j with --partitions none through proxy addr
// (the executors' way to serve p) and sparkArgs, lets its first action of
// 200 tasks run with nothing selected, selects partition 37 with
// `sparkdap select` while the job waits, and checks that partition 37 of
// the second action stops and no other task does; `sparkdap workers`
// lists every worker, the stopped one with its task and its stop. The
// job's result is a plain run's.
func checkLiveSelection(t *testing.T, ctx context.Context, p *proxy, addr string, j liveSelectionJob, env []string, sparkArgs ...string) {
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, func(ctx context.Context) error {
		_, err := ide.SetBreakpoints(ctx, j.src, j.line)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, goFile := filepath.Join(j.dir, "result.json"), filepath.Join(j.dir, "go")
	args := append([]string{"submit", "--proxy", addr, "--partitions", "none", "--"}, sparkArgs...)
	r := startSpark(t, ctx, j.dir, append(env, "SPARKDAP_TOKEN="+p.Token), sparkdapBinary(t), append(args, j.job, out, goFile)...)

	// The first action: every worker follows the proxy, none stops. The
	// job waits for goFile whenever the 200 tasks are seen, so a second
	// between looks is enough; each look starts a sparkdap process, which
	// more often would take CPU from the job it waits for.
	var ws []control.KnownWorker
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		ws = knownWorkers(t, ctx, p.IDE)
		tasks := int64(0)
		for _, w := range ws {
			tasks += w.Tasks
		}
		if tasks >= 200 {
			break
		}
		select {
		case <-r.done:
			t.Fatalf("the job ended (%v) before its workers ran the first action's 200 tasks: %+v", r.err, ws)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 min the workers reported %d of the first action's tasks: %+v", tasks, ws)
		}
	}
	for _, w := range ws {
		if w.PID <= 0 || w.Host == "" || w.ExecutorID == "" || w.Task == nil || w.Selected || w.Stopped != nil {
			t.Errorf("worker listed as %+v: want its pid, host, executor and an unselected task", w)
		}
	}
	if n := countStops(ide); n != 0 {
		t.Fatalf("%d stops with nothing selected", n)
	}

	said := sparkdapCLI(t, ctx, "select", "--ide", p.IDE, "--partitions", "37")
	if !strings.Contains(said, "selection: partitions 37 · stages all · executors all (sent to ") {
		t.Errorf("select said %q", said)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := nextStop(t, ctx, ide, r)
	if s.path != j.src || s.line != j.line || s.locals["x"] != "37" {
		t.Errorf("stopped at %s:%d with x = %q, want %s:%d with x = 37", s.path, s.line, s.locals["x"], j.src, j.line)
	}
	ws = knownWorkers(t, ctx, p.IDE)
	var stopped []control.KnownWorker
	for _, w := range ws {
		if w.Stopped != nil {
			stopped = append(stopped, w)
		}
	}
	if len(stopped) != 1 || stopped[0].Task == nil || stopped[0].Task.Partition != 37 || !stopped[0].Selected ||
		stopped[0].Stopped.File != j.src || stopped[0].Stopped.Line != int64(j.line) {
		t.Errorf("workers at the stop: %+v; want one stopped at %s:%d in partition 37", ws, j.src, j.line)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	r.wait(t, ctx)
	if n := countStops(ide); n != 1 {
		t.Errorf("%d stops, want the one in partition 37", n)
	}
	res := readJSON(t, out)
	if res["first"] != float64(20100) || res["second"] != float64(20100) {
		t.Errorf("result %v, want 20100 twice", res)
	}
}

// countStops counts the stopped events the IDE received.
func countStops(ide *dapclient.Client) int {
	n := 0
	for _, ev := range ide.Events() {
		if ev.Event == "stopped" {
			n++
		}
	}
	return n
}

// TestLiveSelectionLocal: local mode, the executors reaching serve
// directly.
func TestLiveSelectionLocal(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 6*time.Minute)
	j := newLiveSelectionJob(t)
	p := startProxy(t, ctx, "--root", filepath.Dir(j.src))
	checkLiveSelection(t, ctx, p, p.Executors, j, nil, "--master", "local[2]")
}

// TestLiveSelectionStandalone: a standalone cluster of one worker with two
// cores, its executor reaching serve directly.
func TestLiveSelectionStandalone(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Spark standalone cluster")
	py := python(t)
	sparkHome, _ := requireStandalone(t, py)
	ctx := testContext(t, 10*time.Minute)
	env := []string{"PYSPARK_PYTHON=" + py, "PYSPARK_DRIVER_PYTHON=" + py, "SPARK_LOCAL_IP=127.0.0.1", "SPARK_HOME=" + sparkHome}
	masterURL, _ := startStandaloneCluster(t, ctx, sparkHome, t.TempDir(), env, 2)
	j := newLiveSelectionJob(t)
	p := startProxy(t, ctx, "--root", filepath.Dir(j.src))
	checkLiveSelection(t, ctx, p, p.Executors, j, env, "--master", masterURL, "--conf", "spark.ui.enabled=false",
		"--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1")
}

// TestLiveSelectionTunnel: local mode, the executors reaching serve
// through `serve --ssh`'s tunnel.
func TestLiveSelectionTunnel(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job and starts sshd")
	requireSpark(t)
	ctx := testContext(t, 6*time.Minute)
	g := startGateway(t, ctx, "127.0.0.1")
	remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
	j := newLiveSelectionJob(t)
	p := tunnelProxy(t, ctx, g, remote, "--agent-path", sparkdapBinary(t), "--root", filepath.Dir(j.src))
	checkLiveSelection(t, ctx, p, remote, j, nil, "--master", "local[2]")
}
