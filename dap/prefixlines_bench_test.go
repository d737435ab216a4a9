package dap

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// prefixLinesBefore is prefixLines as it was before it sized its result
// up front: the reference the benchmark and the equivalence test compare
// against.
func (x *executorState) prefixLinesBefore(s string) string {
	var sb strings.Builder
	prefix := "[" + x.label() + "] "
	for len(s) > 0 {
		if !x.midLine {
			sb.WriteString(prefix)
		}
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			sb.WriteString(s)
			x.midLine = true
			break
		}
		sb.WriteString(s[:i+1])
		s = s[i+1:]
		x.midLine = false
	}
	return sb.String()
}

func prefixLinesExecutor() *executorState {
	stage, part := int64(1), int64(0)
	return &executorState{
		es:   &ExecutorSession{remote: "10.1.2.3:45678"},
		proc: ProcessInfo{PID: 31337},
		task: TaskInfo{ExecutorID: "driver", StageID: &stage, PartitionID: &part, Label: "task 0.0 in stage 1.0 (TID 4)"},
	}
}

func TestPrefixLinesSameAsBefore(t *testing.T) {
	pieces := []string{"", "\n", "\n\n", "a", "ab\n", "line 1\nline 2\n", "partial", "x\ny", "\ntail"}
	rng := rand.New(rand.NewSource(1))
	now, before := prefixLinesExecutor(), prefixLinesExecutor()
	for i := 0; i < 5000; i++ {
		s := pieces[rng.Intn(len(pieces))]
		if rng.Intn(4) == 0 {
			s += pieces[rng.Intn(len(pieces))]
		}
		if rng.Intn(50) == 0 {
			// The worker starts another task: the label changes.
			now.task.Label, before.task.Label = "task "+s, "task "+s
		}
		got, want := now.prefixLines(s), before.prefixLinesBefore(s)
		if got != want || now.midLine != before.midLine {
			t.Fatalf("step %d, %q: got %q (midLine %v), want %q (midLine %v)", i, s, got, now.midLine, want, before.midLine)
		}
	}
}

// BenchmarkPrefixLines: merged mode's labels on output events as pydevd
// sends a print loop's: one 80-byte line an event, a batch of lines, and
// a line cut in two.
//
//	go test ./dap -run '^$' -bench PrefixLines -benchmem
func BenchmarkPrefixLines(b *testing.B) {
	line := strings.Repeat("x", 72) + " 000001\n"
	cases := []struct {
		name   string
		events []string
	}{
		{"line", []string{line}},
		{"batch64", []string{strings.Repeat(line, 64)}},
		{"split", []string{line[:30], line[30:]}},
	}
	impls := []struct {
		name string
		f    func(*executorState, string) string
	}{
		{"before", (*executorState).prefixLinesBefore},
		{"now", (*executorState).prefixLines},
	}
	for _, c := range cases {
		for _, impl := range impls {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				x := prefixLinesExecutor()
				n := 0
				for _, e := range c.events {
					n += len(e)
				}
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					for _, e := range c.events {
						_ = impl.f(x, e)
					}
				}
			})
		}
	}
}

// pydevdOutputFrame is an output event as pydevd writes it for a batch
// of a print loop's lines: json.dumps, ASCII only, ", " and ": ".
func pydevdOutputFrame(lines int) []byte {
	var text strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&text, "sparkdap-line %08d %s\n", i, strings.Repeat("x", 57))
	}
	out, _ := json.Marshal(text.String())
	return []byte(`{"type": "event", "event": "output", "body": {"output": ` + string(out) +
		`, "category": "stdout", "source": {}}, "seq": 2, "pydevd_cmd_id": 116}`)
}

// BenchmarkOutputEventRelay is what the proxy does with one output event
// of 64 KiB from pydevd on its way to a merged-mode IDE: decode, keep the
// allowed fields, label each line, encode, frame. "decoded" takes the
// text out of its JSON and puts it back; "quoted" labels it as it came
// (decodeExecutorMessage).
//
//	go test ./dap -run '^$' -bench OutputEventRelay -benchmem
func BenchmarkOutputEventRelay(b *testing.B) {
	frame := pydevdOutputFrame(820)
	for _, impl := range []struct {
		name   string
		decode func([]byte) (Message, error)
	}{
		{"decoded", dapwire.DecodeMessage},
		{"quoted", decodeExecutorMessage},
	} {
		b.Run(impl.name, func(b *testing.B) {
			x := prefixLinesExecutor()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := impl.decode(frame)
				if err != nil {
					b.Fatal(err)
				}
				out := deepCopy(allowedEvent(m)).(Message)
				x.labelOutput(out.Body())
				// As relayEvent and wire.sendWithBody send it.
				encBody, quoted := quotedOutputBody(out)
				if quoted {
					delete(out, "body")
				}
				enc, err := out.Encode()
				if err != nil {
					b.Fatal(err)
				}
				_ = frameWithSeq(enc, 7, encBody)
			}
		})
	}
}
