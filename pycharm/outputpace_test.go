package pycharm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// paceReader reads r no faster than rate bytes a second, and nothing
// before start.
type paceReader struct {
	r     io.Reader
	rate  float64
	start time.Time
	read  int
}

func (s *paceReader) Read(p []byte) (int, error) {
	if d := time.Until(s.start); d > 0 {
		time.Sleep(d)
	}
	p = p[:min(len(p), 32<<10)]
	n, err := s.r.Read(p)
	s.read += n
	due := s.start.Add(time.Duration(float64(s.read) / s.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	return n, err
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestOutputFloodPacedToSlowPyCharm: a worker that prints far more than
// PyCharm reads for a while (PyCharm reads nothing until the worker has
// sent everything or is held up, then at a limited rate) is read only as
// fast as PyCharm keeps up: PyCharm is not cut off, gets every
// CMD_WRITE_TO_CONSOLE in order, and the proxy never holds much more than
// the pacing's high-water mark for it (unpaced, it held the whole flood
// and cut PyCharm off at the queue's byte cap).
func TestOutputFloodPacedToSlowPyCharm(t *testing.T) {
	testenv.SkipIfShort(t, "relays 100 MB of console output")
	const (
		textLen  = 1000            // pydevd-pycharm's cut
		rate     = 25e6            // bytes a second PyCharm reads, once it reads
		deadline = 3 * time.Minute // a bound for a busy machine, not a speed
	)
	total := 100 << 20
	if raceBuild() {
		total = 32 << 20 // the race detector slows the proxy several times over; still far over the high-water mark
	}
	msgs := total / textLen
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	// PyCharm: a plain listener, so the test decides when and how fast it
	// reads. A small receive buffer keeps what it has not read in the
	// proxy, where the test can see it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		accepted <- c
	}()

	px, err := Listen(Config{Token: "tok", PyCharm: ln.Addr().String(), Log: zerolog.Nop()}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = px.Serve(ctx) }()
	t.Cleanup(px.Close)
	addr := px.Addr().String()

	// The worker's hello; the proxy connects to PyCharm on it.
	hc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = hc.SetDeadline(time.Now().Add(10 * time.Second))
	const pid = 4242
	reply, _, err := admission.Introduce(hc, "tok", admission.TaskInfo{PID: pid, Host: "node-1", ExecutorID: "1",
		Label: "stage 0 · partition 0 · attempt 0"})
	hc.Close()
	nonce, ok := strings.CutPrefix(reply, "OK ")
	if err != nil || !ok {
		t.Fatalf("hello reply %q, %v", reply, err)
	}
	var ideConn net.Conn
	select {
	case ideConn = <-accepted:
	case <-time.After(10 * time.Second):
	}
	if ideConn == nil {
		t.Fatal("the proxy did not connect to PyCharm")
	}
	t.Cleanup(func() { ideConn.Close() })
	px.mu.Lock()
	ide := px.ide
	px.mu.Unlock()

	// The worker's pydevd connection: it answers the probe with its
	// connect guard, then drains whatever the proxy sends it.
	wc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	_ = wc.SetDeadline(time.Now().Add(deadline))
	wr := bufio.NewReader(wc)
	if m, err := ReadMessage(wr, MaxLineBytes); err != nil || m.ID != CmdListThreads {
		t.Fatalf("worker got %v, %v; want the proxy's probe", m, err)
	}
	threads := fmt.Sprintf(`<xml><thread name="MainThread" id="pid_%d_id_1" /><thread name="%s" id="pid_%d_id_2" /></xml>`,
		pid, PyQuote(guardThreadPrefix+nonce, "/"), pid)
	if _, err := wc.Write(Message{ID: CmdReturn, Seq: probeSeq, Payload: PyQuote(threads, `/<>_=" `)}.Marshal()); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, wr) }()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		px.mu.Lock()
		joined := px.execs[pid] != nil
		px.mu.Unlock()
		if joined {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the worker never joined")
		}
	}

	var maxQueued atomic.Int64
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		for {
			if n := int64(ide.q.Queued()); n > maxQueued.Load() {
				maxQueued.Store(n)
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	// The worker prints: numbered lines of pydevd-pycharm's largest size,
	// as fast as the proxy reads them.
	sent := make(chan error, 1)
	var sentMsgs atomic.Int64
	go func() {
		bw := bufio.NewWriterSize(wc, 64<<10)
		pad := strings.Repeat("x", textLen-len("line00000000:\n"))
		for i := range msgs {
			m := writeToConsole(2*i+2, fmt.Sprintf("line%08d:%s\n", i, pad), "1")
			if _, err := bw.Write(m.Marshal()); err != nil {
				sent <- fmt.Errorf("message %d: %w", i, err)
				return
			}
			sentMsgs.Add(1)
		}
		sent <- bw.Flush()
	}()

	// PyCharm reads nothing until the worker sent everything, or has been
	// held up for a second (paced).
	last, lastAt := int64(-1), time.Now()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		n := sentMsgs.Load()
		if n == int64(msgs) {
			break
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > time.Second {
			break
		}
	}
	t.Logf("PyCharm starts reading: the worker sent %d of %d messages; most queued for PyCharm so far %.1f MiB",
		sentMsgs.Load(), msgs, float64(maxQueued.Load())/(1<<20))
	_ = ideConn.SetReadDeadline(time.Now().Add(deadline))
	br := bufio.NewReaderSize(&paceReader{r: ideConn, rate: rate, start: time.Now()}, 64<<10)
	for want := 0; want < msgs; {
		m, err := ReadMessage(br, MaxLineBytes)
		if err != nil {
			t.Fatalf("PyCharm got %d of %d messages, then: %v (proxy: %v; most queued for it %d bytes)",
				want, msgs, err, ide.q.Err(), maxQueued.Load())
		}
		if m.ID != CmdWriteToConsole {
			continue
		}
		i := strings.Index(m.Payload, "line")
		if i < 0 || len(m.Payload) < i+12 {
			t.Fatalf("console output %.80q has no line number", m.Payload)
		}
		got, err := strconv.Atoi(m.Payload[i+4 : i+12])
		if err != nil || got != want {
			t.Fatalf("console output %q, want line %d", m.Payload[i:i+12], want)
		}
		want++
	}
	if err := <-sent; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if err := ide.q.Err(); err != nil {
		t.Fatalf("PyCharm was cut off: %v", err)
	}
	if n := maxQueued.Load(); n > 16<<20 {
		t.Fatalf("the proxy held up to %d bytes for PyCharm, want at most 16 MiB", n)
	}
	t.Logf("%d console messages of %d characters; most queued for PyCharm: %.1f MiB",
		msgs, textLen, float64(maxQueued.Load())/(1<<20))
}
