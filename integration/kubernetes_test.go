//go:build linux

package integration

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/kubetest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/workerwrap"
	"golang.org/x/crypto/ssh"
)

// readmeK8sBlock is one fenced block of examples/README.md's Kubernetes
// section.
type readmeK8sBlock struct {
	lang, text string
}

// readmeK8s is the Kubernetes section's fenced blocks, in order.
func readmeK8s(t testing.TB) []readmeK8sBlock {
	t.Helper()
	section := examplesSection(t, "Kubernetes")
	var blocks []readmeK8sBlock
	parts := strings.Split(section, "```")
	for k := 1; k < len(parts); k += 2 {
		lang, body, _ := strings.Cut(parts[k], "\n")
		blocks = append(blocks, readmeK8sBlock{lang: strings.TrimSpace(lang), text: body})
	}
	return blocks
}

// k8sBlock is the one block of the section in lang that contains want.
func k8sBlock(t testing.TB, blocks []readmeK8sBlock, lang, want string) string {
	t.Helper()
	var found []string
	for _, b := range blocks {
		if b.lang == lang && strings.Contains(b.text, want) {
			found = append(found, b.text)
		}
	}
	if len(found) != 1 {
		t.Fatalf("examples/README.md's Kubernetes section has %d %s blocks with %q, want 1", len(found), lang, want)
	}
	return found[0]
}

// shellLines splits a shell block into its commands, joining continued
// lines.
func shellLines(block string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(block, "\n") {
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		if strings.TrimSpace(cur) != "" {
			out = append(out, cur)
		}
		cur = ""
	}
	return out
}

// requirementPin is the version requirements-test.txt pins pkg at.
func requirementPin(t testing.TB, pkg string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "requirements-test.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), pkg+"=="); ok {
			return v
		}
	}
	t.Fatalf("requirements-test.txt pins no %s", pkg)
	return ""
}

// dockerfile is what the test takes from one of the recipe's Dockerfiles:
// the base image, the RUN lines, the files its COPY lines add (read from
// the build context) and the user it ends with.
type dockerfile struct {
	from  string
	runs  []string
	files []kubetest.File
	user  string
}

// parseDockerfile reads text's instructions, with COPY sources from dir.
func parseDockerfile(t testing.TB, text, dir string) dockerfile {
	t.Helper()
	var d dockerfile
	dirs := map[string]bool{}
	for _, line := range shellLines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch op {
		case "FROM":
			d.from = rest
		case "RUN":
			d.runs = append(d.runs, rest)
		case "USER":
			d.user = rest
		case "CMD", "ENTRYPOINT", "ENV", "WORKDIR":
			// The stand-in base images hold what these set (checked by the
			// pod subtest and sshd answering).
		case "COPY":
			f := strings.Fields(rest)
			if len(f) < 2 {
				t.Fatalf("Dockerfile line %q: COPY with no destination", line)
			}
			srcs, dst := f[:len(f)-1], f[len(f)-1]
			if len(srcs) > 1 && !strings.HasSuffix(dst, "/") {
				t.Fatalf("Dockerfile line %q: several sources into a file", line)
			}
			for _, src := range srcs {
				to := dst
				if strings.HasSuffix(dst, "/") {
					to = dst + filepath.Base(src)
				}
				data, err := os.ReadFile(filepath.Join(dir, src))
				if err != nil {
					t.Fatalf("Dockerfile line %q: %v", line, err)
				}
				st, err := os.Stat(filepath.Join(dir, src))
				if err != nil {
					t.Fatal(err)
				}
				// The parents Docker creates: root's, 0755.
				var parents []string
				for p := filepath.Dir(to); p != "/" && !dirs[p]; p = filepath.Dir(p) {
					parents = append([]string{p}, parents...)
				}
				for _, p := range parents {
					dirs[p] = true
					d.files = append(d.files, kubetest.File{Path: p, Mode: fs.ModeDir | 0o755})
				}
				d.files = append(d.files, kubetest.File{Path: to, Mode: st.Mode().Perm(), Data: data})
			}
		default:
			t.Fatalf("Dockerfile line %q: the test does not know %s", line, op)
		}
	}
	return d
}

