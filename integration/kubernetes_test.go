package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/kubetest"
)

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
