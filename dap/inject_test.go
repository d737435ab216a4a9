package dap

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// evil is what a hostile cluster puts in every field it controls: an OSC
// window title, erase-line, a forged sparkdap line, a C1 CSI clearing the
// screen and a bidi override.
const evil = "\x1b]0;owned\x07\x1b[2K\r\nsparkdap: fake\u009b2J\u202e"

// controlChar returns the first character of s a terminal or an IDE label
// acts on (C0 but the final newline, DEL, C1, bidi controls, line
// separators, invalid UTF-8), or -1.
func controlChar(s string) rune {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, w := utf8.DecodeRuneInString(s[i:]); w == 1 {
				return r
			}
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == '\u2028', r == '\u2029',
			r == '\u061c', r == '\u200e', r == '\u200f',
			r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			return r
		}
	}
	return -1
}

// checkSummary fails unless every line of out is one of sparkdap's own
// ("sparkdap: …") with no control character in it.
func checkSummary(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "sparkdap: ") || strings.HasPrefix(l, "sparkdap: fake") {
			t.Errorf("injected summary line %q", l)
		}
		if r := controlChar(l); r >= 0 {
			t.Errorf("summary line keeps control %U: %q", r, l)
		}
	}
}

// TestClusterTextCannotDriveTheTerminal plays a hostile cluster: its hellos
// (refused and accepted), task events and stop location carry terminal
// escapes and forged lines. Serve's summary, the status the live view
// draws, the child session's name and its stop's description get none of
// them.
func TestClusterTextCannotDriveTheTerminal(t *testing.T) {
	var summary syncbuf.Buffer
	p := startProxy(t, func(c *Config) { c.Summary = &summary })
	_, children := p.childRoot(nil, nil)
	addr := p.srv.ExecutorAddr().String()
	fields := map[string]any{"host": evil, "executorId": evil, "label": evil}
	hello := func(token string, pid int) map[string]any {
		m := map[string]any{"token": token, "pid": pid}
		for k, v := range fields {
			m[k] = v
		}
		return m
	}
	if got, err := helloFrom("127.0.0.1", addr, hello("wrong", 41)); !strings.HasPrefix(got, "REFUSED") {
		t.Fatalf("wrong token: %q, %v", got, err)
	}
	if got := sayHello(t, addr, hello(testToken, 42)); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	f := dialFake(t, addr, testToken, 42)
	f.SetFramePath("/job/" + evil + ".py")
	f.waitRequest("configurationDone", nil)
	f.stop() // listed once it stops
	child := p.nextChild(children)
	var cfg map[string]any
	_ = json.Unmarshal(child.Config.Configuration, &cfg)
	name, _ := cfg["name"].(string)
	if r := controlChar(name); r >= 0 || !strings.Contains(name, "sparkdap: fake") {
		t.Errorf("child session name keeps %U (or lost its text): %q", r, name)
	}
	ev, err := child.Client.WaitEvent(p.ctx, "stopped", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stop struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(ev.Body, &stop)
	if r := controlChar(stop.Description); r >= 0 || !strings.Contains(stop.Description, "sparkdap: fake") {
		t.Errorf("the stop's description keeps %U (or lost the task): %q", r, stop.Description)
	}
	task := hello("", 42)
	task["stageId"] = 3
	f.event("sparkdapTask", task)
	f.stop()
	var st Stats
	for range 500 {
		if st = p.hub.Stats(); len(st.Executors) == 1 && st.Executors[0].StoppedAt != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(st.Executors) != 1 || st.Executors[0].StoppedAt == "" {
		t.Fatalf("no stop location in %+v", st)
	}
	e := st.Executors[0]
	for what, s := range map[string]string{"label": e.Label, "stopped at": e.StoppedAt, "host": e.Task.Host,
		"executor id": e.Task.ExecutorID, "task label": e.Task.Label} {
		if r := controlChar(s); r >= 0 {
			t.Errorf("status %s keeps control %U: %q", what, r, s)
		}
	}
	checkSummary(t, summary.String())
	if !strings.Contains(summary.String(), "refused") || !strings.Contains(summary.String(), "+ executor") {
		t.Errorf("summary lacks the refusal or the attach:\n%s", summary.String())
	}
}

// helloFrom says a hello from a given loopback address; it returns errors,
// as it runs on goroutines of its own. With the right token it is the
// wrapper's hello (admission.Introduce); with any other it plays an attacker
// that ignores the proxy's proof and sends its description with a made-up
// proof of its own, which the proxy must refuse.
func helloFrom(local, addr string, hello map[string]any) (string, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	token, _ := hello["token"].(string)
	desc := map[string]any{}
	for k, v := range hello {
		if k != "token" {
			desc[k] = v
		}
	}
	b, _ := json.Marshal(desc)
	if token == testToken {
		var info admission.TaskInfo
		if err := json.Unmarshal(b, &info); err != nil {
			return "", err
		}
		reply, derived, err := admission.Introduce(c, token, info)
		if err == nil && reply == "OK" {
			helloTokens.Store(helloTokenKey(addr, int(info.PID)), derived)
		}
		return reply, err
	}
	if _, err := io.WriteString(c, HelloPrefix+"HELLO "+strings.Repeat("ab", 16)+"\n"); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	// The proxy may have sent pydevd's first request before its lines.
	next := func() (string, error) {
		for range 1000 {
			line, err := br.ReadString('\n')
			if i := strings.Index(line, HelloPrefix); i >= 0 {
				return strings.TrimSpace(line[i+len(HelloPrefix):]), nil
			}
			if err != nil {
				return "", fmt.Errorf("no hello reply from %s: %w", local, err)
			}
		}
		return "", errors.New("no hello reply")
	}
	if line, err := next(); err != nil || !strings.HasPrefix(line, "CHALLENGE ") {
		return line, err
	}
	b, _ = json.Marshal(map[string]any{"proof": strings.Repeat("0", 64)})
	var merged map[string]any
	_ = json.Unmarshal(b, &merged)
	for k, v := range desc {
		merged[k] = v
	}
	b, _ = json.Marshal(merged)
	if _, err := c.Write(append(append([]byte(HelloPrefix), b...), '\n')); err != nil {
		return "", err
	}
	return next()
}

// TestRefusalFloodIsBounded: 300 refused hellos with long host names from
// one address write a bounded summary and log, another address's first
// refusal is still printed in full, and a legitimate worker from a third
// address is admitted in the middle of the flood.
func TestRefusalFloodIsBounded(t *testing.T) {
	var summary, logs syncbuf.Buffer
	p := startProxy(t, func(c *Config) {
		c.Summary = &summary
		c.Log = zerolog.New(&logs).Level(zerolog.InfoLevel)
	})
	addr := p.srv.ExecutorAddr().String()
	long := strings.Repeat("h", 8000)
	var wg sync.WaitGroup
	flooding := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 300 {
			if i == 100 {
				close(flooding)
			}
			got, err := helloFrom("127.0.0.1", addr, map[string]any{"token": "wrong", "pid": 1000 + i, "host": long + evil})
			if err != nil || !strings.HasPrefix(got, "REFUSED") {
				t.Errorf("flood hello %d: %q, %v", i, got, err)
				return
			}
		}
	}()
	<-flooding
	if got, err := helloFrom("127.0.0.3", addr, map[string]any{"token": "wrong", "pid": 7, "host": "other-host"}); !strings.HasPrefix(got, "REFUSED") {
		t.Errorf("other address: %q, %v", got, err)
	}
	if got, err := helloFrom("127.0.0.2", addr, map[string]any{"token": testToken, "pid": 77, "host": "good-host"}); got != "OK" {
		t.Fatalf("the legitimate worker during the flood: %q, %v", got, err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := newFake(t, conn, testToken, 77, nil)
	f.waitRequest("configurationDone", nil)
	wg.Wait()
	p.waitExecutors(1)
	if n := p.hub.Stats().Refused; n != 301 {
		t.Errorf("%d refusals counted, want 301", n)
	}
	out := summary.String()
	checkSummary(t, out)
	refusals := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "refused") {
			refusals++
		}
	}
	// The first from each address, and a sum per 10 s at most.
	if refusals > 6 || len(out) > 4<<10 {
		t.Errorf("301 refusals wrote %d summary lines, %d bytes:\n%.2000s", refusals, len(out), out)
	}
	// SPARKDAP/2 refuses a bad proof before it reads what the worker says
	// of itself, so the line names the address.
	if !strings.Contains(out, "worker from 127.0.0.3:") {
		t.Errorf("the other address's refusal is missing:\n%.2000s", out)
	}
	if n := len(logs.String()); n > 32<<10 {
		t.Errorf("301 refusals logged %d bytes at info", n)
	}
}

// TestSystemInfoCleaned: what pydevd says about its process is shown in
// logs and status, so it is cleaned as it comes in.
func TestSystemInfoCleaned(t *testing.T) {
	p := parseSystemInfo(map[string]any{
		"process":  map[string]any{"pid": 3, "executable": "/usr/bin/" + evil},
		"python":   map[string]any{"version": "3.11" + evil},
		"platform": map[string]any{"name": strings.Repeat("x", 10000) + evil},
	})
	for what, s := range map[string]string{"executable": p.Executable, "python": p.Python, "platform": p.Platform} {
		if r := controlChar(s); r >= 0 || len(s) > 4096 {
			t.Errorf("%s keeps control %U or is %d bytes: %.80q", what, r, len(s), s)
		}
	}
	if p.PID != 3 || !strings.HasPrefix(p.Python, "3.11") {
		t.Errorf("parsed %+v", p)
	}
}
