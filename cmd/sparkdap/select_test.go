package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/selection"
)

func TestPrintWorkers(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	out := int64(3 << 10)
	ws := []control.KnownWorker{
		{Worker: selection.Worker{ExecutorID: "3", Host: "node-7", PID: 42, Running: true, Selected: true,
			Task: &selection.Task{Stage: 4, Partition: 37, TaskAttemptID: 311}, Since: now.Add(-41 * time.Second), Tasks: 6},
			Stopped: &control.WorkerFrame{File: "/home/dev/job/udf.py", Line: 12}, OutputBytes: &out},
		{Worker: selection.Worker{ExecutorID: "3", Host: "node-7", PID: 43, Task: &selection.Task{Stage: 4, Partition: 38, TaskAttemptID: 312},
			Since: now.Add(-2 * time.Second), Tasks: 5}},
		{Worker: selection.Worker{ExecutorID: "4", Host: "node-8", PID: 50, Task: &selection.Task{Stage: 4, Partition: 1, TaskAttemptID: 300},
			Since: now.Add(-9 * time.Second), Tasks: 2}, State: control.StateFinished},
		{Worker: selection.Worker{ExecutorID: "4", Host: "node-8", PID: 51, Task: &selection.Task{Stage: 4, Partition: 2, TaskAttemptID: 301},
			Since: now.Add(-8 * time.Second), Tasks: 1}, State: control.StateFailed, Exception: "KeyError"},
	}
	var b strings.Builder
	printWorkers(&b, ws, now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("printed %q", b.String())
	}
	for _, want := range []string{"partition 37 · stage 4 · task 311", "yes", "stopped at job/udf.py:12", "41s", "3.0 KiB"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
	for _, want := range []string{"partition 38", "no", "idle", "2s", " -"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("line %q lacks %q", lines[2], want)
		}
	}
	for i, want := range map[int]string{3: "finished", 4: "failed: KeyError"} {
		if !strings.Contains(lines[i], want) || strings.Contains(lines[i], "idle") {
			t.Errorf("line %q: want %q, not idle", lines[i], want)
		}
	}
	if got := exceptionLine(selection.ExceptionGroup{Type: "KeyError", Place: "udf.py:12", Tasks: 37, Held: 2}); got != "37 tasks raised KeyError at udf.py:12 (2 waiting: sparkdap select --task ID stops in one)" {
		t.Errorf("exception line %q", got)
	}
}
