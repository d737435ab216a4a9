//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestLiveViewInATerminal runs `sparkdap serve` in a real pseudo-terminal
// (tmux) and reads the screen as a person would: the status block shows
// the connected worker, then that it stopped and where.
func TestLiveViewInATerminal(t *testing.T) {
	testenv.SkipIfShort(t, "starts tmux and debugpy workers")
	python(t)
	tmux := testenv.Tool(t, "tmux", "apt-get install tmux")
	ctx := testContext(t, 2*time.Minute)
	bin := sparkdapBinary(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready.json")
	session := fmt.Sprintf("sparkdap-live-%d", os.Getpid())
	sock := filepath.Join(dir, "tmux.sock") // a private tmux server
	tm := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	cmdline := fmt.Sprintf("%s serve --ide 127.0.0.1:0 --executors 127.0.0.1:0 --token %s --ready-file %s; sleep 30",
		bin, testToken, ready)
	if out, err := tm("new-session", "-d", "-s", session, "-x", "160", "-y", "40", cmdline); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { tm("kill-server") })
	screen := func() string {
		out, _ := tm("capture-pane", "-p", "-t", session)
		return out
	}
	waitScreen := func(what string, ok func(string) bool) string {
		t.Helper()
		for i := 0; ; i++ {
			s := screen()
			if ok(s) {
				return s
			}
			if i == 300 {
				t.Fatalf("the terminal never showed %s; it shows:\n%s", what, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if i == 200 {
			t.Fatalf("sparkdap serve in tmux never got ready; screen:\n%s", screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	data, _ := os.ReadFile(ready)
	var addrs struct{ IDE, Executors string }
	if err := json.Unmarshal(data, &addrs); err != nil {
		t.Fatal(err)
	}
	p := &proxy{IDE: addrs.IDE, Executors: addrs.Executors, Token: testToken, stderr: &syncbuf.Buffer{}}
	waitScreen("the waiting status", func(s string) bool {
		return strings.Contains(s, "── sparkdap: 0 debugged") && strings.Contains(s, "waiting for executors")
	})

	ide := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, ide, true)
	w := startWorker(t, ctx, p, 1, workerOpts{})
	line := testenv.MarkedLine(t, workerScript(t), "")
	s := waitScreen("the stopped worker", func(s string) bool {
		return strings.Contains(s, fmt.Sprintf("STOPPED at worker.py:%d", line)) && strings.Contains(s, fmt.Sprintf("pid %d", w.PID))
	})
	if !strings.Contains(s, "1 debugged · 1 stopped") || !strings.Contains(s, "attached") {
		t.Errorf("status header does not count the stopped worker or the IDE:\n%s", s)
	}
	// Log lines scroll above the block; the block stays whole at the bottom.
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "STOPPED at worker.py") {
		t.Errorf("the status block is not at the bottom; last line %q\n%s", last, s)
	}
	if !strings.Contains(s, "+ executor") {
		t.Errorf("the attach summary line did not scroll above the block:\n%s", s)
	}
	if err := ide.Disconnect(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	w.waitSuccess(t, ctx)
}