// execPodLabel is a thread's task label on Kubernetes: the executor id and
// the pod's host name, which is its name.
var execPodLabel = regexp.MustCompile(`\[exec (\S+) · (\S+) · pid \d+ · partition 0 · stage \d+\]`)

// k8sRecipe is the recipe's state on one cluster: the developer's home
// and files, the environment its commands run in.
type k8sRecipe struct {
	c                *kubetest.Cluster
	home             string
	srcMain, srcLib  string
	env              []string // the recipe's shell: HOME, PATH, KUBECONFIG, the token
	blocks           []readmeK8sBlock
	sparkDefaultsDir string
}

// script runs a shell script of the recipe's to the end and returns its
// output; background jobs it leaves (port-forward) are killed when t ends.
func (r *k8sRecipe) script(t testing.TB, ctx context.Context, dir, script string, env ...string) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "script-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, "bash", "-euc", script)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, r.env...), env...)
	// A file, not a pipe: a background job would hold a pipe open.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err = cmd.Wait()
	b, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("the recipe's commands:\n%s\nfailed: %v\n%s", script, err, tail(string(b), 6000))
	}
	return string(b)
}

// TestKubernetesRecipe runs examples/README.md's Kubernetes recipe on the
// one-node Kubernetes of testkit/kubetest, its blocks as printed: the
// images built from its Dockerfiles (as layers on local stand-ins for the
// base images, whose RUN lines they already hold: the test checks their
// pins), the namespace, service account, Secret and gateway from its
// kubectl lines, the SSH forward and `sparkdap serve --ssh` through it,
// and its spark-submit commands in cluster and client mode. An IDE
// attached to serve must stop in the UDF and in the zipped loanlib.py in
// executor pods, with the developer's path and line, a label naming the
// pod and the task's real values; the job must end with a plain run's
// result, also when the IDE leaves while a worker is stopped and when the
// proxy is away.
func TestKubernetesRecipe(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Kubernetes node and Spark jobs on it")
	py := python(t)
	_, sparkSubmit := requireStandalone(t, py)
	if _, err := exec.LookPath("zip"); err != nil {
		testenv.Missing(t, "the recipe zips loanlib.py with Info-ZIP's zip (apt-get install zip): %v", err)
	}
	if _, err := exec.LookPath("ssh-keyscan"); err != nil {
		testenv.Missing(t, "the recipe runs ssh-keyscan (apt-get install openssh-client): %v", err)
	}
	ctx := testContext(t, 25*time.Minute)
	begin := time.Now()
	c := kubetest.Start(t, kubetest.Options{Images: []string{"spark", "gateway"}})
	cache, err := kubetest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	r := newK8sRecipe(t, ctx, c, py, sparkSubmit)
	k8sNodeChecks(t, ctx, c, py)
	r.buildImages(t, ctx, cache)
	t.Logf("images built and imported at %s", time.Since(begin).Round(time.Second))
	r.script(t, ctx, r.home, k8sBlock(t, r.blocks, "sh", "create deployment sparkdap-gateway"))
	t.Logf("namespace and gateway up at %s", time.Since(begin).Round(time.Second))
	p := r.serve(t, ctx)
	t.Logf("serve --ssh up at %s", time.Since(begin).Round(time.Second))

	cluster := k8sBlock(t, r.blocks, "sh", "--deploy-mode cluster")
	client := k8sBlock(t, r.blocks, "sh", "--deploy-mode client")
	// The plain run: the cluster-mode block without its sparkdap lines
	// (the daemon module, the pod template, the token and the selection).
	var plainLines []string
	for _, line := range strings.Split(cluster, "\n") {
		if !strings.Contains(line, "remote_debug") && !strings.Contains(strings.ToLower(line), "sparkdap") {
			plainLines = append(plainLines, line)
		}
	}
	start := time.Now()
	want := printedResult(t, r.script(t, ctx, r.home, strings.Join(plainLines, "\n")))
	t.Logf("plain cluster-mode run: %s", time.Since(start).Round(time.Second))
	r.deleteDrivers(t, ctx)

	t.Run("cluster mode", func(t *testing.T) {
		ide := r.attach(t, ctx, p)
		job := startSpark(t, ctx, r.home, r.env, "bash", "-euc", cluster)
		r.stops(t, ctx, ide, job, true)
		job.wait(t, ctx)
		t.Logf("debugged cluster-mode run, the IDE gone at its second stop: %s", job.elapsed.Round(time.Second))
		if g, w := fmt.Sprint(printedResult(t, job.out.String())), fmt.Sprint(want); g != w {
			t.Errorf("result under sparkdap differs from the plain run:\n got %s\nwant %s", g, w)
		}
		r.deleteDrivers(t, ctx)
	})

	t.Run("client mode", func(t *testing.T) {
		ide := r.attach(t, ctx, p)
		env := []string{"DRIVER_HOST=" + c.HostIP, "SPARK_LOCAL_IP=" + c.HostIP}
		job := startSpark(t, ctx, r.home, append(append([]string{}, r.env...), env...), "bash", "-euc", client)
		r.stops(t, ctx, ide, job, false)
		job.wait(t, ctx)
		t.Logf("debugged client-mode run: %s", job.elapsed.Round(time.Second))
		if g, w := fmt.Sprint(printedResult(t, job.out.String())), fmt.Sprint(want); g != w {
			t.Errorf("result under sparkdap differs from the plain run:\n got %s\nwant %s", g, w)
		}

		// Fail open: serve gone (and with it the agent in the gateway pod),
		// the same job still ends with the same result.
		p.Stop()
		start := time.Now()
		out := r.script(t, ctx, r.home, client, env...)
		t.Logf("client-mode run with the proxy away: %s", time.Since(start).Round(time.Second))
		if g, w := fmt.Sprint(printedResult(t, out)), fmt.Sprint(want); g != w {
			t.Errorf("result with the proxy away differs from the plain run:\n got %s\nwant %s", g, w)
		}
	})
	t.Logf("TestKubernetesRecipe total: %s", time.Since(begin).Round(time.Second))
}

