package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"
	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// helloNonces says a worker's hello (accepted) and returns its nonces.
func helloNonces(t *testing.T, addr string, info TaskInfo) (wn, pn string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	reply, _, wn, pn, err := admission.IntroduceWithNonces(c, testToken, admission.Hello{TaskInfo: info})
	if err != nil || reply != "OK" {
		t.Fatalf("hello: %q, %v", reply, err)
	}
	return wn, pn
}

// sendLoss plays the wrapper's loss report: a fresh connection, one line,
// closed without reading.
func sendLoss(t *testing.T, addr, line string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, line); err != nil {
		t.Fatal(err)
	}
}

// TestLossReportToldToIDE: a worker whose output could not all reach the
// proxy before its task ended says how much on a connection of its own;
// serve's log (Warn) and the IDE's console say it once, naming the worker
// its hello described. A report with a wrong proof tells the IDE nothing.
func TestLossReportToldToIDE(t *testing.T) {
	var log syncbuf.Buffer
	p := startProxy(t, func(c *Config) {
		c.Log = zerolog.New(zerolog.MultiLevelWriter(&log, zerolog.NewTestWriter(t))).Level(zerolog.DebugLevel)
	})
	c := p.ide(false, nil)
	addr := p.srv.ExecutorAddr().String()
	wn, pn := helloNonces(t, addr, TaskInfo{PID: 4242, Host: "node-5", ExecutorID: "3", Label: "stage 2 · partition 9 · attempt 0"})

	// A wrong proof first: refused, counted, nothing for the IDE.
	sendLoss(t, addr, admission.LossLine("not-the-token", wn, pn, 999, 9))
	waitFor(t, "the bad report refused", func() (bool, string) {
		n := p.hub.Stats().Refused
		return n == 1, fmt.Sprintf("%d refused", n)
	})

	line := admission.LossLine(testToken, wn, pn, 123456, 789)
	sendLoss(t, addr, line)
	sendLoss(t, addr, line) // the same report again: told once
	msg := "worker exec 3 · node-5 · pid 4242: 123456 bytes (789 lines) of output did not reach the debugger " +
		"before the task ended; the executor's log has them"
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := c.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		var body godap.OutputEventBody
		return json.Unmarshal(b, &body) == nil && body.Output == "sparkdap: "+msg+"\n" && body.Category == "console"
	}); err != nil {
		t.Fatalf("the IDE's console never showed %q: %v", msg, err)
	}
	// A last, different report, so that the repeat has been read by the
	// time it is told.
	sendLoss(t, addr, admission.LossLine(testToken, wn, pn, 1, 1))
	if _, err := c.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		return strings.Contains(string(b), "1 bytes (1 lines)")
	}); err != nil {
		t.Fatalf("the last report never told: %v", err)
	}
	waitFor(t, "serve's log", func() (bool, string) {
		return strings.Count(log.String(), "did not reach the debugger") == 2, log.String()
	})
	told := 0
	for _, ev := range c.Events() {
		if ev.Event != "output" || !strings.Contains(string(ev.Body), "did not reach the debugger") {
			continue
		}
		told++
		if strings.Contains(string(ev.Body), "999 bytes") {
			t.Errorf("a report with a wrong proof reached the IDE: %s", ev.Body)
		}
	}
	if told != 2 {
		t.Errorf("the IDE was told %d reports, want 2 (a repeat is told once)", told)
	}
	var entry struct {
		Level, Message, Worker string
		Bytes, Lines           int64
	}
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "123456 bytes") {
			if err := json.Unmarshal([]byte(l), &entry); err != nil {
				t.Fatal(err)
			}
		}
	}
	if entry.Level != "warn" || entry.Message != msg || entry.Worker != "exec 3 · node-5 · pid 4242" ||
		entry.Bytes != 123456 || entry.Lines != 789 {
		t.Errorf("serve's log line %+v: want at warn %q", entry, msg)
	}
}
