//go:build linux

package kubetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// Version is the Kubernetes release scripts/setup-k8s builds.
const Version = "v1.34.4"

// The images scripts/setup-k8s builds, by the tag each archive carries.
const (
	SparkImage   = "sparkdap.test/spark:test"            // Java, Python, PySpark, debugpy, pandas, pyarrow, Spark's entrypoint
	GatewayImage = "sparkdap.test/sparkdap-gateway:base" // sshd and a user dev, no sparkdap binary yet
	pauseImage   = "registry.k8s.io/pause:3.10.1"        // every pod's sandbox
)

// nodeName is the one node's name (not the machine's host name, which the
// cluster never resolves).
const nodeName = "kubetest-node"

// Options says what a cluster starts with.
type Options struct {
	// Images are the archives to import besides pause, by name under
	// .cache/k8s/images ("spark", "gateway").
	Images []string
}

// Cluster is a running one-node Kubernetes. Its fields are set by Start and
// only read after it returns; Kubectl and the other methods may run from
// any goroutine.
type Cluster struct {
	Dir        string // everything the cluster writes
	Kubeconfig string // an admin (system:masters) kubeconfig
	Server     string // the API server's URL, https://HostIP:6443
	HostIP     string // the node's address on the bridge: pods reach the host here
	Subnet     netip.Prefix
	Services   netip.Prefix

	bin     string
	ctrSock string
	persist string // containerd's root and the record of what it imported
	net     network
	pki     *pki

	mu    sync.Mutex // guards procs: Start appends, cleanup reads
	procs []*proc
}

// CacheDir is where scripts/setup-k8s puts its output: $SPARKDAP_K8S_CACHE,
// or .cache/k8s in the repository holding the working directory.
func CacheDir() (string, error) {
	if d := os.Getenv("SPARKDAP_K8S_CACHE"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return filepath.Join(dir, ".cache", "k8s"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start starts a cluster for t and stops it when t ends. Without root,
// scripts/setup-k8s's output or Debian's containerd, t is testenv.Missing:
// skipped locally, failed in CI (where scripts/setup builds them).
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a Kubernetes node needs root (bridges, iptables, mounts)")
	}
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(cache, Version, "bin")
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "coredns"} {
		if !fileExists(filepath.Join(bin, b)) {
			missing = append(missing, filepath.Join(bin, b))
		}
	}
	for _, name := range append([]string{"pause"}, opts.Images...) {
		if a := filepath.Join(cache, "images", name+".tar"); !fileExists(a) {
			missing = append(missing, a)
		}
	}
	for _, b := range []string{"containerd", "ctr", "runc", "iptables", "ip", "conntrack"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if !fileExists("/usr/lib/cni/bridge") {
		missing = append(missing, "/usr/lib/cni/bridge")
	}
	if len(missing) > 0 {
		testenv.Missing(t, "the Kubernetes node needs scripts/setup-k8s's output and Debian's containerd; missing %s", strings.Join(missing, ", "))
	}

	c := &Cluster{Dir: t.TempDir(), bin: bin}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	began := time.Now()
	step := func(what string) { t.Logf("kubetest: %s at %.1f s", what, time.Since(began).Seconds()) }
	recoverEarlier(t, cache, bin)
	undo := &cleanup{Dir: c.Dir}
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t)
		}
		for _, err := range c.stop(undo) {
			t.Errorf("kubetest: cleanup: %v", err)
		}
		if err := os.Remove(undoRecord(cache)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Error(err)
		}
	})
	if err := c.start(ctx, cache, opts, undo, step); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return c
}

// cleanup is what start changed on the machine, for stop to put back. It
// is also written to .cache/k8s/kubetest-undo.json while a cluster runs, so
// that the next Start puts the machine back after a test process that died
// without stopping its cluster.
type cleanup struct {
	Dir         string // the cluster's directory
	CtrSock     string
	Sysctls     map[string]string
	Chains      map[string]map[string]bool
	Netns       map[string]bool
	Bridge      bool
	Guard       [][]string
	KubeProxyUp bool
	// RunContainerd: /run/containerd, where containerd 1.6 puts its shims'
	// sockets whatever its configuration, did not exist before.
	RunContainerd bool
}

