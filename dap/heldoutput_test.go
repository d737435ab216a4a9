package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// awaitOutputBytes waits until the Hub has taken n bytes of output from
// the executor with pid.
func awaitOutputBytes(h *Hub, pid, n int64) error {
	var got int64
	for range 500 {
		for _, st := range h.Executors() {
			if st.Process.PID == pid {
				got = st.OutputBytes
			}
		}
		if got == n {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("executor pid %d: %d bytes of output taken, want %d", pid, got, n)
}

// TestOutputBeforeTheChildSession: in child-session mode a worker runs its
// task from the end of the proxy's handshake, before the IDE has opened
// its child session. What it prints meanwhile reaches that session once
// it is configured, in order, before the stop it made after printing; past
// the cap, a line says how much was dropped. If the IDE never opens the
// session, nothing stays held.
func TestOutputBeforeTheChildSession(t *testing.T) {
	kib := strings.Repeat("x", 1023) + "\n"
	tests := []struct {
		name  string
		early []string // printed before the child session attaches
		stop  bool     // then stops at a breakpoint
		open  bool     // the IDE opens the child session
		want  []string // output texts the child gets, in order, before "late"
	}{
		{name: "a few lines and a stop", early: []string{"reading partition 1\n", "row 7 looks odd\n"}, stop: true, open: true,
			want: []string{"reading partition 1\n", "row 7 looks odd\n"}},
		{name: "more than the cap", early: repeat(kib, 70), open: true,
			want: append(repeat(kib, 64), "[sparkdap: 6144 bytes of output dropped: the executor printed more than 64 KiB before its debug session was ready]\n")},
		{name: "the IDE refuses the child session", early: []string{"nobody reads this\n"}, open: false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid := int64(760 + i)
			p := startProxy(t, nil)
			ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
			defer cancel()
			root, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { root.Close() })
			fakes := make(chan *fakePydevd, 1)
			type opened struct {
				c   *dapclient.Client
				err error
			}
			children := make(chan opened, 1)
			root.OnReverseRequest(func(command string, args json.RawMessage) (bool, any) {
				if command != "startDebugging" {
					return false, nil
				}
				f := <-fakes
				var total int64
				for _, s := range tt.early {
					f.event("output", map[string]any{"category": "stdout", "output": s})
					total += int64(len(s))
				}
				err := awaitOutputBytes(p.hub, pid, total)
				if err == nil && tt.stop {
					f.stop()
					err = awaitExecutorStopped(p.hub, pid)
				}
				if err != nil || !tt.open {
					children <- opened{err: err}
					return false, nil
				}
				var req dapclient.StartDebugging
				if err := json.Unmarshal(args, &req); err != nil {
					children <- opened{err: err}
					return false, nil
				}
				child, err := dapclient.StartChild(ctx, &req, nil)
				children <- opened{child, err}
				return err == nil, nil
			})
			if _, err := root.Initialize(ctx, true); err != nil {
				t.Fatal(err)
			}
			if err := root.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach"}, nil); err != nil {
				t.Fatal(err)
			}
			f := p.executor(int(pid), nil)
			fakes <- f
			var ch opened
			select {
			case ch = <-children:
			case <-ctx.Done():
				t.Fatal("the proxy never asked for a child session")
			}
			if ch.err != nil {
				t.Fatal(ch.err)
			}
			if !tt.open {
				for n := 0; ; n++ {
					tx := p.hub.lock()
					var held *heldOutput
					detached := false
					for _, es := range tx.executors {
						held, detached = tx.exec(es).held, tx.exec(es).detached
					}
					tx.unlock()
					if detached && held == nil {
						return
					}
					if n == 500 {
						t.Fatalf("the child session was refused, yet the executor holds output %+v (detached %v)", held, detached)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			child := ch.c
			t.Cleanup(func() { child.Close() })
			// What the worker prints once the session has what was held
			// goes straight to it.
			last, _ := json.Marshal(tt.want[len(tt.want)-1])
			if _, err := child.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
				return strings.Contains(string(b), string(last))
			}); err != nil {
				t.Fatal(err)
			}
			f.event("output", map[string]any{"category": "stdout", "output": "late\n"})
			if _, err := child.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
				return strings.Contains(string(b), `"late\n"`)
			}); err != nil {
				t.Fatal(err)
			}
			var got []string
			stoppedAfter := -1
			for _, ev := range child.Events() {
				switch ev.Event {
				case "output":
					var b struct{ Output string }
					if err := json.Unmarshal(ev.Body, &b); err != nil {
						t.Fatal(err)
					}
					got = append(got, b.Output)
				case "stopped":
					stoppedAfter = len(got)
				}
			}
			want := append(append([]string{}, tt.want...), "late\n")
			if strings.Join(got, "") != strings.Join(want, "") || len(got) != len(want) {
				t.Errorf("the child session got %d output events %.300q…; want %d: %.300q…", len(got), got, len(want), want)
			}
			if tt.stop && stoppedAfter != len(tt.want) {
				t.Errorf("the stop reached the child after %d output events; want after the %d printed before it", stoppedAfter, len(tt.want))
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
