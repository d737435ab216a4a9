package logsink

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A pipe nobody reads: every Write still returns, the lines that did not
// fit are counted, and once the pipe is read again what was kept arrives in
// order, followed by one notice with the count.
func TestWriteNeverBlocksOnAnUnreadPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	s := New(w, "stderr", 8<<10)
	const lines = 5000 // 500 KB: far beyond the pipe's buffer and the cap
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range lines {
			fmt.Fprintf(s, "line %06d %s\n", i, strings.Repeat("x", 88))
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a timing assertion
		t.Fatal("Write blocked on a pipe nobody reads")
	}
	dropped := s.Dropped()
	if dropped == 0 || dropped >= lines {
		t.Fatalf("dropped %d of %d lines; want some but not all", dropped, lines)
	}

	// Now read: the kept lines in order, and a notice wherever the queue
	// drained after drops, the counts adding up to Dropped. The last
	// notice need not come last: lines the writer queued while it was
	// being written follow it. The deadline bounds a read that would
	// wait for a line the sink lost.
	if err := r.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(r)
	notice := regexp.MustCompile(`^\[sparkdap: (\d+) log line\(s\) dropped: stderr was not being read\]$`)
	kept, last := 0, -1
	var noticed int64
	for (noticed < dropped || int64(kept)+dropped < lines) && sc.Scan() {
		if m := notice.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			noticed += n
			continue
		}
		var i int
		if _, err := fmt.Sscanf(sc.Text(), "line %d", &i); err != nil || i <= last {
			t.Fatalf("line %q out of order after %d (err %v)", sc.Text(), last, err)
		}
		last = i
		kept++
	}
	if noticed != dropped {
		t.Fatalf("notices count %d dropped, Dropped says %d", noticed, dropped)
	}
	if int64(kept)+dropped != lines {
		t.Fatalf("kept %d + dropped %d != %d written", kept, dropped, lines)
	}
	if !s.Close(time.Minute) {
		t.Fatal("Close: the queue did not drain with the pipe being read")
	}
}

// Close gives up on a reader that never reads, instead of waiting for it.
func TestCloseDoesNotWaitForeverForAStalledReader(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	s := New(w, "stderr", 1<<20)
	for range 2000 {
		fmt.Fprintf(s, "%s\n", strings.Repeat("y", 99))
	}
	if s.Close(10 * time.Millisecond) {
		t.Fatal("Close reported everything written to a pipe nobody reads")
	}
	// Lines after Close are dropped, never queued.
	before := s.Dropped()
	fmt.Fprintln(s, "late")
	if s.Dropped() != before+1 {
		t.Fatalf("a line after Close: dropped %d, want %d", s.Dropped(), before+1)
	}
}

// Everything arrives when the reader keeps up, with no notice.
func TestNothingDroppedWhenRead(t *testing.T) {
	var b strings.Builder
	s := New(&lockedBuilder{b: &b}, "stderr", 0)
	for i := range 100 {
		fmt.Fprintf(s, "line %d\n", i)
	}
	if !s.Close(time.Minute) {
		t.Fatal("Close did not drain")
	}
	if s.Dropped() != 0 || strings.Count(b.String(), "\n") != 100 || strings.Contains(b.String(), "dropped") {
		t.Fatalf("dropped %d; got %q", s.Dropped(), b.String())
	}
}

type lockedBuilder struct{ b *strings.Builder }

func (l *lockedBuilder) Write(p []byte) (int, error) { return l.b.Write(p) }
