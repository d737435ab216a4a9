package pycharm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
)

// TestRefusalFloodCleanAndBounded plays a hostile cluster against the
// PyCharm front end: 300 refused hellos whose host carries terminal escapes
// and a forged line write a few clean summary lines, and a legitimate
// worker is admitted after them.
func TestRefusalFloodCleanAndBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var summary syncbuf.Buffer
	px, _ := startProxy(t, ctx, pycharm.Config{Summary: &summary})
	addr := px.Addr().String()
	evil := "\x1b]0;owned\x07\x1b[2K\r\nsparkdap: fake\u009b2J\u202e" + strings.Repeat("h", 4000)
	for i := range 300 {
		b, _ := json.Marshal(map[string]any{"token": "wrong", "pid": 1000 + i, "host": evil, "label": evil})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "SPARKDAP/1 %s\n", b)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The proxy's probe may come before the reply.
		br := bufio.NewReader(c)
		var line string
		for range 10 {
			if line, err = br.ReadString('\n'); err != nil || strings.Contains(line, "SPARKDAP/1 ") {
				break
			}
		}
		c.Close()
		if !strings.Contains(line, "SPARKDAP/1 REFUSED") {
			t.Fatalf("hello %d: %q, %v", i, line, err)
		}
	}
	if nonce, reply := sayHello(t, addr, 5, 0, pathmap.Roots{}); nonce == "" {
		t.Fatalf("the legitimate worker after the flood: %q", reply)
	}
	out := summary.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) > 5 || len(out) > 4<<10 {
		t.Errorf("300 refusals wrote %d summary lines, %d bytes:\n%.1000q", len(lines), len(out), out)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "sparkdap: ") || strings.HasPrefix(l, "sparkdap: fake") {
			t.Errorf("injected summary line %.200q", l)
		}
		for _, r := range l {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) {
				t.Errorf("control %U in summary line %.200q", r, l)
				break
			}
		}
	}
}
