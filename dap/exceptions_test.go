package dap

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/selection"
)

// raise has f stop at an exception of type typ, as pydevd reports one.
func raise(f *fakePydevd, typ string) {
	f.event("stopped", map[string]any{"reason": "exception", "threadId": 1, "text": typ,
		"description": "'missing'", "allThreadsStopped": true})
}

// TestExceptionsGroupedAcrossWorkers: four workers raise KeyError at the
// same place; the IDE gets one stop, the other three run on after the
// hold (pydevd is told to continue, so the exception goes on to Spark),
// and the group counts four. A KeyError elsewhere is a group of its own
// and stops; a task asked for with WantTask stops though its group has.
func TestExceptionsGroupedAcrossWorkers(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.ExceptionHold = 300 * time.Millisecond })
	c := p.ide(false, nil)
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	var fs []*fakePydevd
	for i := range 4 {
		f := p.executor(1100+i, nil)
		fs = append(fs, f)
		taskEvent(f, 1100+i, 2, i)
	}
	for _, f := range fs {
		raise(f, "KeyError")
	}
	st, err := c.StoppedEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Reason != "exception" {
		t.Errorf("stop %+v", st)
	}
	continued := 0
	for _, f := range fs {
		if _, err := f.awaitRequest("continue", nil, 5*time.Second); err == nil {
			continued++
		}
	}
	if continued != 3 {
		t.Errorf("%d of the 3 held workers were continued after the hold", continued)
	}
	stops := func() int {
		n := 0
		for _, ev := range c.Events() {
			if ev.Event == "stopped" {
				n++
			}
		}
		return n
	}
	if n := stops(); n != 1 {
		t.Errorf("%d stops shown, want 1", n)
	}
	want := []selection.ExceptionGroup{{Type: "KeyError", Place: "udf.py:5", Tasks: 4}}
	if got := p.hub.Board().Groups(); !equalGroups(got, want) {
		t.Errorf("groups %+v, want %+v", got, want)
	}

	// Elsewhere: a group of its own.
	other := p.executor(1200, nil)
	other.SetFramePath("/job/other.py")
	raise(other, "KeyError")
	if _, err := c.StoppedEvent(ctx); err != nil {
		t.Fatalf("a KeyError at another place did not stop: %v", err)
	}

	// A task asked for: its held stop is shown.
	wanted := p.executor(1300, nil)
	wanted.event("sparkdapTask", map[string]any{"executorId": "1", "host": "worker-1", "pid": 1300,
		"stageId": 2, "partitionId": 9, "taskAttemptId": 77, "label": "stage 2 · partition 9"})
	raise(wanted, "KeyError")
	waitFor(t, "the stop held", func() (bool, string) {
		g := p.hub.Board().Groups()
		return len(g) > 0 && g[0].Held == 1, jsonText(g)
	})
	p.hub.Board().WantTask(77)
	if _, err := c.StoppedEvent(ctx); err != nil {
		t.Fatalf("the task asked for did not stop: %v", err)
	}
	if n := stops(); n != 3 {
		t.Errorf("%d stops shown, want 3", n)
	}
	if _, err := wanted.awaitRequest("continue", nil, time.Second); err == nil {
		t.Error("the task asked for was continued, not shown")
	}
}

func equalGroups(a, b []selection.ExceptionGroup) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestExceptionInPlumbingRunsOnUnseen: a stop at an exception raised in
// the wrapper or PySpark's daemon (a reused worker's SystemExit as the
// JVM closes its socket) is continued, never shown and never grouped;
// the user's next exception still stops.
func TestExceptionInPlumbingRunsOnUnseen(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.ExceptionHold = 300 * time.Millisecond })
	c := p.ide(false, nil)
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	for i, path := range []string{"/tmp/sparkdap-submit-1/remote_debug.py", "/opt/spark/python/lib/pyspark.zip/pyspark/daemon.py"} {
		f := p.executor(1400+i, nil)
		taskEvent(f, 1400+i, 2, i)
		f.SetFramePath(path)
		raise(f, "SystemExit")
		if _, err := f.awaitRequest("continue", nil, 5*time.Second); err != nil {
			t.Fatalf("the stop in %s was not continued: %v", path, err)
		}
	}
	user := p.executor(1500, nil)
	taskEvent(user, 1500, 2, 5)
	raise(user, "KeyError")
	if _, err := c.StoppedEvent(ctx); err != nil {
		t.Fatalf("the user's KeyError did not stop: %v", err)
	}
	for _, ev := range c.Events() {
		if ev.Event == "stopped" && strings.Contains(string(ev.Body), "SystemExit") {
			t.Errorf("a stop in the plumbing was shown: %s", ev.Body)
		}
	}
	want := []selection.ExceptionGroup{{Type: "KeyError", Place: "udf.py:5", Tasks: 1}}
	if got := p.hub.Board().Groups(); !equalGroups(got, want) {
		t.Errorf("groups %+v, want %+v", got, want)
	}
}
