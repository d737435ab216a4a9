package integration

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/testenv"
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

// checkTaskOutputWhole attaches an IDE to p in merged mode, runs
// big_output.py's job through `sparkdap submit --proxy executors` with
// partition 0 debugged and printing lines, and checks that every line
// reaches the IDE, in order, once each.
func checkTaskOutputWhole(t *testing.T, ctx context.Context, p *proxy, executors string, lines int) {
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, nil); err != nil {
		t.Fatal(err)
	}
	out := followOutput(ctx, ide)

	dir := t.TempDir()
	script := filepath.Join(dir, "big_output.py")
	copyFile(t, bigOutputScript(t), script)
	result := filepath.Join(dir, "out.json")
	job := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", executors, "--partitions", "0", "--",
		"--master", "local[2]", script, "job", result, strconv.Itoa(lines))
	job.wait(t, ctx)
	ended := time.Now()
	if got := readJSON(t, result)["count"]; got != float64(8) {
		t.Errorf("count = %v, want 8", got)
	}
	t.Logf("the job ran %v", job.elapsed.Round(100*time.Millisecond))

	// The worker is gone with the job: what it sent is in flight (here
	// through the tunnel too) or arrived. Wait for the last line, or for
	// the output to stop coming.
	for {
		seqs, _, _, _, last := out.snapshot()
		if len(seqs) > 0 && seqs[len(seqs)-1] == lines-1 {
			break
		}
		quiet := time.Since(ended)
		if !last.IsZero() && last.After(ended) {
			quiet = time.Since(last)
		}
		if quiet > 10*time.Second || time.Since(ended) > 90*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	seqs, events, bytes, first, last := out.snapshot()
	s := summarize(seqs, lines)
	attached := regexp.MustCompile(`(?m)^sparkdap: \+ executor \d+ attached \[(.*)\]$`).FindAllString(p.Log(), -1)
	t.Logf("%d output events, %d bytes of output text at the IDE with merged mode's labels (%d bytes printed), the first %v after the job started, the last %v after it ended (%v after the first: %.1f MB/s); %d debugged worker(s): %q",
		events, bytes, lines*bigOutputLineWidth, first.Sub(job.started).Round(time.Millisecond),
		last.Sub(ended).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond),
		float64(bytes)/1e6/max(last.Sub(first).Seconds(), 1e-3), len(attached), attached)
	t.Logf("at the IDE: %v", s)
	t.Logf("the job ended at %s; serve: %q", ended.Format("15:04:05.000"),
		regexp.MustCompile(`(?m)^.* executor detached .*$`).FindAllString(p.Log(), -1))
	out.mu.Lock()
	notes, bad := out.notes, out.bad
	out.mu.Unlock()
	if len(notes) > 0 {
		t.Logf("other sparkdap lines at the IDE: %q", notes)
	}
	if lost := out.lossLines(); len(lost) > 0 {
		t.Logf("the IDE was told of lost output: %q", lost)
	}
	if len(attached) != 1 {
		t.Errorf("%d debug sessions, want 1 (partition 0's)", len(attached))
	}
	if len(bad) > 0 {
		t.Errorf("numbered lines arrived cut or garbled: %q", bad)
	}
	if s.missing > 0 || s.dups > 0 || s.outOfOrder > 0 {
		t.Errorf("the IDE did not get the task's %d lines whole, in order, once each: %v", lines, s)
	}
	if s.maxSeq != lines-1 {
		t.Errorf("the last line (%d) never reached the IDE; the last that did: %d", lines-1, s.maxSeq)
	}
	if cut := cutMidMessage.FindAllString(p.Log(), 5); len(cut) > 0 {
		t.Errorf("serve's log shows a connection cut in the middle of a message:\n%s", strings.Join(cut, "\n"))
	}
}
