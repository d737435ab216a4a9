//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/kubetest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// BenchmarkFirstStopKubernetes is BenchmarkFirstStop on the one-node
// Kubernetes of testkit/kubetest, set up as TestKubernetesRecipe sets it
// up (the recipe's images, gateway and `sparkdap serve --ssh` through the
// gateway pod), with firststop_job.py in the recipe's client deploy mode:
// the driver on this machine, the executors in pods, so the job's report
// and the IDE's stop are read against one clock. The plain side is the
// client-mode block's spark-submit without its sparkdap lines, as the
// test's plain run strips them; the debugged side is the block as printed.
//
//	SPARKDAP_K8S=1 SPARKDAP_BENCH_FIRSTSTOP_ROUNDS=3 go test ./integration -run '^$' -bench FirstStopKubernetes -benchtime 1x -v -timeout 60m
//
// A cluster takes minutes to set up and root to run, so the benchmark
// runs only when asked with SPARKDAP_K8S=1 (or in CI), as scripts/setup
// builds the cluster's cache only then; a plain `-bench FirstStop` leaves
// it out. SPARKDAP_BENCH_K8S_LOGS=DIR keeps the executor pods of every run
// until their logs and status are saved in DIR, with serve's log and each
// spark-submit's output, to see where a run's time goes.
func BenchmarkFirstStopKubernetes(b *testing.B) {
	testenv.SkipIfShort(b, "starts a Kubernetes node and Spark jobs on it")
	if os.Getenv("SPARKDAP_K8S") != "1" && !testenv.CI() {
		b.Skip("skipping: starts a one-node Kubernetes; set SPARKDAP_K8S=1 to run it")
	}
	py := python(b)
	_, sparkSubmit := requireStandalone(b, py)
	if _, err := exec.LookPath("zip"); err != nil {
		testenv.Missing(b, "the recipe zips loanlib.py with Info-ZIP's zip (apt-get install zip): %v", err)
	}
	ctx := testContext(b, 50*time.Minute)
	logs := os.Getenv("SPARKDAP_BENCH_K8S_LOGS")
	begin := time.Now()
	c := kubetest.Start(b, kubetest.Options{Images: []string{"spark", "gateway"}})
	cache, err := kubetest.CacheDir()
	if err != nil {
		b.Fatal(err)
	}
	r := newK8sRecipe(b, ctx, c, py, sparkSubmit)
	r.buildImages(b, ctx, cache)
	r.script(b, ctx, r.home, k8sBlock(b, r.blocks, "sh", "create deployment sparkdap-gateway"))
	// The job runs from the developer's directory, serve's --root, as the
	// client-mode block runs loans.py: the task is a function of __main__,
	// pickled by value, so the executors' code names this path, and serve
	// maps it to itself. It is there before serve starts, which indexes
	// --root then.
	script := filepath.Join(r.home, "src", "loans", "firststop_job.py")
	copyFile(b, firstStopScript(b), script)
	line := firstStopLine(b, script)
	p := r.serve(b, ctx)
	b.Logf("cluster, images, gateway and serve --ssh up in %s", time.Since(begin).Round(time.Second))

	client := k8sBlock(b, r.blocks, "sh", "--deploy-mode client")
	vars := map[string]string{"K8S_API_SERVER": c.Server, "DRIVER_HOST": c.HostIP, "HOME": r.home}
	// The plain run's first task is read from the job's OUT file: its
	// stdout shares a buffer with the driver's log on stderr, whose lines
	// can land inside the report's.
	submitArgs := func(sparkdap bool, out string) []string {
		args := k8sSubmitArgs(b, client, vars, sparkdap, script, "4", out)
		if logs != "" {
			args = append([]string{"--conf", "spark.kubernetes.executor.deleteOnTermination=false"}, args...)
		}
		return args
	}
	env := append(append([]string{}, r.env...), "DRIVER_HOST="+c.HostIP, "SPARK_LOCAL_IP="+c.HostIP)
	dir := filepath.Dir(script)

	rounds := firstStopRoundsWanted(b, 5)
	for i := 0; i < b.N; i++ {
		plain := func(round int) firstStopRun {
			r.noExecutors(b, ctx)
			out := filepath.Join(b.TempDir(), "first.json")
			job := startSpark(b, ctx, dir, env, sparkSubmit, submitArgs(false, out)...)
			job.wait(b, ctx)
			sec, ok := readJSON(b, out)["first_task"].(float64)
			if !ok {
				b.Fatalf("%s has no first_task", out)
			}
			at := epochTime(sec)
			r.saveRun(b, ctx, logs, fmt.Sprintf("round%d-plain", round+1), job, "")
			return firstStopRun{first: at.Sub(job.started), job: job.elapsed}
		}
		debugged := func(round int) firstStopRun {
			r.noExecutors(b, ctx)
			ide := attachAtLine(b, ctx, p, script, line)
			defer detachIDE(b, ctx, ide)
			job := startSpark(b, ctx, dir, env, sparkSubmit, submitArgs(true, filepath.Join(b.TempDir(), "first.json"))...)
			at := r.firstStopChecked(b, ctx, ide, job, script, line, round == 0)
			job.wait(b, ctx)
			r.saveRun(b, ctx, logs, fmt.Sprintf("round%d-debugged", round+1), job, p.Log())
			return firstStopRun{first: at.Sub(job.started), job: job.elapsed}
		}
		plains, debuggeds := firstStopRounds(b, rounds, plain, debugged)
		reportFirstStop(b, "one-node Kubernetes",
			"one-node Kubernetes on this machine (testkit/kubetest), examples/README.md's client-mode block: the driver here, "+
				"one executor pod of the recipe's job image (no debugpy); plain = that spark-submit --master k8s://… of "+
				"testdata/firststop_job.py (4 partitions) without its sparkdap lines; debugged = the block as printed "+
				"(daemon module remote_debug, the pod template's init container copying the wrapper and the shipped debugpy "+
				"from the gateway image, the token from the Secret, partition 0), executors connecting to `sparkdap agent` in the "+
				"gateway pod, relayed to `sparkdap serve --ssh` here through kubectl port-forward; breakpoint on the task's first line",
			plains, debuggeds)
	}
}

