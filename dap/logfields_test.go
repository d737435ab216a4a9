package dap

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

// TestExecutorLogLinesNameTheSession: what an executor session logs says
// which session, connection and process it is about, on every line (the
// fields come from a hook rather than a per-session logger context).
func TestExecutorLogLinesNameTheSession(t *testing.T) {
	p, logs := badInputProxy(t)
	conn, err := net.DialTimeout("tcp", p.srv.ExecutorAddr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, conn, testToken, 4242, nil)
	defer f.Close()
	p.waitExecutors(1)
	// A request from the debuggee is logged (a warning) and refused.
	f.send(map[string]any{"type": "request", "command": "frobnicate"})
	const msg = "debuggee sent a request; sparkdap serves none"
	waitLog(t, logs, msg)
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := m["executor"].(float64); !ok {
			t.Errorf("log line lacks the executor's id: %s", line)
		}
		if m["remote"] != conn.LocalAddr().String() {
			t.Errorf("log line's remote = %v, want %s: %s", m["remote"], conn.LocalAddr(), line)
		}
		if m["pid"] != float64(4242) {
			t.Errorf("log line's pid = %v, want 4242: %s", m["pid"], line)
		}
		return
	}
}