// newK8sRecipe lays out the developer's machine: a home with the job in
// ~/src/loans, sparkdap's checkout in ~/src/sparkdap, an SSH key, and the
// commands the recipe runs on PATH (sparkdap, kubectl, spark-submit,
// python3).
func newK8sRecipe(t testing.TB, ctx context.Context, c *kubetest.Cluster, py, sparkSubmit string) *k8sRecipe {
	t.Helper()
	r := &k8sRecipe{c: c, home: t.TempDir(), blocks: readmeK8s(t)}
	src := filepath.Join(r.home, "src", "loans")
	for _, f := range []string{"loans.py", "loanlib.py"} {
		copyFile(t, filepath.Join("..", "examples", "loans", f), filepath.Join(src, f))
	}
	r.srcMain, r.srcLib = filepath.Join(src, "loans.py"), filepath.Join(src, "loanlib.py")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(r.home, "src", "sparkdap")); err != nil {
		t.Fatal(err)
	}
	// ~/.ssh/id_ed25519, the key serve uses by default and the recipe puts
	// in the gateway image.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sshDir := filepath.Join(r.home, ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sshDir, "id_ed25519"), pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sshDir, "id_ed25519.pub"), ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		t.Fatal(err)
	}

	// The site's Spark configuration, as a cluster's spark-defaults would
	// hold it, so that the recipe's command lines stay as printed: small
	// pods for a 2-core node.
	r.sparkDefaultsDir = filepath.Join(t.TempDir(), "spark-conf")
	defaults := strings.Join([]string{
		"spark.executor.instances 1",
		"spark.kubernetes.driver.request.cores 0.2",
		"spark.kubernetes.executor.request.cores 0.2",
		"spark.driver.memory 512m",
		"spark.executor.memory 512m",
		"spark.ui.enabled false",
	}, "\n") + "\n"
	if err := os.MkdirAll(r.sparkDefaultsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.sparkDefaultsDir, "spark-defaults.conf"), []byte(defaults), 0o644); err != nil {
		t.Fatal(err)
	}
	// The Go build in the recipe uses this machine's caches, not the
	// fresh home's.
	goEnv, err := exec.CommandContext(ctx, "go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	g := strings.Fields(string(goEnv))
	if len(g) != 3 {
		t.Fatalf("go env printed %q", goEnv)
	}
	// The wheel `sparkdap wrap` ships comes from the developer's cache, as
	// on a laptop where it was fetched once.
	userCache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	path := strings.Join([]string{filepath.Dir(sparkdapBinary(t)), filepath.Dir(c.KubectlPath()), filepath.Dir(py),
		filepath.Dir(sparkSubmit), os.Getenv("PATH")}, string(os.PathListSeparator))
	r.env = append(os.Environ(), "HOME="+r.home, "PATH="+path, "KUBECONFIG="+c.Kubeconfig,
		"SPARKDAP_TOKEN="+testToken, "SPARK_CONF_DIR="+r.sparkDefaultsDir, "PYSPARK_PYTHON=python3",
		"GOCACHE="+g[0], "GOMODCACHE="+g[1], "GOPATH="+g[2], "GOFLAGS=-buildvcs=false",
		"XDG_CACHE_HOME="+userCache)
	return r
}

