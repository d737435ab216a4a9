//go:build linux

// Package kubetest starts a real one-node Kubernetes for a test, from the
// binaries and image archives scripts/setup-k8s caches under .cache/k8s:
// containerd (Debian's, with its own socket and state under the test's
// directory), etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet, kube-proxy and CoreDNS, each a child process of the test.
//
// Everything stays on the machine. Pods live on a bridge the cluster
// creates with a free private /24: the host is its first address and every
// component listens there or on loopback; pods get the lower half, the
// Service range is the upper half, and the pods' only route is to the
// Service range through the host, with no default route. An iptables rule
// drops anything from the bridge that would still leave by the interface of
// the machine's default route. CoreDNS answers for cluster.local and
// forwards nothing. Images are imported into containerd from the archives
// (no registry); pods use them with imagePullPolicy Never. containerd's
// root (content and unpacked images) lives in .cache/k8s/containerd and
// outlives the test, so an archive imported once is not imported again;
// its state (sockets, mounts, running containers) is the test's.
//
// The kernel settings the node changes (ip_forward, which Services need;
// vm.overcommit_memory and kernel.panic*, which kubelet sets; conntrack and
// bridge settings kube-proxy may set), the iptables rules and chains it adds,
// its mounts, network namespaces and cgroups are all put back when the test
// ends. The cluster needs root; without root or the cache the test is
// testenv.Missing: skipped locally, saying why, and failed in CI.
package kubetest
