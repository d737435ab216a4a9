package integration

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/kubetest"
	"github.com/sparkdap/sparkdap/internal/testenv"
	"golang.org/x/crypto/ssh"
)

// TestKubernetesNode starts the one-node Kubernetes of internal/kubetest and
// checks what the Kubernetes recipe stands on: a pod of the locally built
// Spark image runs (through its Spark-style entrypoint) with the host's
// PySpark and the pinned debugpy and reaches a Service by its cluster DNS
// name; the gateway image answers SSH through kubectl port-forward; and a
// PySpark job gets its answer from executor pods both in cluster mode (the
// driver a pod, the job in a layer added to the image) and in client mode
// (the driver on the host).
func TestKubernetesNode(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Kubernetes node")
	py := python(t)
	ctx := testContext(t, 15*time.Minute)
	c := kubetest.Start(t, kubetest.Options{Images: []string{"spark", "gateway"}})

	want, err := exec.CommandContext(ctx, py, "-c", "import pyspark, debugpy; print('pyspark', pyspark.__version__, 'debugpy', debugpy.__version__)").Output()
	if err != nil {
		t.Fatalf("host versions: %v", err)
	}

	// The pod also resolves the API's Service through the cluster DNS,
	// connects to it through kube-proxy, and has no default route.
	t.Run("pod", func(t *testing.T) {
		start := time.Now()
		if _, err := c.Kubectl(ctx, "run", "versions", "--image="+kubetest.SparkImage, "--image-pull-policy=Never",
			"--restart=Never", "--", "python3", "-c", `import pyspark, debugpy, socket
print('pyspark', pyspark.__version__, 'debugpy', debugpy.__version__)
ip = socket.gethostbyname('kubernetes.default.svc.cluster.local')
socket.create_connection((ip, 443), timeout=20).close()
routes = [line.split()[1] for line in open('/proc/net/route').read().splitlines()[1:]]
print('service', ip, 'default route', '00000000' in routes)`); err != nil {
			t.Fatal(err)
		}
		if phase := podEnd(ctx, t, c, "versions", 3*time.Minute); phase != "Succeeded" {
			desc, _ := c.Kubectl(ctx, "describe", "pod/versions")
			logs, _ := c.Kubectl(ctx, "logs", "pod/versions")
			t.Fatalf("pod phase %q\n%s\nlogs:\n%s", phase, desc, logs)
		}
		got, err := c.Kubectl(ctx, "logs", "pod/versions")
		if err != nil {
			t.Fatal(err)
		}
		wantLog := strings.TrimSpace(string(want)) + "\nservice " + c.Services.Addr().Next().String() + " default route False"
		if strings.TrimSpace(got) != wantLog {
			t.Errorf("the pod printed\n%s\nwant\n%s", got, wantLog)
		}
		t.Logf("pod ran in %.1f s", time.Since(start).Seconds())
	})

	// The gateway: the base image with an authorized key added as a layer,
	// as the recipe's Dockerfile COPYs one, run as a Deployment and reached
	// over SSH through kubectl port-forward.
	t.Run("gateway", func(t *testing.T) {
		start := time.Now()
		cache, err := kubetest.CacheDir()
		if err != nil {
			t.Fatal(err)
		}
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		sshPub, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		const devUID = 1000 // useradd's first user in the base image
		if err := c.DeriveImage(ctx, filepath.Join(cache, "images", "gateway.tar"), "sparkdap.test/gateway-test:1", []kubetest.File{
			{Path: "/home/dev/.ssh", Mode: os.ModeDir | 0o700, UID: devUID},
			{Path: "/home/dev/.ssh/authorized_keys", Mode: 0o600, UID: devUID, Data: ssh.MarshalAuthorizedKey(sshPub)},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "create", "deployment", "gateway", "--image=sparkdap.test/gateway-test:1"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "rollout", "status", "deployment/gateway", "--timeout=180s"); err != nil {
			desc, _ := c.Kubectl(ctx, "describe", "pods")
			t.Fatalf("%v\n%s", err, desc)
		}
		pf := exec.CommandContext(ctx, c.KubectlPath(), "--kubeconfig", c.Kubeconfig, "port-forward", "--address", "127.0.0.1", "deployment/gateway", "0:22")
		stdout, err := pf.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
		// "Forwarding from 127.0.0.1:PORT -> 22"
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatalf("port-forward: %v", err)
		}
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[2], "127.0.0.1:") {
			t.Fatalf("port-forward printed %q", line)
		}
		client, err := ssh.Dial("tcp", f[2], &ssh.ClientConfig{
			User: "dev", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a host key made at the image's build
			Timeout:         30 * time.Second,
		})
		if err != nil {
			logs, _ := c.Kubectl(ctx, "logs", "deployment/gateway")
			t.Fatalf("ssh: %v\nsshd:\n%s", err, logs)
		}
		defer client.Close()
		sess, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := sess.Output("id -un")
		if err != nil || strings.TrimSpace(string(out)) != "dev" {
			t.Fatalf("id -un over ssh = %q, %v", out, err)
		}
		t.Logf("gateway answered over ssh in %.1f s", time.Since(start).Seconds())
	})

	// Cluster mode, as the recipe submits: the job is in the image (a layer
	// on the Spark image), the driver is a pod started through the image's
	// entrypoint, and it asks the API for executor pods with its service
	// account, through the API's Service.
	t.Run("cluster mode job", func(t *testing.T) {
		start := time.Now()
		_, sparkSubmit := requireStandalone(t, py)
		cache, err := kubetest.CacheDir()
		if err != nil {
			t.Fatal(err)
		}
		const image = "sparkdap.test/spark-job:1"
		if err := c.DeriveImage(ctx, filepath.Join(cache, "images", "spark.tar"), image, []kubetest.File{
			{Path: "/opt/app", Mode: os.ModeDir | 0o755},
			{Path: "/opt/app/job.py", Mode: 0o644, Data: []byte(`from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
rdd = spark.sparkContext.parallelize(range(100), 2)
print("sum", rdd.map(lambda x: x * x).sum(), "hosts", sorted(set(rdd.map(lambda _: __import__("socket").gethostname()).collect())))
spark.stop()
`)},
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("job image imported in %.1f s", time.Since(start).Seconds())
		for _, args := range [][]string{
			{"create", "serviceaccount", "spark"},
			{"create", "rolebinding", "spark", "--clusterrole=edit", "--serviceaccount=default:spark"},
		} {
			if _, err := c.Kubectl(ctx, args...); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.CommandContext(ctx, sparkSubmit, "--master", "k8s://"+c.Server, "--deploy-mode", "cluster",
			"--name", "kubetest-cluster",
			"--conf", "spark.kubernetes.namespace=default",
			"--conf", "spark.kubernetes.container.image="+image,
			"--conf", "spark.kubernetes.container.image.pullPolicy=Never",
			"--conf", "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
			"--conf", "spark.kubernetes.driver.pod.name=kubetest-driver",
			"--conf", "spark.executor.instances=1",
			"--conf", "spark.kubernetes.driver.request.cores=0.2",
			"--conf", "spark.kubernetes.executor.request.cores=0.2",
			"--conf", "spark.driver.memory=512m",
			"--conf", "spark.executor.memory=512m",
			"--conf", "spark.ui.enabled=false",
			"local:///opt/app/job.py")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("spark-submit: %v\n%s", err, tail(string(out), 4000))
		}
		phase := podEnd(ctx, t, c, "kubetest-driver", 3*time.Minute)
		logs, _ := c.Kubectl(ctx, "logs", "kubetest-driver")
		if phase != "Succeeded" || !strings.Contains(logs, "sum 328350 hosts ['kubetest-cluster-") {
			t.Fatalf("driver pod %s; its log:\n%s\nspark-submit:\n%s", phase, tail(logs, 6000), tail(string(out), 3000))
		}
		t.Logf("cluster mode job ran in %.1f s", time.Since(start).Seconds())
	})

	t.Run("client mode job", func(t *testing.T) {
		start := time.Now()
		job := filepath.Join(t.TempDir(), "job.py")
		if err := os.WriteFile(job, []byte(`import sys
from pyspark.sql import SparkSession

master, image, host = sys.argv[1:4]
spark = (SparkSession.builder.master(master).appName("kubetest")
         .config("spark.kubernetes.container.image", image)
         .config("spark.kubernetes.container.image.pullPolicy", "Never")
         .config("spark.kubernetes.namespace", "default")
         .config("spark.executor.instances", "1")
         .config("spark.kubernetes.executor.request.cores", "0.2")
         .config("spark.executor.memory", "512m")
         .config("spark.driver.host", host)
         .config("spark.driver.bindAddress", host)
         .config("spark.ui.enabled", "false")
         .getOrCreate())
rdd = spark.sparkContext.parallelize(range(100), 2)
print("sum", rdd.map(lambda x: x * x).sum(), "hosts", sorted(set(rdd.map(lambda _: __import__("socket").gethostname()).collect())))
spark.stop()
`), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, py, job, "k8s://"+c.Server, kubetest.SparkImage, c.HostIP)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PYSPARK_PYTHON=python3", "SPARK_LOCAL_IP="+c.HostIP)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the job: %v\n%s", err, tail(string(out), 6000))
		}
		if !strings.Contains(string(out), "sum 328350 hosts ['kubetest-") {
			t.Fatalf("the job's output has no sum from an executor pod:\n%s", tail(string(out), 6000))
		}
		t.Logf("job ran in %.1f s", time.Since(start).Seconds())
	})
}

// podEnd waits up to limit for pod to succeed or fail, and returns its last
// phase.
func podEnd(ctx context.Context, t *testing.T, c *kubetest.Cluster, pod string, limit time.Duration) string {
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