// k8sNodeChecks: a pod of the Spark stand-in runs as Spark's user with the
// host's PySpark and no debugpy, as the recipe's image has none, and
// reaches Services by their cluster DNS names and nothing beyond the node.
func k8sNodeChecks(t testing.TB, ctx context.Context, c *kubetest.Cluster, py string) {
	t.Helper()
	want, err := exec.CommandContext(ctx, py, "-c", "import pyspark; print('pyspark', pyspark.__version__)").Output()
	if err != nil {
		t.Fatalf("host versions: %v", err)
	}
	pin := "pyspark " + requirementPin(t, "pyspark")
	if strings.TrimSpace(string(want)) != pin {
		t.Fatalf("the host's %s, not requirements-test.txt's %s", strings.TrimSpace(string(want)), pin)
	}
	// The pod also resolves the API's Service through the cluster DNS,
	// connects to it through kube-proxy, and has no default route.
	if _, err := c.Kubectl(ctx, "run", "versions", "--image="+kubetest.SparkImage, "--restart=Never", "--",
		"python3", "-c", `import os, pyspark, socket, importlib.util
print('pyspark', pyspark.__version__, 'debugpy', importlib.util.find_spec('debugpy'), 'uid', os.getuid())
ip = socket.gethostbyname('kubernetes.default.svc.cluster.local')
socket.create_connection((ip, 443), timeout=20).close()
routes = [line.split()[1] for line in open('/proc/net/route').read().splitlines()[1:]]
print('service', ip, 'default route', '00000000' in routes)`); err != nil {
		t.Fatal(err)
	}
	if phase := podEnd(ctx, t, c, "versions", 3*time.Minute); phase != "Succeeded" {
		desc, _ := c.Kubectl(ctx, "describe", "pod/versions")
		t.Fatalf("pod phase %q\n%s", phase, desc)
	}
	got, err := c.Kubectl(ctx, "logs", "pod/versions")
	if err != nil {
		t.Fatal(err)
	}
	// uid 185: the user `spark` of Spark's own image, as the recipe's
	// Dockerfile ends with USER spark.
	wantLog := pin + " debugpy None uid 185\nservice " + c.Services.Addr().Next().String() + " default route False"
	if strings.TrimSpace(got) != wantLog {
		t.Errorf("the Spark stand-in's pod printed\n%s\nwant\n%s", got, wantLog)
	}
}

