//go:build linux

package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// bridgeName is the bridge the pods are on; one cluster runs at a time.
const bridgeName = "sdkube0"

// ruleComment marks the iptables rules the cluster adds itself, so a run
// after a crash finds and removes them.
const ruleComment = "sparkdap-kubetest"

// network is the cluster's addresses, all inside one /24 on the bridge.
type network struct {
	Subnet   netip.Prefix // the bridge's /24
	Host     netip.Addr   // its first address: the node, every component
	Pods     netip.Prefix // lower half: pod addresses
	Services netip.Prefix // upper half: the Service (ClusterIP) range
	Uplink   string       // the interface of the machine's default route, "" if none
}

// pickNetwork returns the first candidate /24 that no interface address
// and no route of the machine overlaps.
func pickNetwork() (network, error) {
	used, err := usedPrefixes()
	if err != nil {
		return network{}, err
	}
	uplink, err := defaultRouteInterface()
	if err != nil {
		return network{}, err
	}
	for third := 71; third < 91; third++ {
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(third), 0}), 24)
		if slices.ContainsFunc(used, subnet.Overlaps) {
			continue
		}
		return networkFor(subnet, uplink), nil
	}
	return network{}, errors.New("kubetest: every candidate subnet 10.213.71-90.0/24 is in use")
}

// networkFor splits a /24 into the host's address (the first), the pods'
// half and the Services' half.
func networkFor(subnet netip.Prefix, uplink string) network {
	base := subnet.Masked().Addr().As4()
	base[3] = 128
	return network{
		Subnet:   subnet.Masked(),
		Host:     subnet.Masked().Addr().Next(),
		Pods:     netip.PrefixFrom(subnet.Masked().Addr(), 25),
		Services: netip.PrefixFrom(netip.AddrFrom4(base), 25),
		Uplink:   uplink,
	}
}

// usedPrefixes lists the machine's interface networks and IPv4 routes
// (other than the default route, which overlaps everything).
func usedPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	routes, err := readRoutes()
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.dst.Bits() > 0 {
			out = append(out, r.dst)
		}
	}
	return out, nil
}

type route struct {
	iface string
	dst   netip.Prefix
}

// readRoutes parses /proc/net/route (addresses in host byte order, hex).
func readRoutes() ([]route, error) {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, err
	}
	var out []route
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		dst, err1 := hex.DecodeString(f[1])
		mask, err2 := hex.DecodeString(f[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			continue
		}
		ones, _ := net.IPMask(binary.BigEndian.AppendUint32(nil, binary.LittleEndian.Uint32(mask))).Size()
		addr := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, binary.LittleEndian.Uint32(dst))))
		out = append(out, route{iface: f[0], dst: netip.PrefixFrom(addr, ones)})
	}
	return out, sc.Err()
}

func defaultRouteInterface() (string, error) {
	routes, err := readRoutes()
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		if r.dst.Bits() == 0 {
			return r.iface, nil
		}
	}
	return "", nil
}

// run runs a host command, its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// setupBridge creates the bridge with the host's address; a bridge of
// that name left by an earlier run is removed first.
func setupBridge(ctx context.Context, n network) error {
	_ = run(ctx, "ip", "link", "del", bridgeName)
	if err := run(ctx, "ip", "link", "add", bridgeName, "type", "bridge"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "addr", "add", netip.PrefixFrom(n.Host, n.Subnet.Bits()).String(), "dev", bridgeName); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", bridgeName, "up")
}

// guardRules are the rules that keep pod traffic on the machine: nothing
// from the bridge or its subnet leaves by the uplink, forwarded or not.
func guardRules(n network) [][]string {
	if n.Uplink == "" {
		return nil
	}
	c := []string{"-m", "comment", "--comment", ruleComment, "-j", "DROP"}
	return [][]string{
		append([]string{"FORWARD", "-i", bridgeName, "-o", n.Uplink}, c...),
		append([]string{"FORWARD", "-s", n.Subnet.String(), "-o", n.Uplink}, c...),
		append([]string{"OUTPUT", "-d", n.Subnet.String(), "-o", n.Uplink}, c...),
	}
}