// k8sSubmitArgs is the client-mode block's spark-submit as arguments for
// script: its variables expanded from vars, its --py-files and job
// replaced by script and args, and without sparkdap the lines of sparkdap's
// settings dropped, as TestKubernetesRecipe's plain run drops them.
func k8sSubmitArgs(t testing.TB, block string, vars map[string]string, sparkdap bool, script string, args ...string) []string {
	t.Helper()
	var submit []string
	for _, l := range shellLines(block) {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "spark-submit" {
			submit = f[1:]
		}
	}
	if len(submit) == 0 {
		t.Fatalf("the client-mode block runs no spark-submit:\n%s", block)
	}
	expand := func(s string) string {
		return os.Expand(strings.ReplaceAll(s, `"`, ""), func(v string) string {
			x, ok := vars[v]
			if !ok {
				t.Fatalf("the client-mode block's spark-submit uses $%s, which the benchmark does not set", v)
			}
			return x
		})
	}
	var out []string
	for i := 0; i < len(submit); i++ {
		if !strings.HasPrefix(submit[i], "--") {
			if i != len(submit)-1 {
				t.Fatalf("the client-mode block's spark-submit has %q before its last argument", submit[i])
			}
			break // the job, replaced by script
		}
		if i+1 >= len(submit) {
			t.Fatalf("the client-mode block's spark-submit ends with %s", submit[i])
		}
		opt, val := submit[i], submit[i+1]
		i++
		if opt == "--py-files" {
			continue
		}
		if !sparkdap && (strings.Contains(val, "remote_debug") || strings.Contains(strings.ToLower(val), "sparkdap")) {
			continue
		}
		out = append(out, opt, expand(val))
	}
	return append(append(out, script), args...)
}

// noExecutors waits until the last run's executor pods are gone, so that
// a run does not share the node with the previous one's shutdown.
func (r *k8sRecipe) noExecutors(t testing.TB, ctx context.Context) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		out, err := r.c.Kubectl(ctx, "-n", "spark", "get", "pods", "-l", "spark-role=executor", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("executor pods still there after 3 minutes: %s", strings.Fields(out))
		}
	}
}

// firstStopChecked is firstStopAt with a look at the stop before it
// continues: the IDE's path and line of the breakpoint, partition 0 in an
// executor pod of the job. The time is the stopped event's, before the
// look.
func (r *k8sRecipe) firstStopChecked(b *testing.B, ctx context.Context, ide *dapclient.Client, job *sparkRun, script string, line int, show bool) time.Time {
	b.Helper()
	s := nextStopTime(b, ctx, ide, job)
	frames, err := ide.StackTrace(ctx, s.threadID)
	if err != nil || len(frames) == 0 {
		b.Fatalf("stackTrace: %v (%d frames)", err, len(frames))
	}
	path := ""
	if frames[0].Source != nil {
		path = frames[0].Source.Path
	}
	if path != script || frames[0].Line != line {
		b.Fatalf("first stop at %s:%d, want the breakpoint at the developer's %s:%d", path, frames[0].Line, script, line)
	}
	threads, err := ide.Threads(ctx)
	if err != nil {
		b.Fatal(err)
	}
	label := ""
	for _, th := range threads {
		if th.Id == s.threadID {
			label = th.Name
		}
	}
	m := execPodLabel.FindStringSubmatch(label)
	if m == nil {
		b.Fatalf("stopped thread %q is not partition 0's task in an executor pod", label)
	}
	if show {
		b.Logf("first stop at %s:%d in %q", path, frames[0].Line, label)
	}
	if _, err := ide.SetBreakpoints(ctx, script); err != nil {
		b.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		b.Fatal(err)
	}
	return s.at
}

// saveRun keeps, in dir (none: nothing), a run's spark-submit output, the
// log serve wrote so far and its executor pods' status and logs, then
// deletes those pods, kept by deleteOnTermination=false.
func (r *k8sRecipe) saveRun(t testing.TB, ctx context.Context, dir, name string, job *sparkRun, serveLog string) {
	t.Helper()
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(file, text string) {
		if err := os.WriteFile(filepath.Join(dir, name+"-"+file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("submit.log", fmt.Sprintf("started %s\n%s", job.started.UTC().Format(time.RFC3339Nano), job.out.String()))
	if serveLog != "" {
		write("serve.log", serveLog)
	}
	out, err := r.c.Kubectl(ctx, "-n", "spark", "get", "pods", "-l", "spark-role=executor", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	write("pods.json", out)
	var pods struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		log, err := r.c.Kubectl(ctx, "-n", "spark", "logs", "--timestamps", "--all-containers", "--prefix", "pod/"+pod.Metadata.Name)
		if err != nil {
			log = fmt.Sprintf("kubectl logs: %v", err)
		}
		write(pod.Metadata.Name+".log", log)
	}
	if _, err := r.c.Kubectl(ctx, "-n", "spark", "delete", "pods", "-l", "spark-role=executor", "--wait=true"); err != nil {
		t.Fatal(err)
	}
}
