package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// TestPathsPrintsNoControls: the path report's executor paths, roots and
// pydevd's reasons are the cluster's words; sparkdap paths prints them
// without a byte a terminal acts on, even from a proxy that sends them raw.
func TestPathsPrintsNoControls(t *testing.T) {
	const bad = "/job/x\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\r\x1b[2Ksparkdap: ok\n\u009b2J.py"
	report := dap.PathReport{Executor: 1, Label: bad, Roots: dap.Roots{Cwd: bad, SysPath: []string{bad}},
		Mapped:   []dap.Mapping{{Remote: bad, Local: "/home/me/x.py", Rule: bad}},
		Unmapped: []string{bad},
		Refused:  []dap.BreakpointRefusal{{Source: "/home/me/x.py", Line: 3, Message: bad, Tried: []string{bad}}}}
	body, _ := json.Marshal(map[string]any{"executors": []any{report}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := dapwire.NewFrameReader(c, 0).ReadFrame()
		if err != nil {
			return
		}
		var m struct{ Seq int }
		_ = json.Unmarshal(req, &m)
		resp := fmt.Sprintf(`{"seq":1,"type":"response","request_seq":%d,"command":%q,"success":true,"body":%s}`, m.Seq, dap.PathsCommand, body)
		_, _ = c.Write(dapwire.AppendFrame(nil, []byte(resp)))
		_, _ = io.Copy(io.Discard, c)
	}()
	var out, errb bytes.Buffer
	if code := run([]string{"paths", "--ide", l.Addr().String()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Count(out.String(), "/job/x") < 6 {
		t.Fatalf("the report is not shown whole:\n%s", out.String())
	}
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		for _, r := range strings.TrimSuffix(line, "\n") {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
				t.Fatalf("control %U printed: %q", r, out.String())
			}
		}
	}
}
