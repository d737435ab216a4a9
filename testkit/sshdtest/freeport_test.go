package sshdtest

import "testing"

// Picking ports one at a time, each listener closed before the next bind,
// gives two equal ports among 200 in most runs; a daemon handed both
// fails to start.
func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := FreePorts("127.0.0.1", 200)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int]bool, len(ports))
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("port %d given twice or invalid in %v", p, ports)
		}
		seen[p] = true
	}
}