// buildImages saves the recipe's pod template in the recipe's directory,
// runs its build block there, with docker standing in for by a shell
// function that records what it is asked, then builds each recorded image
// from its Dockerfile as a layer on the base stand-in and imports it under
// the recipe's tag.
func (r *k8sRecipe) buildImages(t testing.TB, ctx context.Context, cache string) {
	t.Helper()
	dir := filepath.Join(r.home, "sparkdap-k8s")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	template := k8sBlock(t, r.blocks, "yaml", "# sparkdap-executor.yaml")
	if err := os.WriteFile(filepath.Join(dir, "sparkdap-executor.yaml"), []byte(template), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "docker.calls")
	build := k8sBlock(t, r.blocks, "sh", "docker build")
	script := `docker() { printf '%s\n' "$*" >>"$DOCKER_CALLS"; }` + "\n" + build
	start := time.Now()
	r.script(t, ctx, r.home, script, "DOCKER_CALLS="+calls)
	t.Logf("the recipe's build block (the Go build of sparkdap included): %s", time.Since(start).Round(time.Second))
	if out, err := exec.CommandContext(ctx, "file", filepath.Join(dir, "sparkdap")).Output(); err == nil && !strings.Contains(string(out), "statically linked") {
		t.Errorf("the recipe's sparkdap binary is not static: %s", out)
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	// The stand-ins for the recipe's base images: Spark's own image at the
	// tested PySpark, and the Debian release the gateway stand-in is
	// bootstrapped from (the host's).
	suite := osRelease(t, "VERSION_CODENAME")
	bases := map[string]string{
		"spark:" + requirementPin(t, "pyspark") + "-python3": filepath.Join(cache, "images", "spark.tar"),
		"debian:" + suite + "-slim":                          filepath.Join(cache, "images", "gateway.tar"),
	}
	built := 0
	for _, call := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(call)
		if len(f) == 0 || f[0] != "build" {
			continue
		}
		var file, tag string
		for i := 1; i+1 < len(f); i++ {
			switch f[i] {
			case "-f":
				file = f[i+1]
			case "-t":
				tag = f[i+1]
			}
		}
		if file == "" || tag == "" || f[len(f)-1] != "." {
			t.Fatalf("docker %s: want build -f FILE -t TAG .", call)
		}
		d := parseDockerfile(t, k8sBlock(t, r.blocks, "dockerfile", "# "+file), dir)
		base, ok := bases[d.from]
		if !ok {
			t.Fatalf("%s: FROM %s, none of the tested bases %v", file, d.from, bases)
		}
		switch {
		case strings.HasPrefix(d.from, "spark:"):
			for _, pkg := range []string{"pandas", "pyarrow"} {
				pin := pkg + "==" + requirementPin(t, pkg)
				if len(d.runs) != 1 || !strings.Contains(d.runs[0]+" ", " "+pin+" ") {
					t.Errorf("%s: RUN %q does not install %s, the tested version", file, d.runs, pin)
				}
			}
			// The executors' image is the job's own: sparkdap ships its
			// debugger, so the image needs none.
			if strings.Contains(strings.Join(d.runs, " "), "debugpy") {
				t.Errorf("%s: RUN %q installs debugpy, which the job ships", file, d.runs)
			}
			if d.user != "spark" {
				t.Errorf("%s: ends as USER %q, not Spark's own user spark", file, d.user)
			}
		default:
			if len(d.runs) != 1 || !strings.Contains(d.runs[0], "openssh-server") || !strings.Contains(d.runs[0], "useradd -m dev") {
				t.Errorf("%s: RUN %q, not what the gateway stand-in holds (openssh-server, a user dev)", file, d.runs)
			}
			// What the pod template's init container copies into the
			// executors: the wrapper and the wheel wrap wrote beside it.
			has := map[string]bool{}
			for _, f := range d.files {
				has[f.Path] = true
			}
			for _, want := range []string{"/opt/sparkdap/remote_debug.py", "/opt/sparkdap/" + workerwrap.ShippedDebugpyWheel} {
				if !has[want] {
					t.Errorf("%s: puts no %s in the gateway image, for the executors", file, want)
				}
			}
		}
		start := time.Now()
		if err := r.c.DeriveImage(ctx, base, tag, d.files); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s built and imported as %s in %s", file, tag, time.Since(start).Round(time.Second))
		built++
	}
	if built != 2 {
		t.Fatalf("the build block built %d images, want 2:\n%s", built, data)
	}
}

