package admission

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const (
	lossWN = "0123456789abcdef0123456789abcdef"
	lossPN = "fedcba9876543210fedcba9876543210"
)

// TestParseLoss: a loss report verifies only with the token its proof was
// made with, and only in exactly the documented form.
func TestParseLoss(t *testing.T) {
	const token = "s3cret"
	proof := func(b, l string) string { return LossProof(token, lossWN, lossPN, b, l) }
	line := func(fields ...string) string { return LossPrefix + strings.Join(fields, " ") + "\n" }
	valid := line(lossWN, lossPN, "1234", "56", proof("1234", "56"))
	// The documented proof, spelled out as the wrapper's Python makes it.
	if got, want := proof("1234", "56"), mac(token, "sparkdap/2 lost", lossWN, lossPN+"\n1234\n56"); got != want {
		t.Fatalf("LossProof %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name, line, token string
		want              error
		bytes, lines      int64
	}{
		{name: "valid", line: valid, bytes: 1234, lines: 56},
		{name: "valid, CRLF", line: strings.TrimSuffix(valid, "\n") + "\r\n", bytes: 1234, lines: 56},
		{name: "zero", line: line(lossWN, lossPN, "0", "0", proof("0", "0"))},
		{name: "15 digits", line: line(lossWN, lossPN, "999999999999999", "1", proof("999999999999999", "1")),
			bytes: 999999999999999, lines: 1},
		{name: "wrong token", line: valid, token: "other", want: ErrLossProof},
		{name: "no token", line: valid, token: "-", want: ErrLossProof},
		{name: "counts altered", line: line(lossWN, lossPN, "1", "56", proof("1234", "56")), want: ErrLossProof},
		{name: "nonces swapped", line: line(lossPN, lossWN, "1234", "56", proof("1234", "56")), want: ErrLossProof},
		{name: "uppercase proof", line: line(lossWN, lossPN, "1234", "56", strings.ToUpper(proof("1234", "56"))), want: ErrLossProof},
		{name: "uppercase nonce", line: line(strings.ToUpper(lossWN), lossPN, "1234", "56", proof("1234", "56")), want: ErrBadLoss},
		{name: "short nonce", line: line(lossWN[1:], lossPN, "1234", "56", proof("1234", "56")), want: ErrBadLoss},
		{name: "negative", line: line(lossWN, lossPN, "-1", "56", proof("-1", "56")), want: ErrBadLoss},
		{name: "plus sign", line: line(lossWN, lossPN, "+1", "56", proof("+1", "56")), want: ErrBadLoss},
		{name: "16 digits", line: line(lossWN, lossPN, "1000000000000000", "56", proof("1000000000000000", "56")), want: ErrBadLoss},
		{name: "empty count", line: line(lossWN, lossPN, "", "56", proof("", "56")), want: ErrBadLoss},
		{name: "hex count", line: line(lossWN, lossPN, "ff", "56", proof("ff", "56")), want: ErrBadLoss},
		{name: "short proof", line: line(lossWN, lossPN, "1234", "56", proof("1234", "56")[:63]), want: ErrBadLoss},
		{name: "extra field", line: line(lossWN, lossPN, "1234", "56", proof("1234", "56"), "x"), want: ErrBadLoss},
		{name: "missing field", line: line(lossWN, lossPN, "1234", proof("1234", "56")), want: ErrBadLoss},
		{name: "double space", line: line(lossWN, "", lossPN, "1234", "56", proof("1234", "56")), want: ErrBadLoss},
		{name: "tab", line: strings.Replace(valid, " 1234", "\t1234", 1), want: ErrBadLoss},
		{name: "hello prefix", line: "SPARKDAP/2 HELLO " + lossWN + "\n", want: ErrBadLoss},
		{name: "controls", line: LossPrefix + "\x1b]0;owned\x07 " + lossPN + " 1 1 " + proof("1", "1") + "\n", want: ErrBadLoss},
		{name: "over-long", line: strings.TrimSuffix(valid, "\n") + strings.Repeat(" ", maxLossLineBytes) + "\n", want: ErrBadLoss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := token
			switch tc.token {
			case "":
			case "-":
				tok = ""
			default:
				tok = tc.token
			}
			rep, err := ParseLoss([]byte(tc.line), tok)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("ParseLoss: %v, want %v", err, tc.want)
				}
				if Clean(err.Error(), MaxMessageRunes) != err.Error() || strings.Contains(err.Error(), "owned") {
					t.Errorf("error %q quotes the peer", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLoss: %v", err)
			}
			want := LossReport{WorkerNonce: lossWN, ProxyNonce: lossPN, Bytes: tc.bytes, Lines: tc.lines}
			if rep != want {
				t.Errorf("report %+v, want %+v", rep, want)
			}
		})
	}
}

