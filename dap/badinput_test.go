package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// What a bad message does to the connection that sent it.
const (
	closed  = "closed"  // the proxy hangs up, with a logged reason
	refused = "refused" // the proxy answers with an error response and carries on
	ignored = "ignored" // the proxy drops it and carries on
)

// badInput is one malformed or unexpected thing a peer may send.
type badInput struct {
	name    string
	raw     string
	outcome string
	log     string // in the proxy's log when the outcome is closed
}

func frame(body string) string { return string(dapwire.AppendFrame(nil, []byte(body))) }

// framingAttacks break the framing or the envelope: from either side they
// must close the connection.
var framingAttacks = []badInput{
	{"invalid JSON", frame("{nope"), closed, "malformed message"},
	{"100 MB body announced", fmt.Sprintf("Content-Length: %d\r\n\r\n{", 100<<20), closed, "exceeds the size limit"},
	{"Content-Length longer than the body", "Content-Length: 60\r\n\r\n" + `{"seq":1,"type":"event","event":"output","body":{}}` + frame("{}"), closed, "malformed message"},
	{"Content-Length shorter than the body", "Content-Length: 10\r\n\r\n" + `{"seq":1,"type":"event","event":"output"}`, closed, "malformed message"},
	{"no Content-Length", "Content-Type: application/json\r\n\r\n{}", closed, "missing Content-Length"},
	{"negative Content-Length", "Content-Length: -5\r\n\r\n", closed, "bad Content-Length"},
	{"Content-Length not a number", "Content-Length: 0x10\r\n\r\n", closed, "bad Content-Length"},
	{"endless header line", strings.Repeat("A", 8000), closed, "header line too long"},
	{"header without colon", "Content-Length 2\r\n\r\n{}", closed, "malformed header"},
	{"not an object", frame("[]"), closed, "invalid JSON"},
	{"JSON null", frame("null"), closed, "not a JSON object"},
	{"trailing data", frame(`{"seq":1,"type":"event","event":"x"} {}`), closed, "trailing data"},
	{"unknown message type", frame(`{"seq":1,"type":"shout"}`), closed, "unknown message type"},
	{"request without command", frame(`{"seq":1,"type":"request"}`), closed, "request without"},
	{"response without request_seq", frame(`{"seq":1,"type":"response","command":"x","success":true}`), closed, "request_seq"},
}

// waitLog waits (bounded) until the proxy's log contains want.
func waitLog(t *testing.T, logs *syncbuf.Buffer, want string) {
	t.Helper()
	for range 500 {
		if strings.Contains(logs.String(), want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("proxy log lacks %q:\n%s", want, logs)
}

// waitEOF waits until the proxy closes c, discarding what it sends.
func waitEOF(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// A reset counts: the proxy closed with our bytes still unread.
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the proxy did not close the offending connection: %v", err)
	}
}

// readResponse reads frames from the proxy until a response comes.
func readResponse(t *testing.T, fr *dapwire.FrameReader) Message {
	t.Helper()
	for range 100 {
		b, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the proxy's answer: %v", err)
		}
		m, err := dapwire.DecodeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Type() == "response" {
			return m
		}
	}
	t.Fatal("no response in 100 messages")
	return nil
}

func badInputProxy(t *testing.T) (*testProxy, *syncbuf.Buffer) {
	logs := &syncbuf.Buffer{}
	p := startProxy(t, func(c *Config) {
		c.MaxMessageBytes = 1 << 20
		c.Log = zerolog.New(logs).Level(zerolog.DebugLevel)
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs)
		}
	})
	return p, logs
}

// healthy checks what a user would: the well-behaved IDE still lists the
// well-behaved executor, sees it stop and can read its stack.
func healthy(t *testing.T, p *testProxy, c *dapclient.Client, f *fakePydevd) {
	t.Helper()
	p.waitExecutors(1)
	threads, err := c.Threads(p.ctx)
	if err != nil || len(threads) != 1 || !strings.Contains(threads[0].Name, fmt.Sprintf("pid %d", f.pid)) {
		t.Fatalf("threads after the bad input = %+v, %v; want the good executor's", threads, err)
	}
	tid := threads[0].Id
	f.stop()
	if _, err := c.WaitEvent(p.ctx, "stopped", func(b json.RawMessage) bool {
		var body struct{ ThreadID int }
		return json.Unmarshal(b, &body) == nil && body.ThreadID == tid
	}); err != nil {
		t.Fatal(err)
	}
	if frames, err := c.StackTrace(p.ctx, tid); err != nil || len(frames) != 1 {
		t.Fatalf("stackTrace after the bad input = %+v, %v", frames, err)
	}
	if err := c.Continue(p.ctx, tid); err != nil {
		t.Fatal(err)
	}
}