// osRelease is a field of this machine's /etc/os-release.
func osRelease(t testing.TB, key string) string {
	t.Helper()
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("/etc/os-release has no %s", key)
	return ""
}

// serve runs the laptop block: the port-forward (on a free port rather
// than 2222), ssh-keyscan, doctor, and serve as printed, with flags added
// for the test to find its IDE port.
func (r *k8sRecipe) serve(t testing.TB, ctx context.Context) *proxy {
	t.Helper()
	block := k8sBlock(t, r.blocks, "sh", "sparkdap serve")
	port := strconv.Itoa(freePort(t, "127.0.0.1"))
	block = strings.ReplaceAll(block, "2222", port)
	var before []string
	var doctorLine, serveLine string
	for _, line := range shellLines(block) {
		if strings.HasPrefix(strings.TrimSpace(line), "sparkdap doctor ") {
			doctorLine = line
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "sparkdap serve ") {
			serveLine = line
			continue
		}
		if serveLine != "" {
			t.Fatalf("the laptop block goes on after serve: %q", line)
		}
		before = append(before, line)
	}
	out := r.script(t, ctx, r.home, strings.Join(before, "\n"))
	t.Logf("the laptop block before serve:\n%s", tail(out, 3000))
	if doctorLine == "" {
		t.Fatal("the laptop block runs no sparkdap doctor")
	}
	// doctor, before serve: every check passes (the script fails on a
	// FAIL); the image is checked in a pod of it, and what doctor cannot
	// check on Kubernetes is said.
	start := time.Now()
	out = r.script(t, ctx, r.home, doctorLine)
	t.Logf("%s (%s):\n%s", doctorLine, time.Since(start).Round(time.Second), out)
	for _, want := range []string{
		"OK    SSH gateway dev@127.0.0.1:" + port + ": connected",
		"WARN  executor image registry.example.com/loans:1",
		"cannot import debugpy; the job ships its own debugger, which the workers use instead",
		"SKIP  test connection through the gateway: not checked",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sparkdap doctor's report lacks %q", want)
		}
	}
	if strings.Contains(out, "on the cluster's nodes") || strings.Contains(out, "python3: command not found") {
		t.Errorf("sparkdap doctor looked for Python on the gateway pod or the nodes, not in the executors' image")
	}

	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.CommandContext(ctx, "bash", "-euc", "exec "+serveLine+" --ide 127.0.0.1:0 --ready-file "+ready+" --log-level debug")
	cmd.Dir = r.home
	cmd.Env = r.env
	p := &proxy{stderr: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("sparkdap serve ignored SIGTERM for 10s")
		}
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("sparkdap serve stderr:\n%s", tail(p.Log(), 8000))
		}
	})
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if data, err := os.ReadFile(ready); err == nil {
			var rf struct{ IDE, Executors, Token string }
			if err := json.Unmarshal(data, &rf); err == nil && rf.IDE != "" {
				if rf.Token != testToken {
					t.Fatalf("serve's token is not $SPARKDAP_TOKEN")
				}
				p.IDE, p.Executors, p.Token = rf.IDE, rf.Executors, rf.Token
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("sparkdap serve exited: %v\n%s", err, p.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sparkdap serve never became ready:\n%s", p.Log())
		}
	}
	waitLog(t, ctx, p, "sparkdap: tunnel up: executors connect to ", 1)
	return p
}

// attach attaches an IDE with the recipe's breakpoints: the UDF's body in
// loans.py and the payment in loanlib.py, both in the developer's copy.
func (r *k8sRecipe) attach(t testing.TB, ctx context.Context, p *proxy) *dapclient.Client {
	t.Helper()
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			if _, err := ide.SetBreakpoints(ctx, r.srcMain, testenv.MarkedLine(t, r.srcMain, "udf-body")); err != nil {
				return err
			}
			_, err := ide.SetBreakpoints(ctx, r.srcLib, testenv.MarkedLine(t, r.srcLib, "loanlib-payment"))
			return err
		})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	return ide
}

