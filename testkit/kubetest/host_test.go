//go:build linux

package kubetest

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestNetworkForKeepsEverythingInTheSubnet(t *testing.T) {
	n := networkFor(netip.MustParsePrefix("10.213.71.0/24"), "eth0")
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"host", n.Host.String(), "10.213.71.1"},
		{"pods", n.Pods.String(), "10.213.71.0/25"},
		{"services", n.Services.String(), "10.213.71.128/25"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
	if n.Pods.Overlaps(n.Services) || !n.Subnet.Contains(n.Services.Addr()) || !n.Pods.Contains(n.Host) {
		t.Errorf("halves wrong: %+v", n)
	}
}

func TestGuardRulesDropWhatLeavesByTheUplink(t *testing.T) {
	n := networkFor(netip.MustParsePrefix("10.213.72.0/24"), "ens3")
	rules := guardRules(n)
	if len(rules) == 0 {
		t.Fatal("no rules with an uplink")
	}
	for _, r := range rules {
		s := strings.Join(r, " ")
		if !slices.Contains(r, "ens3") || !strings.HasSuffix(s, "-j DROP") || !strings.Contains(s, ruleComment) {
			t.Errorf("rule %q does not drop traffic to ens3 with the comment", s)
		}
	}
	if got := guardRules(networkFor(n.Subnet, "")); got != nil {
		t.Errorf("rules without an uplink: %v", got)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:         "/a/b",
		`/a\040b`:      "/a b",
		`/x\011y\134z`: "/x\ty\\z",
		`/trailing\04`: `/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
