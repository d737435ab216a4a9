package selection

import (
	"bufio"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sparkdap/sparkdap/admission"
)

// runWatch serves a watch of a worker of pid whose connection carries
// reports, then ends: the worker has come and gone.
func runWatch(t *testing.T, b *Board, pid int64, reports string) {
	t.Helper()
	wa, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{ExecutorID: "1", Host: "h", PID: pid}, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := wa.Serve(bufio.NewReader(strings.NewReader(reports)), func([]byte) {}); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func taskLine(partition, taskAttemptID int64) string {
	return fmt.Sprintf(`SPARKDAP/2 TASK {"stageId":1,"partitionId":%d,"attemptNumber":0,"taskAttemptId":%d,"selected":false}`+"\n", partition, taskAttemptID)
}

// A worker whose watch connection closed is listed as finished, with its
// last task, not running, for as long as it is among the last
// MaxFinished to go: the oldest is dropped first. A watch cancelled
// before it was served (its reply failed) never followed anything and is
// not kept.
func TestFinishedKeepsTheLastThousand(t *testing.T) {
	b := NewBoard(0)
	runWatch(t, b, 1, taskLine(7, 70))
	fin := b.Finished()
	if len(fin) != 1 || fin[0].PID != 1 || fin[0].Running || fin[0].Task == nil || fin[0].Task.Partition != 7 || fin[0].Tasks != 1 {
		t.Fatalf("finished %+v", fin)
	}
	if ws := b.Workers(); len(ws) != 0 {
		t.Fatalf("a finished worker is still followed: %+v", ws)
	}
	wa, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{PID: 99999}, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	wa.Cancel()
	for pid := int64(2); pid <= MaxFinished+5; pid++ {
		runWatch(t, b, pid, "")
	}
	fin = b.Finished()
	if len(fin) != MaxFinished {
		t.Fatalf("%d finished workers kept, want %d", len(fin), MaxFinished)
	}
	// Workers 1 to 5 were the oldest: dropped; the rest, oldest first.
	for i, w := range fin {
		if want := int64(i + 6); w.PID != want {
			t.Fatalf("finished[%d] is pid %d, want %d (oldest first, the first five dropped)", i, w.PID, want)
		}
	}
	// A copy: the caller may change it.
	fin[0].PID = -1
	if b.Finished()[0].PID != 6 {
		t.Error("Finished handed out the Board's own list")
	}
}

// OnUpdate hears each change of what Workers, Finished and Current
// report: a worker joining, each report, its end, and a new selection.
func TestOnUpdate(t *testing.T) {
	b := NewBoard(0)
	var n atomic.Int64
	b.OnUpdate(func() { n.Add(1) })
	runWatch(t, b, 1, taskLine(1, 10)+"SPARKDAP/2 IDLE\n")
	if got := n.Load(); got != 4 { // joined, task, idle, gone
		t.Errorf("%d updates for a worker's life, want 4", got)
	}
	none := None()
	if _, err := b.Set(&none); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 5 {
		t.Errorf("%d updates after a selection, want 5", got)
	}
}

// Raised remembers which task raised what, for the tasks whose attempt
// id is known, within a bound.
func TestTaskExceptions(t *testing.T) {
	b := NewBoard(0)
	b.Raised("KeyError", "udf.py:12", 70)
	b.Raised("KeyError", "udf.py:12", -1)
	if got := b.TaskExceptions(); len(got) != 1 || got[70] != "KeyError" {
		t.Fatalf("task exceptions %v", got)
	}
	for id := int64(1000); id < 1000+maxRaisedTasks; id++ {
		b.Raised("ValueError", "udf.py:3", id)
	}
	got := b.TaskExceptions()
	if len(got) != maxRaisedTasks || got[70] != "" || got[1000] != "ValueError" {
		t.Errorf("%d tasks remembered (task 70: %q), want %d, the oldest dropped", len(got), got[70], maxRaisedTasks)
	}
}

// The Board keeps the sparkdap version each worker's watch hello said,
// cleaned (a caller's hello need not come through admission.ReadHello),
// while the worker follows the selection and once it finished; a worker
// whose wrapper said none has "".
func TestWorkerVersion(t *testing.T) {
	for _, tc := range []struct {
		name, said, want string
	}{
		{"release", "0.3.0", "0.3.0"},
		{"older wrapper", "", ""},
		{"terminal sequence", "\x1b]0;owned\x070.3.0\r\n", "\uFFFD]0;owned\uFFFD0.3.0  "},
		{"capped", strings.Repeat("9", 80), strings.Repeat("9", admission.MaxVersionRunes-1) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBoard(0)
			wa, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{Host: "h", PID: 1}, Watch: true, SparkdapVersion: tc.said})
			if err != nil {
				t.Fatal(err)
			}
			if ws := b.Workers(); len(ws) != 1 || ws[0].SparkdapVersion != tc.want {
				t.Fatalf("following: %+v, want version %q", ws, tc.want)
			}
			if err := wa.Serve(bufio.NewReader(strings.NewReader(taskLine(1, 10))), func([]byte) {}); err != nil {
				t.Fatal(err)
			}
			if fin := b.Finished(); len(fin) != 1 || fin[0].SparkdapVersion != tc.want {
				t.Errorf("finished: %+v, want version %q", fin, tc.want)
			}
		})
	}
}
