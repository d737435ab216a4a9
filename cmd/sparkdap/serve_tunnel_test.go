package main

import (
	"strings"
	"testing"
)

// TestExecutorAddr: the address serve prints for executors is never a
// forward's loopback end, which executors cannot use.
func TestExecutorAddr(t *testing.T) {
	for _, tc := range []struct {
		gateway, listen string
		want, not       string
	}{
		{"edge.example.com", "0.0.0.0:5678", "edge.example.com:5678", ""},
		{"edge.example.com", "127.0.0.1:5678", "127.0.0.1:5678", ""},
		{"10.0.0.7", "[::]:5678", "10.0.0.7:5678", ""},
		// kubectl port-forward deployment/sparkdap-gateway 2222:22
		{"127.0.0.1", "0.0.0.0:5678", "port 5678 of the gateway's own address", "127.0.0.1:5678"},
		{"localhost", "0.0.0.0:5678", "port 5678 of the gateway's own address", "localhost:5678"},
	} {
		got := executorAddr(tc.gateway, tc.listen)
		if !strings.Contains(got, tc.want) || (tc.not != "" && strings.Contains(got, tc.not)) {
			t.Errorf("executorAddr(%q, %q) = %q, want %q in it", tc.gateway, tc.listen, got, tc.want)
		}
	}
}
