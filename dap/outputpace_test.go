package dap

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// slowReader reads r no faster than rate bytes a second, and nothing
// before start.
type slowReader struct {
	r     io.Reader
	rate  float64
	start time.Time
	read  int
}

func (s *slowReader) Read(p []byte) (int, error) {
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

// rawIDE attaches a merged-mode root session on a plain connection, so
// the test decides when and how fast it reads.
func rawIDE(t *testing.T, p *testProxy) (net.Conn, *dapwire.FrameReader) {
	t.Helper()
	conn, err := net.Dial("tcp", p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// A small receive buffer: what the IDE has not read stays in the
	// proxy, where the test can see it.
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	send := func(seq int, command string, args string) {
		body := fmt.Sprintf(`{"seq":%d,"type":"request","command":%q,"arguments":%s}`, seq, command, args)
		if _, err := conn.Write(dapwire.AppendFrame(nil, []byte(body))); err != nil {
			t.Fatal(err)
		}
	}
	fr := dapwire.NewFrameReader(conn, DefaultMaxMessageBytes)
	next := func() Message {
		t.Helper()
		body, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("IDE: %v", err)
		}
		m, err := dapwire.DecodeMessage(body)
		if err != nil {
			t.Fatal(err)
		}
		return Message(m)
	}
	send(1, "initialize", `{"clientID":"vscode","adapterID":"debugpy","linesStartAt1":true,"columnsStartAt1":true,"pathFormat":"path"}`)
	send(2, "attach", `{"type":"debugpy","request":"attach"}`)
	for m := next(); m.Event() != "initialized"; m = next() {
	}
	send(3, "configurationDone", `{}`)
	for m := next(); m.Type() != "response" || m.RequestSeq() != 3; m = next() {
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, fr
}

// TestOutputFloodPacedToSlowIDE: an executor that prints far more than
// the IDE reads for a while (it reads nothing until the executor has sent
// everything or is held up, then at a limited rate) is read only as fast
// as the IDE keeps up: the IDE is not cut off, gets every line in order,
// and the proxy never holds much more than the pacing's high-water mark
// for it (unpaced, it held the whole flood, and cut the IDE off at the
// wire's byte cap).
func TestOutputFloodPacedToSlowIDE(t *testing.T) {
	testenv.SkipIfShort(t, "relays 150 MB of output")
	total, rate := 150<<20, 40e6
	if raceEnabled {
		total = 40 << 20 // still far over the high-water mark
	}
	const eventText = 64 << 10
	events := total / eventText
	p := startProxy(t, func(c *Config) { c.Log = c.Log.Level(1) }) // info: a debug line per event is a lot
	conn, fr := rawIDE(t, p)
	f := p.executor(101, nil)

	tx := p.hub.lock()
	root := tx.root
	tx.unlock()
	if root == nil {
		t.Fatal("no root session")
	}
	var maxQueued atomic.Int64
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		for {
			if n := int64(root.w.q.Queued()); n > maxQueued.Load() {
				maxQueued.Store(n)
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	sent := make(chan error, 1)
	var sentEvents atomic.Int64
	go func() {
		pad := strings.Repeat("x", eventText-len("@@00000000@@\n"))
		for i := range events {
			if err := f.SendOutput(fakepydevd.OutputEvent("stdout", fmt.Sprintf("@@%08d@@%s\n", i, pad))); err != nil {
				sent <- fmt.Errorf("event %d: %w", i, err)
				return
			}
			sentEvents.Add(1)
		}
		sent <- nil
	}()

	// The IDE reads nothing until the executor sent everything, or has
	// been held up for a second (paced).
	last, lastAt := int64(-1), time.Now()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		n := sentEvents.Load()
		if n == int64(events) {
			break
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > time.Second {
			break
		}
	}
	t.Logf("the IDE starts reading: the executor sent %d of %d events", sentEvents.Load(), events)
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Minute)) // a bound for a busy machine, not a speed
	fr = dapwire.NewFrameReader(&slowReader{r: fr.Reader(), rate: rate, start: time.Now()}, DefaultMaxMessageBytes)
	marker := []byte("@@")
	for want := 0; want < events; {
		body, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("IDE got %d of %d output events, then: %v (proxy: %v; most queued for it %d bytes)",
				want, events, err, root.w.closedErr(), maxQueued.Load())
		}
		i := bytes.Index(body, marker)
		if i < 0 || !bytes.Contains(body, []byte(`"event":"output"`)) {
			continue
		}
		got, err := strconv.Atoi(string(body[i+2 : i+10]))
		if err != nil || got != want {
			t.Fatalf("output event %q, want number %d", body[i:i+12], want)
		}
		want++
	}
	if err := <-sent; err != nil {
		t.Fatalf("executor: %v", err)
	}
	if err := root.w.closedErr(); err != nil {
		t.Fatalf("the IDE was cut off: %v", err)
	}
	if n := maxQueued.Load(); n > 16<<20 {
		t.Fatalf("the proxy held up to %d bytes for the IDE, want at most 16 MiB", n)
	}
	t.Logf("%d output events of %d KiB; most queued for the IDE: %.1f MiB", events, eventText>>10, float64(maxQueued.Load())/(1<<20))
}
