package selection

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  Selection
		ok   bool
	}{
		{"all", All(), true},
		{"none", None(), true},
		{"partitions", Selection{Partitions: []int64{0, 37}, SampleRate: 1}, true},
		{"zero rate", Selection{}, false},
		{"rate above one", Selection{SampleRate: 1.5}, false},
		{"negative partition", Selection{Partitions: []int64{-1}, SampleRate: 1}, false},
		{"negative stage", Selection{Stages: []int64{-2}, SampleRate: 1}, false},
		{"empty executor", Selection{Executors: []string{""}, SampleRate: 1}, false},
		{"control character", Selection{Executors: []string{"1\x1b[2J"}, SampleRate: 1}, false},
		{"too many ids", Selection{Partitions: make([]int64, MaxIDs+1), SampleRate: 1}, false},
	} {
		err := tc.sel.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadSelection)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestSelects(t *testing.T) {
	sel := Selection{Partitions: []int64{37}, Stages: []int64{4}, Executors: []string{"2"}, SampleRate: 1}
	for _, tc := range []struct {
		stage, partition int64
		executor         string
		want             bool
	}{
		{4, 37, "2", true},
		{4, 36, "2", false},
		{3, 37, "2", false},
		{4, 37, "1", false},
	} {
		if got := sel.Selects(tc.stage, tc.partition, tc.executor); got != tc.want {
			t.Errorf("%+v selects %d/%d/%s = %v", sel, tc.stage, tc.partition, tc.executor, got)
		}
	}
	if None().Selects(0, 0, "1") {
		t.Error("None selects a task")
	}
	// The wrapper's sampling (zlib.crc32 of "stage:partition" over 2^32):
	// in Python, zlib.crc32(b"1:3") / 2**32 is about 0.2522.
	if !(Selection{SampleRate: 0.26}).Selects(1, 3, "1") || (Selection{SampleRate: 0.25}).Selects(1, 3, "1") {
		t.Error("sampling differs from the wrapper's")
	}
}

