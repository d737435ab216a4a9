package dap

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// A worker stopped with the IDE attached but idle is resumed once MaxStop
// has passed, and the IDE session that shows it is told: a console line
// naming the worker and why, then its thread's continued. serve's terminal
// gets the same line.
func TestMaxStopResumesAForgottenStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		children bool
	}{{"merged", false}, {"child session", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var summary syncbuf.Buffer
			p := startProxy(t, func(c *Config) { c.MaxStop = 100 * time.Millisecond; c.Summary = &summary })
			var c *dapclient.Client
			if tc.children {
				_, children := p.childRoot(nil, nil)
				f := p.executor(301, nil)
				f.stop() // listed once it stops
				c = p.nextChild(children).Client
				p.runMaxStop(t, c, f)
			} else {
				c = p.ide(false, nil)
				f := p.executor(301, nil)
				f.stop()
				p.runMaxStop(t, c, f)
			}
			if s := summary.String(); !strings.Contains(s, "resumed: stopped") || !strings.Contains(s, "--max-stop 100ms") {
				t.Fatalf("serve's terminal was not told: %q", s)
			}
		})
	}
}

// runMaxStop waits for f's stop to reach c, then for the proxy to resume
// it and tell c.
func (p *testProxy) runMaxStop(t *testing.T, c *dapclient.Client, f *fakePydevd) {
	t.Helper()
	tid := stoppedOn(p.ctx, t, c)
	f.waitRequest("continue", nil)
	out, err := c.WaitEvent(p.ctx, "output", func(b json.RawMessage) bool {
		return strings.Contains(string(b), "resumed: stopped") && strings.Contains(string(b), "pid 301")
	})
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Category, Output string }
	if err := json.Unmarshal(out.Body, &body); err != nil || body.Category != "console" || !strings.Contains(body.Output, "--max-stop") {
		t.Fatalf("output event %s (%v): want a console line naming --max-stop", out.Body, err)
	}
	if _, err := c.WaitEvent(p.ctx, "continued", func(b json.RawMessage) bool {
		var cb struct{ ThreadID int }
		return json.Unmarshal(b, &cb) == nil && cb.ThreadID == tid
	}); err != nil {
		t.Fatal(err)
	}
	if st := p.hub.Executors(); len(st) != 1 || st[0].Stopped || !st[0].MaxStopResumed {
		t.Fatalf("after the resume: %+v", st)
	}
}

// The clock restarts with each IDE request about the stopped worker: a
// developer looking at its variables is not interrupted; one who stopped
// asking is, MaxStop after the last request.
func TestMaxStopClockRestartsOnRequests(t *testing.T) {
	var clock atomic.Int64 // nanoseconds since the stop
	p := startProxy(t, func(c *Config) { c.MaxStop = 30 * time.Minute })
	tx := p.hub.lock()
	p.hub.now = func() time.Time { return time.Unix(0, clock.Load()) }
	tx.unlock()
	c := p.ide(false, nil)
	f := p.executor(302, nil)
	f.stop()
	tid := stoppedOn(p.ctx, t, c)
	tx = p.hub.lock()
	es := tx.focused
	tx.unlock()
	check := func(at time.Duration, wantResumed bool) {
		t.Helper()
		clock.Store(int64(at))
		es.checkMaxStop()
		tx := p.hub.lock()
		stopped := len(tx.exec(es).stopped) > 0
		tx.unlock()
		if stopped == wantResumed {
			t.Fatalf("at %s after the stop: stopped %v, want %v", at, stopped, !wantResumed)
		}
	}
	check(29*time.Minute, false)
	clock.Store(int64(20 * time.Minute))
	if _, err := c.StackTrace(p.ctx, tid); err != nil { // a request about it
		t.Fatal(err)
	}
	check(31*time.Minute, false) // 11 minutes after the request
	check(49*time.Minute, false)
	if n := f.Count("continue"); n != 0 {
		t.Fatalf("resumed while the IDE was asking: %d continue request(s)", n)
	}
	check(51*time.Minute, true)
	f.waitRequest("continue", nil)
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if _, err := c.WaitEvent(ctx, "continued", nil); err != nil {
		t.Fatal(err)
	}
}
