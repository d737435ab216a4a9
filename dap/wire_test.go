package dap

import (
	"bytes"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// TestFrameWithSeq: what send and sendWithBody put on the wire is one
// frame whose length is its body's, the object sent with seq first (and
// the body given last), and valid JSON.
func TestFrameWithSeq(t *testing.T) {
	tests := []struct {
		name      string
		obj, body string // body "" for none
		seq       int64
		want      string
	}{
		{"empty object", `{}`, "", 12, `{"seq":12}`},
		{"fields", `{"type":"event","event":"output","body":{"output":"héllo\r\n"}}`, "", 7,
			`{"seq":7,"type":"event","event":"output","body":{"output":"héllo\r\n"}}`},
		{"fields and an encoded body", `{"type":"response","command":"threads"}`, `{"threads":[]}`, 123456,
			`{"seq":123456,"type":"response","command":"threads","body":{"threads":[]}}`},
		{"an encoded body alone", `{}`, `{"a":1}`, 1, `{"seq":1,"body":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			frame := frameWithSeq([]byte(tt.obj), tt.seq, body)
			if want := string(dapwire.AppendFrame(nil, []byte(tt.want))); string(frame) != want {
				t.Fatalf("framed as %q, want %q", frame, want)
			}
			got, err := dapwire.NewFrameReader(bytes.NewReader(frame), 0).ReadFrame()
			if err != nil || string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("read back %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestServedConnectionsWriteInline: the connections the Server accepts
// reach their write queues unwrapped, whatever the port's budget wraps
// them in for its reads: a send writes the socket on the sender's
// goroutine (no flusher goroutine per message), and the executor's
// socket re-arms TCP_QUICKACK after each write.
func TestServedConnectionsWriteInline(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	defer c.Close()
	p.executor(1, nil)
	p.waitExecutors(1)
	tx := p.hub.lock()
	var ess []*ExecutorSession
	for _, es := range tx.executors {
		ess = append(ess, es)
	}
	root := tx.root
	tx.unlock()
	if root == nil || len(ess) != 1 {
		t.Fatalf("root %v, %d executors; want an IDE and one executor", root, len(ess))
	}
	if inline, _ := root.w.q.WritesInline(); !inline {
		t.Errorf("the IDE's sends go through a flusher goroutine, not the sender's own write")
	}
	inline, hooked := ess[0].w.q.WritesInline()
	if !inline {
		t.Errorf("the executor's sends go through a flusher goroutine, not the sender's own write")
	}
	if runtime.GOOS == "linux" && !hooked {
		t.Errorf("the executor's writes do not re-arm TCP_QUICKACK")
	}
}