// TestReportLoss: the worker's side writes the documented line, which the
// proxy's side parses back, and refuses what it cannot say.
func TestReportLoss(t *testing.T) {
	var b strings.Builder
	if err := ReportLoss(&b, "tok", lossWN, lossPN, 4096, 12); err != nil {
		t.Fatal(err)
	}
	want := "SPARKDAP/2 LOST " + lossWN + " " + lossPN + " 4096 12 " + LossProof("tok", lossWN, lossPN, "4096", "12") + "\n"
	if b.String() != want {
		t.Errorf("line %q, want %q", b.String(), want)
	}
	rep, err := ParseLoss([]byte(b.String()), "tok")
	if err != nil || rep.Bytes != 4096 || rep.Lines != 12 {
		t.Errorf("parsed back %+v, %v", rep, err)
	}
	for _, bad := range []struct {
		wn, pn       string
		bytes, lines int64
	}{
		{lossWN, lossPN, -1, 0}, {lossWN, lossPN, 0, -1}, {lossWN, lossPN, 1e15, 0},
		{"x", lossPN, 0, 0}, {lossWN, "", 0, 0},
	} {
		var b strings.Builder
		if err := ReportLoss(&b, "tok", bad.wn, bad.pn, bad.bytes, bad.lines); !errors.Is(err, ErrBadLoss) || b.Len() != 0 {
			t.Errorf("ReportLoss(%q, %q, %d, %d): %v, wrote %q", bad.wn, bad.pn, bad.bytes, bad.lines, err, b.String())
		}
	}
}

// TestHandshakeLeavesLossReport: Handshake reads nothing of a loss report
// and sends nothing; ReadLoss then reads it.
func TestHandshakeLeavesLossReport(t *testing.T) {
	r := NewRegistry(Config{Token: "tok"})
	defer r.Close()
	line := LossLine("tok", lossWN, lossPN, 7, 1)
	br := bufio.NewReader(strings.NewReader(line))
	if _, err := r.Handshake(br, func(b []byte) { t.Errorf("sent %q", b) }); !errors.Is(err, ErrLossReport) {
		t.Fatalf("Handshake: %v, want ErrLossReport", err)
	}
	rep, first, err := r.ReadLoss(br, "10.0.0.1:1")
	if err != nil || !first || rep.Bytes != 7 || rep.Lines != 1 || rep.Known {
		t.Fatalf("ReadLoss: %+v, %v, %v", rep, first, err)
	}
	if got := rep.Label(); got != "at 10.0.0.1" {
		t.Errorf("label of an unknown hello's report %q", got)
	}
}

// serveLossConn runs ServeHello on one end of a pipe from 10.1.2.3 while
// the worker side writes raw and closes; it returns what the proxy sent
// and ServeHello's error.
func serveLossConn(t *testing.T, reg *Registry, refusals *RefusalLog, lost func(LossReport), raw string) (sent string, err error) {
	t.Helper()
	a, b := net.Pipe()
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	_ = b.SetDeadline(time.Now().Add(10 * time.Second))
	c := addrConn{b, "10.1.2.3:4242"}
	var out strings.Builder
	served := make(chan error, 1)
	go func() {
		defer c.Close()
		served <- ServeHello(HelloConn{Remote: c.remote, Reader: bufio.NewReader(c), Log: zerolog.Nop(),
			Send: func(p []byte) { out.Write(p) }, Lost: lost},
			reg, refusals, func(string, Hello) (string, error) { t.Error("admit called"); return "", nil })
	}()
	go func() {
		_, _ = io.WriteString(a, raw)
		a.Close()
	}()
	err = <-served
	return out.String(), err
}

