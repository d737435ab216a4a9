package admission

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestReadHello(t *testing.T) {
	for _, tt := range []struct {
		line string
		pid  int64
		bad  bool
	}{
		{`SPARKDAP/2 {"proof":"t","pid":7,"host":"h","roots":{"cwd":"/w"}}` + "\n", 7, false},
		{`SPARKDAP/2 {"proof":"t"}` + "\n", 0, true},
		{`SPARKDAP/2 {"pid":-3}` + "\n", 0, true},
		{`SPARKDAP/2 nope` + "\n", 0, true},
		{`SPARKDAP/2 {"pid":1,"x":"` + strings.Repeat("x", maxHelloBytes) + "\"}\n", 0, true},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tt.line), 4096)
		if !IsHello(br) {
			t.Fatalf("%.40q: not a hello", tt.line)
		}
		h, err := ReadHello(br)
		if tt.bad != errors.Is(err, ErrBadHello) || (!tt.bad && (h.PID != tt.pid || h.Roots == nil || h.Roots.Cwd != "/w")) {
			t.Errorf("%.40q: %+v, %v", tt.line, h, err)
		}
	}
	if IsHello(bufio.NewReader(strings.NewReader("Content-Length: 2\r\n\r\n{}"))) {
		t.Error("a DAP frame taken for a hello")
	}
}

func TestLabelAndReply(t *testing.T) {
	i := func(n int64) *int64 { return &n }
	for _, tt := range []struct {
		t    TaskInfo
		want string
	}{
		{TaskInfo{ExecutorID: "3", Host: "node-7", PID: 4242, StageID: i(3), Label: "stage 3 · partition 7"},
			"exec 3 · node-7 · pid 4242 · stage 3 · partition 7"},
		{TaskInfo{PID: 5}, "pid 5"},
		{TaskInfo{Host: "h"}, "h"},
	} {
		if got := Label(tt.t); got != tt.want {
			t.Errorf("Label(%+v) = %q, want %q", tt.t, got, tt.want)
		}
	}
	for _, tt := range []struct {
		nonce string
		err   error
		want  string
	}{
		{"", nil, "SPARKDAP/2 OK\n"},
		{"ab12", nil, "SPARKDAP/2 OK ab12\n"},
		{"", &SessionLimitError{Max: 4}, "SPARKDAP/2 REFUSED session limit reached (4 debugged at once)\n"},
		{"", ErrBadHello, "SPARKDAP/2 REFUSED bad hello\n"},
	} {
		if got := string(Reply(tt.nonce, tt.err)); got != tt.want {
			t.Errorf("Reply(%q, %v) = %q, want %q", tt.nonce, tt.err, got, tt.want)
		}
	}
}