// removeTaggedRules deletes every filter rule carrying ruleComment, as a
// crashed run may have left them.
func removeTaggedRules(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-S").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, ruleComment) {
			continue
		}
		spec := strings.Fields(strings.TrimPrefix(line, "-A "))
		for i, f := range spec { // iptables -S quotes nothing here; strip any quotes anyway
			spec[i] = strings.Trim(f, `"`)
		}
		_ = run(ctx, "iptables", append([]string{"-w", "-D"}, spec...)...)
	}
}

// iptablesChains lists the chains of table.
func iptablesChains(ctx context.Context, table string) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", table, "-S").Output()
	if err != nil {
		return nil, fmt.Errorf("iptables -t %s -S: %w", table, err)
	}
	chains := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
			chains[f[1]] = true
		}
	}
	return chains, nil
}

var iptablesTables = []string{"filter", "nat", "mangle"}

// snapshotChains records every table's chains before the cluster starts.
func snapshotChains(ctx context.Context) (map[string]map[string]bool, error) {
	snap := map[string]map[string]bool{}
	for _, t := range iptablesTables {
		c, err := iptablesChains(ctx, t)
		if err != nil {
			return nil, err
		}
		snap[t] = c
	}
	return snap, nil
}

// removeNewChains deletes the chains that were not in before, first the
// rules that jump to them from the chains that were.
func removeNewChains(ctx context.Context, before map[string]map[string]bool) {
	for _, t := range iptablesTables {
		now, err := iptablesChains(ctx, t)
		if err != nil {
			continue
		}
		var added []string
		for c := range now {
			if !before[t][c] {
				added = append(added, c)
			}
		}
		if len(added) == 0 {
			continue
		}
		out, _ := exec.CommandContext(ctx, "iptables", "-w", "-t", t, "-S").Output()
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || !before[t][f[1]] {
				continue
			}
			if j := slices.Index(f, "-j"); j > 0 && j+1 < len(f) && slices.Contains(added, f[j+1]) {
				_ = run(ctx, "iptables", append([]string{"-w", "-t", t, "-D"}, f[1:]...)...)
			}
		}
		for _, c := range added {
			_ = run(ctx, "iptables", "-w", "-t", t, "-F", c)
		}
		for _, c := range added {
			_ = run(ctx, "iptables", "-w", "-t", t, "-X", c)
		}
	}
}

// sysctls the node sets: ip_forward (the cluster's own, for Services),
// kubelet's and kube-proxy's. Missing ones are skipped.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"vm/overcommit_memory",
	"kernel/panic",
	"kernel/panic_on_oops",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

func readSysctls() map[string]string {
	saved := map[string]string{}
	for _, k := range sysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			saved[k] = strings.TrimSpace(string(b))
		}
	}
	return saved
}

// restoreSysctls writes back each saved value that changed.
func restoreSysctls(saved map[string]string) []error {
	var errs []error
	for k, v := range saved {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil && strings.TrimSpace(string(b)) == v {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
		}
	}
	return errs
}

// netnsNames lists /run/netns, where containerd's CNI setup keeps the pods'
// network namespaces.
func netnsNames() map[string]bool {
	names := map[string]bool{}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		names[e.Name()] = true
	}
	return names
}

// removeNewNetns unmounts and removes the network namespaces not in before.
func removeNewNetns(before map[string]bool) {
	for name := range netnsNames() {
		if before[name] {
			continue
		}
		p := filepath.Join("/run/netns", name)
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		_ = os.Remove(p)
	}
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeKubepodsCgroups removes the cgroups kubelet made (cgroupfs driver,
// cgroup v1: a kubepods tree in every hierarchy), deepest first, once their
// processes are gone. It kills any process still in them first.
func removeKubepodsCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if flat := "/sys/fs/cgroup/kubepods"; fileExists(flat) {
		roots = append(roots, flat)
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, pid := range strings.Fields(string(b)) {
					var n int
					if _, err := fmt.Sscan(pid, &n); err == nil && n > 1 {
						_ = syscall.Kill(n, syscall.SIGKILL)
					}
				}
			}
		}
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			for i := 0; i < 20; i++ {
				if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