// TestServeLoss: a worker's loss report is handed to the front end once,
// with its hello's worker, and never answered; one that does not verify is
// noted as a refused hello, without the peer's bytes.
func TestServeLoss(t *testing.T) {
	const token = "s3cret"
	reg := NewRegistry(Config{Token: token})
	defer reg.Close()
	var out lines
	refusals := NewRefusalLog(out.add, time.Hour, 0)
	defer refusals.Close()

	// The worker's hello, admitted.
	a, b := net.Pipe()
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	_ = b.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		defer b.Close()
		_ = ServeHello(HelloConn{Remote: "10.1.2.3:4000", Reader: bufio.NewReader(b), Log: zerolog.Nop(),
			Send: func(p []byte) { _, _ = b.Write(p) }}, reg, refusals, func(ip string, h Hello) (string, error) {
			return reg.AcceptNonce(ip, h, 0)
		})
	}()
	info := TaskInfo{PID: 55, Host: "node-9", ExecutorID: "7", Label: "stage 1 · partition 2 · attempt 0"}
	reply, _, wn, pn, err := IntroduceWithNonces(a, token, Hello{TaskInfo: info})
	a.Close()
	if err != nil || !strings.HasPrefix(reply, "OK") {
		t.Fatalf("hello: %q, %v", reply, err)
	}

	var got []LossReport
	lost := func(r LossReport) { got = append(got, r) }
	for _, tc := range []struct {
		name, raw string
		want      error // of ServeHello
		reported  bool
		printed   string
	}{
		{name: "valid", raw: LossLine(token, wn, pn, 1234, 56), want: ErrLossReport, reported: true},
		{name: "duplicate", raw: LossLine(token, wn, pn, 1234, 56), want: ErrLossReport},
		{name: "other counts", raw: LossLine(token, wn, pn, 10, 1), want: ErrLossReport, reported: true},
		{name: "wrong token", raw: LossLine("other", wn, pn, 1234, 57), want: ErrLossProof,
			printed: "loss report from 10.1.2.3:4242 refused: " + ErrLossProof.Error()},
		{name: "malformed", raw: LossPrefix + "\x1b]0;owned\x07\n", want: ErrBadLoss,
			printed: "loss report from 10.1.2.3:4242 refused (bad loss report"},
		{name: "over-long", raw: LossPrefix + strings.Repeat("a", 1000) + "\n", want: ErrBadLoss,
			printed: "loss report from 10.1.2.3:4242 refused (bad loss report: longer than 256 bytes)"},
		{name: "cut short", raw: LossPrefix + wn,
			printed: "loss report from 10.1.2.3:4242 refused (reading loss report: EOF)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, printedBefore := len(got), len(out.get())
			// A fresh RefusalLog address for each, so each first line prints.
			refusals = NewRefusalLog(out.add, time.Hour, 0)
			defer refusals.Close()
			sent, err := serveLossConn(t, reg, refusals, lost, tc.raw)
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("ServeHello: %v, want %v", err, tc.want)
			}
			if sent != "" {
				t.Errorf("sent %q to a loss report, want nothing", sent)
			}
			if n := len(got) - before; tc.reported != (n == 1) || n > 1 {
				t.Fatalf("%d reports handed on, want reported %v", n, tc.reported)
			}
			if tc.reported {
				r := got[len(got)-1]
				if !r.Known || r.Worker.PID != 55 || r.Worker.Roots != nil || r.Remote != "10.1.2.3:4242" {
					t.Errorf("report %+v: want its hello's worker", r)
				}
				if l := r.Label(); l != "exec 7 · node-9 · pid 55" {
					t.Errorf("label %q", l)
				}
			}
			lines := out.get()[printedBefore:]
			switch {
			case tc.printed == "" && len(lines) != 0:
				t.Errorf("printed %q, want nothing", lines)
			case tc.printed != "" && (len(lines) != 1 || !strings.HasPrefix(lines[0], tc.printed)):
				t.Errorf("printed %q, want a line starting %q", lines, tc.printed)
			}
			for _, l := range lines {
				if Clean(l, len(l)) != l || strings.Contains(l, "owned") {
					t.Errorf("line %q quotes the peer", l)
				}
			}
			if tc.name == "wrong token" && refusals.Count() != 1 {
				t.Errorf("a wrong proof counted %d refusals, want 1", refusals.Count())
			}
			if tc.name == "malformed" && refusals.Count() != 0 {
				t.Errorf("a malformed report counted %d refusals, want 0 (maybe no worker)", refusals.Count())
			}
		})
	}
	if len(got) != 2 {
		t.Fatalf("%d reports handed on, want 2", len(got))
	}
	if r := got[0]; r.Bytes != 1234 || r.Lines != 56 || r.Message() !=
		"worker exec 7 · node-9 · pid 55: 1234 bytes (56 lines) of output did not reach the debugger before the task ended; the executor's log has them" {
		t.Errorf("first report %+v: %q", r, r.Message())
	}
}

