package liveview

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/selection"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestRender(t *testing.T) {
	exec := func(id uint64, label string, stoppedAt string, out int64) dap.ExecutorStatus {
		return dap.ExecutorStatus{ID: id, Label: label, Stopped: stoppedAt != "", StoppedAt: stoppedAt, OutputBytes: out}
	}
	many := []dap.ExecutorStatus{}
	for i := range 15 {
		many = append(many, exec(uint64(i+1), "exec 1 · node-1 · pid 100 · stage 2 · partition "+string(rune('a'+i)), "", 0))
	}
	tests := []struct {
		name  string
		snap  Snapshot
		width int
	}{
		{"waiting", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678"}, 100},
		{"two executors, one stopped", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678", Stats: dap.Stats{
			IDEAttached: true, Refused: 3, Executors: []dap.ExecutorStatus{
				exec(2, "exec 1 · node-7 · pid 4242 · stage 3 · partition 7 · attempt 0", "", 1536),
				exec(5, "exec 2 · node-8 · pid 4300 · stage 3 · partition 9 · attempt 0", "loanlib.py:12", 3<<20),
			}}}, 100},
		{"resumed after max stop", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678", Stats: dap.Stats{
			IDEAttached: true, Executors: []dap.ExecutorStatus{
				{ID: 3, Label: "exec 1 · node-7 · pid 4242 · stage 3 · partition 7 · attempt 0", OutputBytes: 10, MaxStopResumed: true},
			}}}, 100},
		{"narrow terminal clips", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678", Stats: dap.Stats{
			Executors: []dap.ExecutorStatus{exec(1, "exec 1 · a-very-long-host-name.example.com · pid 1", "", 0)}}}, 50},
		{"workers without a debugger", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678", Stats: dap.Stats{
			IDEAttached: true, Undebugged: 4,
			LastUndebugged: "debugpy is not installed in /usr/bin/python3 (No module named 'debugpy'): pip install 'debugpy>=1.6.7,<1.9'"}}, 100},
		{"exceptions grouped", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678", Stats: dap.Stats{
			IDEAttached: true, Executors: []dap.ExecutorStatus{
				exec(5, "exec 2 · node-8 · pid 4300 · stage 3 · partition 9 · attempt 0", "udf.py:12", 0)},
			Exceptions: []selection.ExceptionGroup{{Type: "KeyError", Place: "udf.py:12", Tasks: 37, Held: 2},
				{Type: "ValueError", Place: "udf.py:30", Tasks: 2}, {Type: "a", Place: "b:1", Tasks: 1},
				{Type: "c", Place: "d:1", Tasks: 1}}}}, 100},
		{"many executors are capped", Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678",
			Stats: dap.Stats{IDEAttached: true, Executors: many}}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render(tt.snap, tt.width)
			for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				if n := len([]rune(l)); n > tt.width {
					t.Errorf("line of %d runes, width %d: %q", n, tt.width, l)
				}
			}
			golden := filepath.Join("testdata", strings.ReplaceAll(tt.name, " ", "_")+".golden")
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestTerminalKeepsTheViewBelowTheLogs(t *testing.T) {
	var out strings.Builder
	term := NewTerminal(&out)
	term.Draw("view 1\nview 2\n")
	term.Write([]byte("log A\nlog "))
	term.Write([]byte("B\n"))
	term.Draw("view 3\n")
	got := out.String()
	want := "view 1\nview 2\n" +
		"\x1b[2A\r\x1b[J" + "log A\n" + "view 1\nview 2\n" +
		"\x1b[2A\r\x1b[J" + "log B\n" + "view 1\nview 2\n" +
		"\x1b[2A\r\x1b[J" + "view 3\n"
	if got != want {
		t.Fatalf("terminal output\n got %q\nwant %q", got, want)
	}
}

// TestRenderCleansClusterText: labels and stop locations with terminal
// escapes and forged lines draw as one inert line each.
func TestRenderCleansClusterText(t *testing.T) {
	const evil = "\x1b]0;owned\x07\x1b[2K\r\nsparkdap: fake\u009b2J\u202e"
	snap := Snapshot{IDEAddr: "127.0.0.1:4711", ExecutorAddr: "127.0.0.1:5678", Stats: dap.Stats{Executors: []dap.ExecutorStatus{
		{ID: 1, Label: "exec " + evil, Stopped: true, StoppedAt: evil + ".py:3"},
		{ID: 2, Label: evil},
	}}}
	got := Render(snap, 200)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 {
		t.Errorf("%d lines, want a header and two executors:\n%s", len(lines), got)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "sparkdap: fake") {
			t.Errorf("forged line %q", l)
		}
		for _, r := range l {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				t.Errorf("control %U in %q", r, l)
				break
			}
		}
	}
}