func TestString(t *testing.T) {
	for sel, want := range map[*Selection]string{
		{Partitions: []int64{37}, SampleRate: 1}:                         "partitions 37 · stages all · executors all",
		{Partitions: []int64{}, Stages: []int64{1, 2}, SampleRate: 0.25}: "partitions none · stages 1,2 · executors all · sample rate 0.25",
		{Executors: []string{"1", "3"}, SampleRate: 1}:                   "partitions all · stages all · executors 1,3",
	} {
		if got := sel.String(); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// serveWatch runs a Board's watch on one end of a pipe and returns the
// other end, read line by line, and Serve's result.
func serveWatch(t *testing.T, b *Board, info admission.TaskInfo) (net.Conn, *bufio.Reader, <-chan error) {
	t.Helper()
	wa, err := b.Admit(admission.Hello{TaskInfo: info, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	proxy, worker := net.Pipe()
	t.Cleanup(func() { proxy.Close(); worker.Close() })
	done := make(chan error, 1)
	go func() {
		done <- wa.Serve(bufio.NewReader(proxy), func(b []byte) {
			_ = proxy.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = proxy.Write(b)
		})
		proxy.Close()
	}()
	return worker, bufio.NewReader(worker), done
}

func readSelect(t *testing.T, conn net.Conn, br *bufio.Reader) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a selection: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func TestWatchPushesEveryChange(t *testing.T) {
	b := NewBoard(0)
	conn, br, done := serveWatch(t, b, admission.TaskInfo{ExecutorID: "2", Host: "h", PID: 9})
	if got := readSelect(t, conn, br); got != "SPARKDAP/2 SELECT null" {
		t.Fatalf("first line %q", got)
	}
	sel := Selection{Partitions: []int64{37}, SampleRate: 1}
	if n, err := b.Set(&sel); n != 1 || err != nil {
		t.Fatalf("Set: %d, %v", n, err)
	}
	if got := readSelect(t, conn, br); got != `SPARKDAP/2 SELECT {"partitions":[37],"stages":null,"executors":null,"sampleRate":1}` {
		t.Fatalf("pushed %q", got)
	}
	if n, _ := b.Set(nil); n != 1 {
		t.Fatal("Set(nil) reached no worker")
	}
	if got := readSelect(t, conn, br); got != "SPARKDAP/2 SELECT null" {
		t.Fatalf("back to as submitted: %q", got)
	}
	if _, err := b.Set(&Selection{}); !errors.Is(err, ErrBadSelection) {
		t.Errorf("a zero sample rate was taken: %v", err)
	}
	io.WriteString(conn, `SPARKDAP/2 TASK {"stageId":1,"partitionId":2,"attemptNumber":0,"taskAttemptId":5,"selected":true}`+"\n")
	io.WriteString(conn, "SPARKDAP/2 IDLE\n")
	conn.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if ws := b.Workers(); len(ws) != 0 {
		t.Errorf("a worker gone is still listed: %+v", ws)
	}
}

func TestWatchReports(t *testing.T) {
	b := NewBoard(0)
	conn, br, _ := serveWatch(t, b, admission.TaskInfo{ExecutorID: "2", Host: "h", PID: 9})
	readSelect(t, conn, br)
	io.WriteString(conn, `SPARKDAP/2 TASK {"stageId":1,"partitionId":2,"attemptNumber":0,"taskAttemptId":5,"selected":true}`+"\n")
	waitWorkers(t, b, func(w Worker) bool {
		return w.Running && w.Selected && w.Task != nil && *w.Task == Task{1, 2, 0, 5} && w.Tasks == 1
	})
	io.WriteString(conn, "SPARKDAP/2 IDLE\n")
	waitWorkers(t, b, func(w Worker) bool { return !w.Running && w.Task != nil && w.Task.Partition == 2 })
}

func waitWorkers(t *testing.T, b *Board, ok func(Worker) bool) {
	t.Helper()
	var ws []Worker
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ws = b.Workers(); len(ws) == 1 && ok(ws[0]) {
			return
		}
	}
	t.Fatalf("workers %+v", ws)
}

func TestWatchBadReports(t *testing.T) {
	for name, line := range map[string]string{
		"no prefix":     "TASK {}\n",
		"unknown kind":  "SPARKDAP/2 STOP\n",
		"missing field": `SPARKDAP/2 TASK {"stageId":1}` + "\n",
		"extra field":   `SPARKDAP/2 TASK {"stageId":1,"partitionId":2,"attemptNumber":0,"taskAttemptId":5,"x":1}` + "\n",
		"not JSON":      "SPARKDAP/2 TASK {\n",
		"too long":      "SPARKDAP/2 TASK " + strings.Repeat("x", maxReportBytes) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			b := NewBoard(0)
			conn, br, done := serveWatch(t, b, admission.TaskInfo{PID: 9})
			readSelect(t, conn, br)
			go io.WriteString(conn, line)
			select {
			case err := <-done:
				if !errors.Is(err, ErrBadReport) {
					t.Errorf("Serve: %v, want ErrBadReport", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a bad report did not end the watch")
			}
		})
	}
}

func TestBoardBound(t *testing.T) {
	b := NewBoard(2)
	for i := range 2 {
		if _, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{PID: int64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{PID: 3}}); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("third watcher: %v", err)
	}
}

// A selection set between Admit and Serve (the reply going out) is the
// first line the worker gets, and Serve does not block on it.
func TestSetBeforeServe(t *testing.T) {
	b := NewBoard(0)
	wa, err := b.Admit(admission.Hello{TaskInfo: admission.TaskInfo{PID: 3}, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	none := None()
	if n, _ := b.Set(&none); n != 1 {
		t.Fatalf("Set reached %d workers", n)
	}
	proxy, worker := net.Pipe()
	defer worker.Close()
	done := make(chan error, 1)
	go func() {
		done <- wa.Serve(bufio.NewReader(proxy), func(b []byte) { _, _ = proxy.Write(b) })
		proxy.Close()
	}()
	if got := readSelect(t, worker, bufio.NewReader(worker)); got != `SPARKDAP/2 SELECT {"partitions":[],"stages":null,"executors":null,"sampleRate":1}` {
		t.Errorf("first line %q", got)
	}
	worker.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