// stops waits for each breakpoint to stop once in an executor pod and
// checks what the IDE shows there. Each is disarmed and continued, except
// that with leave the IDE disconnects at the second stop instead, the
// worker still stopped.
func (r *k8sRecipe) stops(t testing.TB, ctx context.Context, ide *dapclient.Client, job *sparkRun, leave bool) {
	t.Helper()
	want := loansPlaces(t, r.srcMain, r.srcLib, "udf-body", "loanlib-payment")
	seen := map[string]bool{}
	for len(seen) < len(want) {
		s := nextStop(t, ctx, ide, job)
		name := placeName(want, s)
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), none of the breakpoints at the developer's paths", s.path, s.line, s.function)
		}
		if seen[name] {
			t.Fatalf("stopped at %s twice", name)
		}
		seen[name] = true
		t.Logf("%s, %s into the job: %s at %s:%d locals %v", name, time.Since(job.started).Round(time.Second),
			s.thread, s.path, s.line, s.locals)
		// The label names a running executor pod of the namespace.
		m := execPodLabel.FindStringSubmatch(s.thread)
		if m == nil {
			t.Errorf("%s: thread %q lacks the task label", name, s.thread)
		} else {
			pods, err := r.c.Kubectl(ctx, "-n", "spark", "get", "pods", "-l", "spark-role=executor", "-o", "name")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(pods+"\n", "pod/"+m[2]+"\n") {
				t.Errorf("%s: label names %s, not an executor pod (%s)", name, m[2], strings.Fields(pods))
			}
			// The image has no debugpy: the worker stopped with the one the
			// job shipped through the pod template.
			log, err := r.c.Kubectl(ctx, "-n", "spark", "logs", "pod/"+m[2])
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log, "using debugpy "+workerwrap.ShippedDebugpyVersion+" shipped with the job (") {
				t.Errorf("%s: executor pod %s's log does not say it uses the shipped debugpy:\n%s", name, m[2], tail(log, 3000))
			}
		}
		v, err := strconv.ParseFloat(s.locals["principal"], 64)
		if err != nil || v < 10000 || int(v-10000)%2500 != 0 {
			t.Errorf("%s: principal = %q, not a principal of the portfolio (10000 + k·2500)", name, s.locals["principal"])
		}
		if name == "loanlib-payment" {
			checkRunsFromZip(t, ctx, ide, s)
		}
		if leave && len(seen) == len(want) {
			// The IDE goes away with the worker stopped; the job must end.
			if err := ide.Disconnect(ctx, false); err != nil {
				t.Logf("disconnect: %v", err)
			}
			ide.Close()
			return
		}
		if _, err := ide.SetBreakpoints(ctx, s.path); err != nil {
			t.Fatal(err)
		}
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteDrivers removes the finished driver pods, so that the recipe's
// `kubectl logs -l spark-role=driver` reads the next run's only.
func (r *k8sRecipe) deleteDrivers(t testing.TB, ctx context.Context) {
	t.Helper()
	if _, err := r.c.Kubectl(ctx, "-n", "spark", "delete", "pods", "-l", "spark-role=driver", "--wait=true"); err != nil {
		t.Fatal(err)
	}
}

// podEnd waits up to limit for pod to succeed or fail, and returns its last
// phase.
func podEnd(ctx context.Context, t testing.TB, c *kubetest.Cluster, pod string, limit time.Duration) string {
	t.Helper()
	var phase string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		out, err := c.Kubectl(ctx, "get", "pod", pod, "-o", "jsonpath={.status.phase}")
		if err != nil {
			t.Fatal(err)
		}
		if phase = strings.TrimSpace(out); phase == "Succeeded" || phase == "Failed" {
			break
		}
	}
	return phase
}
