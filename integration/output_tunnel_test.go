//go:build linux

package integration

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// tunnelOutputLines is what TestTunnelTaskOutputArrivesWhole's task
// prints: 16 MB of big_output.py's 80-byte lines.
const tunnelOutputLines = 200_000

// TestTunnelTaskOutputArrivesWhole: TestSparkTaskOutputArrivesWhole with
// the executors reaching the proxy through `serve --ssh` (agent mode, a
// real sshd on loopback). One debugged task of a real local Spark job
// prints 16 MB (200,000 numbered lines of 80 bytes) and the job ends
// right after it; every line crosses the tunnel and reaches the IDE,
// attached in merged mode, in order, once each, the last one included,
// and serve's log shows no connection cut in the middle of a message.
func TestTunnelTaskOutputArrivesWhole(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job and starts sshd")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	g := startGateway(t, ctx, "127.0.0.1")
	remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
	p := tunnelProxy(t, ctx, g, remote, "--agent-path", sparkdapBinary(t))
	checkTaskOutputWhole(t, ctx, p, remote, tunnelOutputLines)
}