// TestBadIDEInputClosesOnlyItself sends each bad input on a second IDE
// connection while a well-behaved IDE debugs a well-behaved executor.
func TestBadIDEInputClosesOnlyItself(t *testing.T) {
	p, logs := badInputProxy(t)
	good := p.ide(false, nil)
	f := p.executor(1, nil)
	tests := append(append([]badInput{}, framingAttacks...),
		badInput{"unknown command", frame(`{"seq":1,"type":"request","command":"frobnicate","arguments":{"x":1}}`), refused, ""},
		badInput{"request before attach", frame(`{"seq":1,"type":"request","command":"stackTrace","arguments":{"threadId":1}}`), refused, ""},
		badInput{"second root attach", frame(`{"seq":1,"type":"request","command":"attach","arguments":{}}`), refused, ""},
		badInput{"child attach for no executor", frame(`{"seq":1,"type":"request","command":"attach","arguments":{"sparkdapExecutor":987654}}`), refused, ""},
		badInput{"launch", frame(`{"seq":1,"type":"request","command":"launch","arguments":{}}`), refused, ""},
		badInput{"response to a request never made", frame(`{"seq":1,"type":"response","request_seq":999,"command":"runInTerminal","success":true}`), ignored, ""},
		badInput{"failed response to a request never made", frame(`{"seq":1,"type":"response","request_seq":5,"command":"startDebugging","success":false}`), ignored, ""},
		badInput{"event from the IDE", frame(`{"seq":1,"type":"event","event":"stopped","body":{"threadId":1}}`), ignored, ""},
		badInput{"initialize with ill-typed arguments", frame(`{"seq":1,"type":"request","command":"initialize","arguments":{"linesStartAt1":"yes"}}`), refused, ""},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", p.srv.IDEAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tt.raw); err != nil {
				t.Fatal(err)
			}
			if tt.outcome == closed {
				waitEOF(t, c)
				waitLog(t, logs, tt.log)
				return
			}
			// The connection lives on: a follow-up request is answered.
			if _, err := io.WriteString(c, frame(`{"seq":2,"type":"request","command":"initialize","arguments":{}}`)); err != nil {
				t.Fatal(err)
			}
			fr := dapwire.NewFrameReader(c, 0)
			resp := readResponse(t, fr)
			if tt.outcome == refused {
				if resp.RequestSeq() != 1 || resp.Success() || resp.ErrorMessage() == "" {
					t.Fatalf("want an error response to seq 1, got %v", resp)
				}
				resp = readResponse(t, fr)
			}
			if resp.RequestSeq() != 2 || !resp.Success() {
				t.Fatalf("follow-up initialize: %v", resp)
			}
		})
	}
	healthy(t, p, good, f)
}

// TestBadExecutorInputClosesOnlyItself sends each bad input from a second,
// handshaken executor while the IDE debugs a well-behaved one.
func TestBadExecutorInputClosesOnlyItself(t *testing.T) {
	p, logs := badInputProxy(t)
	good := p.ide(false, nil)
	f := p.executor(1, nil)
	tests := append(append([]badInput{}, framingAttacks...),
		badInput{"response to a request never made", frame(`{"seq":1,"type":"response","request_seq":99999,"command":"threads","success":true,"body":{}}`), ignored, ""},
		badInput{"request from the debuggee", frame(`{"seq":1,"type":"request","command":"runInTerminal","arguments":{}}`), refused, ""},
		badInput{"unknown event", frame(`{"seq":1,"type":"event","event":"frobnicated","body":{"a":[1,2]}}`), ignored, ""},
		badInput{"stopped with a string thread id", frame(`{"seq":1,"type":"event","event":"stopped","body":{"threadId":"one"}}`), ignored, ""},
		badInput{"stopped without a body", frame(`{"seq":1,"type":"event","event":"stopped"}`), ignored, ""},
		badInput{"thread event with a list body", frame(`{"seq":1,"type":"event","event":"thread","body":[1]}`), ignored, ""},
		badInput{"breakpoint event with a list", frame(`{"seq":1,"type":"event","event":"breakpoint","body":{"breakpoint":[1]}}`), ignored, ""},
		badInput{"sparkdapTask with ill-typed fields", frame(`{"seq":1,"type":"event","event":"sparkdapTask","body":{"pid":"x","roots":7}}`), ignored, ""},
		badInput{"continued with a huge thread id", frame(`{"seq":1,"type":"event","event":"continued","body":{"threadId":1e300}}`), ignored, ""},
		badInput{"output with a non-string", frame(`{"seq":1,"type":"event","event":"output","body":{"output":{"x":1}}}`), ignored, ""},
	)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := p.executor(100+i, nil)
			err := bad.WriteRaw([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			switch tt.outcome {
			case closed:
				bad.waitClosed()
				waitLog(t, logs, tt.log)
			case refused:
				bad.waitRequest("runInTerminal", func(m Message) bool { return m.Type() == "response" && !m.Success() })
				fallthrough
			default:
				// Still connected and still served.
				ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
				defer cancel()
				if _, err := good.Threads(ctx); err != nil {
					t.Fatal(err)
				}
				if !p.hasExecutorPID(int64(100 + i)) {
					t.Fatalf("the executor was dropped for a message it may send")
				}
				bad.Close()
				bad.waitClosed()
			}
		})
	}
	healthy(t, p, good, f)
}

func (p *testProxy) hasExecutorPID(pid int64) bool {
	for _, e := range p.hub.Executors() {
		if e.Process.PID == pid {
			return true
		}
	}
	return false
}