// undoRecord is where a running cluster's cleanup is kept.
func undoRecord(cache string) string { return filepath.Join(cache, "kubetest-undo.json") }

// recoverEarlier puts back what a cluster whose test died left on the
// machine, if its record is there.
func recoverEarlier(t testing.TB, cache, bin string) {
	b, err := os.ReadFile(undoRecord(cache))
	if err != nil {
		return
	}
	var undo cleanup
	if err := json.Unmarshal(b, &undo); err != nil {
		t.Fatalf("kubetest: %s: %v", undoRecord(cache), err)
	}
	t.Logf("kubetest: putting back what an earlier cluster left (%s)", undo.Dir)
	if undo.CtrSock != "" {
		killShims(undo.CtrSock)
	}
	old := &Cluster{Dir: undo.Dir, bin: bin, persist: filepath.Join(cache, "containerd")}
	for _, err := range old.stop(&undo) {
		t.Logf("kubetest: putting back: %v", err)
	}
	if err := os.Remove(undoRecord(cache)); err != nil {
		t.Fatal(err)
	}
}

const shimSocketDir = "/run/containerd"

func (c *Cluster) start(ctx context.Context, cache string, opts Options, undo *cleanup, step func(string)) error {
	n, err := pickNetwork()
	if err != nil {
		return err
	}
	c.net = n
	c.Subnet, c.Services = n.Subnet, n.Services
	c.HostIP = n.Host.String()
	c.Server = "https://" + net.JoinHostPort(c.HostIP, "6443")

	// What the node will change, recorded before it does.
	undo.Sysctls = readSysctls()
	undo.Netns = netnsNames()
	undo.RunContainerd = !fileExists(shimSocketDir)
	removeTaggedRules(ctx)
	if undo.Chains, err = snapshotChains(ctx); err != nil {
		return err
	}
	undo.CtrSock = filepath.Join(c.Dir, "containerd", "containerd.sock")
	// The record holds all start may do, for a run after a crash.
	record := *undo
	record.Bridge, record.KubeProxyUp, record.Guard = true, true, guardRules(n)
	if err := writeJSON(undoRecord(cache), record); err != nil {
		return err
	}
	undo.Bridge = true
	if err := setupBridge(ctx, n); err != nil {
		return err
	}
	for _, r := range guardRules(n) {
		if err := run(ctx, "iptables", append([]string{"-w", "-I"}, r...)...); err != nil {
			return err
		}
		undo.Guard = append(undo.Guard, r)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return err
	}

	logs := filepath.Join(c.Dir, "logs")
	for _, d := range []string{logs, filepath.Join(c.Dir, "cni", "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	if err := c.startContainerd(ctx, logs, filepath.Join(cache, "containerd")); err != nil {
		return err
	}
	step("containerd up")
	// The images import while the control plane starts; pause first, as
	// kubelet needs it for the first pod.
	imported := make(chan error, 1)
	go func() {
		for _, name := range append([]string{"pause"}, opts.Images...) {
			if err := c.importCached(ctx, filepath.Join(cache, "images", name+".tar")); err != nil {
				imported <- err
				return
			}
		}
		imported <- nil
	}()

	if err := c.startControlPlane(ctx, logs); err != nil {
		return err
	}
	step("API server ready")
	if err := c.startNode(ctx, logs, undo); err != nil {
		return err
	}
	if err := <-imported; err != nil {
		return err
	}
	step("images imported")
	if err := c.waitFor(ctx, "node Ready", 2*time.Minute, func() (bool, error) {
		out, err := c.Kubectl(ctx, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && strings.TrimSpace(out) == "True", nil
	}); err != nil {
		return err
	}
	step("node Ready")
	if err := c.waitFor(ctx, "the default service account", 2*time.Minute, func() (bool, error) {
		_, err := c.Kubectl(ctx, "-n", "default", "get", "serviceaccount", "default")
		return err == nil, nil
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "cluster DNS", time.Minute, c.dnsAnswers); err != nil {
		return err
	}
	step("cluster DNS answers")
	return nil
}

// containerdConfig: Debian's containerd with its own root, state and socket
// under the cluster's directory, the CRI plugin on cgroupfs, and
// restrict_oom_score_adj, since root here may lack CAP_SYS_RESOURCE and runc
// then fails on the −998 kubelet asks for every sandbox.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[5]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q
`

// startContainerd starts containerd with its state (sockets, mounts,
// running containers) under the cluster's directory, and its root (content
// and unpacked images) in persist, which outlives the test: an image
// imported once is there for the next cluster.
func (c *Cluster) startContainerd(ctx context.Context, logs, persist string) error {
	c.persist = persist
	dir := filepath.Join(c.Dir, "containerd")
	c.ctrSock = filepath.Join(dir, "containerd.sock") // as in the undo record
	cfg := filepath.Join(dir, "config.toml")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	doc := fmt.Sprintf(containerdConfig, filepath.Join(persist, "root"), filepath.Join(dir, "state"), c.ctrSock,
		pauseImage, filepath.Join(c.Dir, "cni", "net.d"), filepath.Join(dir, "opt"), filepath.Join(dir, "runc"))
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		return err
	}
	if err := c.writeCNI(); err != nil {
		return err
	}
	p, err := c.startProc(logs, "containerd", "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "containerd", time.Minute, func() (bool, error) {
		if done, err := p.exited(); done {
			return false, fmt.Errorf("containerd %w: %v: %s", errExited, err, p.tail(2000))
		}
		return exec.CommandContext(ctx, "ctr", "--address", c.ctrSock, "version").Run() == nil, nil
	})
}

// writeCNI writes the pods' network: the bridge, addresses from the lower
// half of the subnet with the host as gateway, and one route, to the
// Service range through the host. No default route: a pod reaches the node
// and Services and nothing else.
func (c *Cluster) writeCNI() error {
	n := c.net
	last := n.Pods.Addr().As4()
	last[3] = 126
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kubetest",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      bridgeName,
			"isGateway":   false,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type": "host-local",
				"ranges": []any{[]any{map[string]any{
					"subnet":     n.Pods.String(),
					"rangeStart": n.Host.Next().String(),
					"rangeEnd":   netip.AddrFrom4(last).String(),
					"gateway":    n.Host.String(),
				}}},
				"routes":  []any{map[string]any{"dst": n.Services.String(), "gw": n.Host.String()}},
				"dataDir": filepath.Join(c.Dir, "cni", "ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "cni", "net.d", "10-kubetest.conflist"), b, 0o644)
}

// importCached imports one of scripts/setup-k8s's archives unless this
// very archive (its name carries the hash of its inputs) was imported into
// the persistent root before and its tag is still there.
func (c *Cluster) importCached(ctx context.Context, link string) error {
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		return err
	}
	stamp := filepath.Join(c.persist, "imported", filepath.Base(target))
	if b, err := os.ReadFile(stamp); err == nil {
		tag := strings.TrimSpace(string(b))
		out, err := exec.CommandContext(ctx, "ctr", "--address", c.ctrSock, "-n", "k8s.io", "images", "list", "--quiet").Output()
		if err == nil && slices.Contains(strings.Fields(string(out)), tag) {
			return nil
		}
	}
	tag, err := archiveTag(target)
	if err != nil {
		return err
	}
	if err := c.ImportImage(ctx, target); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(stamp), 0o755); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(tag+"\n"), 0o644)
}

// ImportImage imports a docker-save archive into the node's containerd,
// where pods find it by its tag with imagePullPolicy Never.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	return run(ctx, "ctr", "--address", c.ctrSock, "-n", "k8s.io", "images", "import", archive)
}

func (c *Cluster) startControlPlane(ctx context.Context, logs string) error {
	hostIP := net.ParseIP(c.HostIP)
	svcIP := c.Services.Addr().Next() // the "kubernetes" Service's ClusterIP
	apiCrt, apiKey, err := c.pki.issue("apiserver", "kube-apiserver", nil,
		[]net.IP{hostIP, net.ParseIP(svcIP.String()), net.IPv4(127, 0, 0, 1)},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"})
	if err != nil {
		return err
	}
	adminCrt, adminKey, err := c.pki.issueRSA("admin", "kubetest-admin", []string{"system:masters"})
	if err != nil {
		return err
	}
	if err := c.pki.kubeconfig(c.Kubeconfig, c.Server, adminCrt, adminKey); err != nil {
		return err
	}
	saPub, saKey, err := c.pki.serviceAccountKey()
	if err != nil {
		return err
	}

	etcdClient, etcdPeer, err := freePorts()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if _, err := c.startProc(logs, "etcd", filepath.Join(c.bin, "etcd"),
		"--name", "kubetest", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest="+peerURL, "--unsafe-no-fsync"); err != nil {
		return err
	}

	api, err := c.startProc(logs, "kube-apiserver", filepath.Join(c.bin, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", c.HostIP, "--advertise-address", c.HostIP, "--secure-port", "6443",
		"--service-cluster-ip-range", c.Services.String(),
		"--client-ca-file", c.pki.CA, "--tls-cert-file", apiCrt, "--tls-private-key-file", apiKey,
		"--kubelet-client-certificate", adminCrt, "--kubelet-client-key", adminKey,
		// Reach kubelet at the node's address, never by resolving its name.
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", saPub, "--service-account-signing-key-file", saKey,
		"--authorization-mode", "Node,RBAC", "--allow-privileged=true", "--profiling=false")
	if err != nil {
		return err
	}
	client, err := c.httpClient(adminCrt, adminKey)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the API server", 2*time.Minute, func() (bool, error) {
		if done, err := api.exited(); done {
			return false, fmt.Errorf("kube-apiserver %w: %v: %s", errExited, err, api.tail(3000))
		}
		resp, err := client.Get(c.Server + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return err
	}

	cm, err := c.componentKubeconfig("controller-manager", "system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	if _, err := c.startProc(logs, "kube-controller-manager", filepath.Join(c.bin, "kube-controller-manager"),
		"--kubeconfig", cm, "--authentication-kubeconfig", cm, "--authorization-kubeconfig", cm,
		"--bind-address", c.HostIP, "--leader-elect=false",
		"--service-account-private-key-file", saKey, "--root-ca-file", c.pki.CA,
		"--use-service-account-credentials=true", "--profiling=false"); err != nil {
		return err
	}
	sched, err := c.componentKubeconfig("scheduler", "system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	_, err = c.startProc(logs, "kube-scheduler", filepath.Join(c.bin, "kube-scheduler"),
		"--kubeconfig", sched, "--authentication-kubeconfig", sched, "--authorization-kubeconfig", sched,
		"--bind-address", c.HostIP, "--leader-elect=false", "--profiling=false")
	return err
}

func (c *Cluster) startNode(ctx context.Context, logs string, undo *cleanup) error {
	kubeletKC, err := c.componentKubeconfig("kubelet", "system:node:"+nodeName, []string{"system:nodes"})
	if err != nil {
		return err
	}
	servCrt, servKey, err := c.pki.issue("kubelet-serving", nodeName, nil, []net.IP{net.ParseIP(c.HostIP)}, []string{nodeName})
	if err != nil {
		return err
	}
	resolv := filepath.Join(c.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# pods resolve through the cluster DNS only\n"), 0o644); err != nil {
		return err
	}
	kubeletCfg := map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"cgroupDriver":                "cgroupfs",
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"address":                     c.HostIP,
		"readOnlyPort":                0,
		"healthzPort":                 0,
		"tlsCertFile":                 servCrt,
		"tlsPrivateKeyFile":           servKey,
		"authentication":              map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": true}, "x509": map[string]any{"clientCAFile": c.pki.CA}},
		"authorization":               map[string]any{"mode": "Webhook"},
		"clusterDomain":               "cluster.local",
		"clusterDNS":                  []string{c.HostIP},
		"resolvConf":                  resolv,
		"containerRuntimeEndpoint":    "unix://" + c.ctrSock,
		"podLogsDir":                  filepath.Join(c.Dir, "pod-logs"),
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"rotateCertificates":          false,
		"serializeImagePulls":         false,
	}
	kubeletCfgPath := filepath.Join(c.Dir, "kubelet.json")
	if err := writeJSON(kubeletCfgPath, kubeletCfg); err != nil {
		return err
	}
	kubelet, err := c.startProc(logs, "kubelet", filepath.Join(c.bin, "kubelet"),
		"--config", kubeletCfgPath, "--kubeconfig", kubeletKC,
		"--root-dir", filepath.Join(c.Dir, "kubelet"),
		"--hostname-override", nodeName, "--node-ip", c.HostIP)
	if err != nil {
		return err
	}

	proxyKC, err := c.componentKubeconfig("kube-proxy", "system:kube-proxy", nil)
	if err != nil {
		return err
	}
	proxyCfg := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": proxyKC},
		"mode":               "iptables",
		"bindAddress":        c.HostIP,
		"healthzBindAddress": net.JoinHostPort(c.HostIP, "10256"),
		"metricsBindAddress": net.JoinHostPort(c.HostIP, "10249"),
		"hostnameOverride":   nodeName,
		"clusterCIDR":        c.net.Pods.String(),
		"nodePortAddresses":  []string{c.Subnet.String()},
		// Every Service connection leaves the host from its bridge address:
		// without it a pod's reply to a pod on the same bridge would skip
		// the host and never be translated back.
		"iptables": map[string]any{"masqueradeAll": true, "localhostNodePorts": false},
		// Zero leaves the machine's conntrack settings as they are.
		"conntrack": map[string]any{"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
	}
	proxyCfgPath := filepath.Join(c.Dir, "kube-proxy.json")
	if err := writeJSON(proxyCfgPath, proxyCfg); err != nil {
		return err
	}
	undo.KubeProxyUp = true
	if _, err := c.startProc(logs, "kube-proxy", filepath.Join(c.bin, "kube-proxy"), "--config", proxyCfgPath); err != nil {
		return err
	}

	dnsKC, err := c.componentKubeconfig("coredns", "kubetest-coredns", []string{"system:masters"})
	if err != nil {
		return err
	}
	corefile := fmt.Sprintf(`cluster.local:53 {
    bind %s
    errors
    kubernetes cluster.local {
        kubeconfig %s kubetest
    }
}
`, c.HostIP, dnsKC)
	corefilePath := filepath.Join(c.Dir, "Corefile")
	if err := os.WriteFile(corefilePath, []byte(corefile), 0o644); err != nil {
		return err
	}
	if _, err := c.startProc(logs, "coredns", filepath.Join(c.bin, "coredns"), "-conf", corefilePath); err != nil {
		return err
	}
	if done, err := kubelet.exited(); done {
		return fmt.Errorf("kubelet %w: %v: %s", errExited, err, kubelet.tail(3000))
	}
	return nil
}

// dnsAnswers reports whether the cluster DNS resolves the API's Service.
func (c *Cluster) dnsAnswers() (bool, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(c.HostIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
	return err == nil && len(addrs) > 0, nil
}

// componentKubeconfig issues a client certificate for cn in orgs and writes
// a kubeconfig with it.
func (c *Cluster) componentKubeconfig(name, cn string, orgs []string) (string, error) {
	crt, key, err := c.pki.issue(name, cn, orgs, nil, nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, name+".kubeconfig")
	return path, c.pki.kubeconfig(path, c.Server, crt, key)
}

func (c *Cluster) httpClient(crt, key string) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.pki.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// Kubectl runs kubectl with the admin kubeconfig and returns its standard
// output; a failure's error carries its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// KubectlPath is the kubectl binary the cluster was built with.
func (c *Cluster) KubectlPath() string { return filepath.Join(c.bin, "kubectl") }

func (c *Cluster) startProc(logDir, name, bin string, args ...string) (*proc, error) {
	p, err := startProc(logDir, name, bin, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// waitFor polls cond every 250 ms until it holds, fails, or limit passes.
func (c *Cluster) waitFor(ctx context.Context, what string, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) logTails(t testing.TB) {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		t.Logf("kubetest: %s's log (last lines):\n%s", p.name, p.tail(3000))
	}
}

// stop stops the cluster and puts back what start changed, returning what
// it could not.
func (c *Cluster) stop(undo *cleanup) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	byName := map[string]*proc{}
	for _, p := range procs {
		byName[p.name] = p
	}
	// Pods first, through kubelet, so each sandbox's network is torn down
	// by CNI as usual; with the controllers and the scheduler stopped
	// before, so that no Deployment replaces them.
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if p := byName[name]; p != nil {
			p.stop(10 * time.Second)
		}
	}
	if k := byName["kubelet"]; k != nil {
		if done, _ := k.exited(); !done {
			dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
			_, _ = c.Kubectl(dctx, "delete", "pods", "--all", "--all-namespaces", "--force", "--grace-period=0", "--wait=false")
			_ = c.waitFor(dctx, "pods gone", 20*time.Second, func() (bool, error) {
				return len(c.tasks(dctx)) == 0, nil
			})
			dcancel()
		}
	}
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].name == "containerd" {
			continue
		}
		procs[i].stop(10 * time.Second)
	}
	if c.ctrSock != "" && byName["containerd"] != nil {
		for _, id := range c.tasks(ctx) {
			_ = run(ctx, "ctr", "--address", c.ctrSock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
			_ = run(ctx, "ctr", "--address", c.ctrSock, "-n", "k8s.io", "tasks", "delete", "-f", id)
		}
		byName["containerd"].stop(10 * time.Second)
		killShims(c.ctrSock)
	}
	if undo.KubeProxyUp {
		_ = run(ctx, filepath.Join(c.bin, "kube-proxy"), "--cleanup")
	}
	for _, r := range undo.Guard {
		if err := run(ctx, "iptables", append([]string{"-w", "-D"}, r...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if undo.Chains != nil {
		removeNewChains(ctx, undo.Chains)
	}
	removeKubepodsCgroups()
	if undo.Netns != nil {
		removeNewNetns(undo.Netns)
	}
	unmountUnder(c.Dir)
	if c.persist != "" {
		unmountUnder(c.persist)
	}
	if undo.Bridge {
		if err := run(ctx, "ip", "link", "del", bridgeName); err != nil {
			errs = append(errs, err)
		}
	}
	if undo.RunContainerd {
		// All of it is this node's: the sockets of shims killed above stay.
		if err := os.RemoveAll(shimSocketDir); err != nil {
			errs = append(errs, err)
		}
	}
	if undo.Sysctls != nil {
		errs = append(errs, restoreSysctls(undo.Sysctls)...)
	}
	return errs
}

// tasks lists the containers running in the node's containerd.
func (c *Cluster) tasks(ctx context.Context) []string {
	out, err := exec.CommandContext(ctx, "ctr", "--address", c.ctrSock, "-n", "k8s.io", "tasks", "list", "--quiet").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// killShims kills the runc shims containerd started for this node's socket
// (they outlive containerd by design).
func killShims(sock string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.Contains(args[0], "containerd-shim") && containsArg(args, sock) {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

func containsArg(args []string, s string) bool {
	for _, a := range args {
		if a == s || strings.HasPrefix(a, s) {
			return true
		}
	}
	return false
}

func freePorts() (a, b int, err error) {
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer l1.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer l2.Close()
	return l1.Addr().(*net.TCPAddr).Port, l2.Addr().(*net.TCPAddr).Port, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