// TestRecentBounded: the hellos and reports remembered are the last max.
func TestRecentBounded(t *testing.T) {
	c := newRecent[int](3)
	for i, k := range []string{"a", "b", "c", "a", "d", "e"} {
		c.put(k, i)
	}
	if len(c.m) != 3 || len(c.order) != 3 || c.has("a") || c.has("b") {
		t.Fatalf("remembered %v", c.m)
	}
	if v, ok := c.get("c"); !ok || v != 2 {
		t.Errorf("c = %d, %v", v, ok)
	}
	r := NewRegistry(Config{Token: "tok"})
	defer r.Close()
	for i := range maxRememberedHellos + 10 {
		line := LossLine("tok", lossWN, lossPN, int64(i), 0)
		if _, first, err := r.ReadLoss(bufio.NewReader(strings.NewReader(line)), "x:1"); err != nil || !first {
			t.Fatalf("report %d: first %v, %v", i, first, err)
		}
	}
	if n := len(r.losses.m); n != maxRememberedHellos {
		t.Errorf("%d reports remembered, want %d", n, maxRememberedHellos)
	}
}

// FuzzParseLoss: any line parses or fails with ErrBadLoss or ErrLossProof,
// never quoting it; one that parses says the same once sent again.
func FuzzParseLoss(f *testing.F) {
	f.Add([]byte(LossLine("tok", lossWN, lossPN, 1234, 56)), "tok")
	f.Add([]byte(LossLine("tok", lossWN, lossPN, 0, 0)), "")
	f.Add([]byte(LossPrefix+lossWN+" "+lossPN+" 007 1 "+LossProof("tok", lossWN, lossPN, "007", "1")+"\r\n"), "tok")
	f.Add([]byte(LossPrefix+"\x1b]0;x\x07\n"), "tok")
	f.Add([]byte("SPARKDAP/2 HELLO "+lossWN+"\n"), "tok")
	f.Fuzz(func(t *testing.T, line []byte, token string) {
		rep, err := ParseLoss(line, token)
		if err != nil {
			if !errors.Is(err, ErrBadLoss) && !errors.Is(err, ErrLossProof) {
				t.Fatalf("untyped error %v", err)
			}
			if Clean(err.Error(), MaxMessageRunes) != err.Error() {
				t.Fatalf("error %q holds controls", err)
			}
			return
		}
		if len(line) > maxLossLineBytes || rep.Bytes < 0 || rep.Lines < 0 {
			t.Fatalf("accepted %q as %+v", line, rep)
		}
		again, err := ParseLoss([]byte(LossLine(token, rep.WorkerNonce, rep.ProxyNonce, rep.Bytes, rep.Lines)), token)
		if err != nil || again != rep {
			t.Fatalf("%+v sent again: %+v, %v", rep, again, err)
		}
	})
}
