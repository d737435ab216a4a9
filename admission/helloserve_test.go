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

// addrConn is one end of a pipe with the remote address a front end
// would see.
type addrConn struct {
	net.Conn
	remote string
}

// rawWorker says lines as a hostile or broken wrapper would: first, the
// challenge read, then second (if any); it returns everything the proxy
// sent after the challenge.
func rawWorker(first, second string) func(c net.Conn) (string, error) {
	return func(c net.Conn) (string, error) {
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, first); err != nil {
			return "", err
		}
		if second != "" {
			if _, err := br.ReadString('\n'); err != nil { // the challenge
				return "", err
			}
			if _, err := io.WriteString(c, second); err != nil {
				return "", err
			}
		}
		rest, err := io.ReadAll(br)
		return strings.TrimSuffix(string(rest), "\n"), err
	}
}

// TestServeHello: both front ends' hello goes through ServeHello: the
// reply for each outcome, the admission callback given the hello's source
// address, and the refusal's summary line and count (a token failure or an
// admission refusal is a refused worker; a hello that is not one is only
// noted).
func TestServeHello(t *testing.T) {
	const token = "s3cret-s3cret-s3cret"
	wn := strings.Repeat("ab", 16)
	goodWorker := func(c net.Conn) (string, error) {
		reply, _, err := Introduce(c, token, TaskInfo{PID: 7, Host: "node-1", Label: "stage 1"})
		return HelloPrefix + reply, err
	}
	// A worker whose debugger cannot load, as the wrapper says it: the
	// reason carries a terminal escape, which must not reach any line.
	undebuggedWorker := func(c net.Conn) (string, error) {
		reply, _, err := IntroduceHello(c, token, Hello{TaskInfo: TaskInfo{PID: 7, Host: "node-1"},
			Undebugged: "debugpy is not installed in /usr/bin/python3\x1b[2J"})
		return HelloPrefix + reply, err
	}
	for _, tc := range []struct {
		name           string
		worker         func(net.Conn) (string, error)
		refuse         error
		wantReply      string
		wantLine       string
		wantCount      int64
		wantUndebugged int64
		wantErr        error
	}{
		{name: "cannot load a debugger", worker: undebuggedWorker,
			wantReply:      "SPARKDAP/2 REFUSED " + ErrUndebugged.Error(),
			wantLine:       "worker node-1 pid 7 runs undebugged: debugpy is not installed in /usr/bin/python3",
			wantUndebugged: 1, wantErr: ErrUndebugged},
		{name: "admitted", worker: goodWorker, wantReply: "SPARKDAP/2 OK nonce-1"},
		{name: "admission refused", worker: goodWorker, refuse: &SessionLimitError{Max: 1},
			wantReply: "SPARKDAP/2 REFUSED session limit reached (1 debugged at once)",
			wantLine:  "worker node-1 pid 7 refused: session limit reached (1 debugged at once); it runs undebugged",
			wantCount: 1, wantErr: ErrSessionLimit},
		{name: "bad proof", worker: rawWorker("SPARKDAP/2 HELLO "+wn+"\n", `SPARKDAP/2 {"proof":"`+strings.Repeat("0", 64)+`","pid":7}`+"\n"),
			wantReply: "SPARKDAP/2 REFUSED " + ErrBadProof.Error(),
			wantLine:  "worker from 10.1.2.3:4242 refused: " + ErrBadProof.Error() + "; it runs undebugged",
			wantCount: 1, wantErr: ErrBadProof},
		{name: "old hello", worker: rawWorker(`SPARKDAP/1 {"token":"x","pid":7}`+"\n", ""),
			wantReply: "SPARKDAP/1 REFUSED " + ErrOldHello.Error(),
			wantLine:  "worker from 10.1.2.3:4242 refused: " + ErrOldHello.Error() + "; it runs undebugged",
			wantCount: 1, wantErr: ErrOldHello},
		{name: "port probe", worker: rawWorker(ProbeLine, ""),
			wantReply: strings.TrimSuffix(ProbeAnswer, "\n"), wantErr: ErrProbe},
		{name: "malformed", worker: rawWorker("SPARKDAP/2 HELLO "+wn+"\n", "SPARKDAP/2 {\x1b]0;owned\x07\n"),
			wantReply: "SPARKDAP/2 REFUSED bad hello: malformed",
			wantLine:  "worker at 10.1.2.3:4242: hello refused (bad hello: malformed",
			wantErr:   ErrBadHello},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewRegistry(Config{Token: token})
			defer reg.Close()
			var out lines
			refusals := NewRefusalLog(out.add, time.Hour, 0)
			defer refusals.Close()
			var admittedFrom string
			var told []string
			admit := func(ip string, h Hello) (string, error) {
				admittedFrom = ip
				if tc.refuse != nil {
					return "", tc.refuse
				}
				return "nonce-1", reg.Accept(AddrKey(ip, h.PID), ip, h, 0)
			}
			a, b := net.Pipe()
			_ = a.SetDeadline(time.Now().Add(10 * time.Second))
			_ = b.SetDeadline(time.Now().Add(10 * time.Second))
			c := addrConn{b, "10.1.2.3:4242"}
			served := make(chan error, 1)
			go func() {
				defer c.Close()
				served <- ServeHello(HelloConn{Remote: c.remote, Reader: bufio.NewReader(c), Log: zerolog.Nop(),
					Send: func(p []byte) { _, _ = c.Write(p) }, Undebugged: func(l string) { told = append(told, l) }},
					reg, refusals, admit)
			}()
			reply, werr := tc.worker(a)
			a.Close()
			err := <-served
			if werr != nil {
				t.Fatalf("worker side: %v", werr)
			}
			if !strings.HasPrefix(reply, tc.wantReply) || strings.Count(reply, "\n") != 0 {
				t.Errorf("reply %q, want one line starting %q", reply, tc.wantReply)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("ServeHello: %v, want %v", err, tc.wantErr)
			}
			if n := refusals.Count(); n != tc.wantCount {
				t.Errorf("%d refusals counted, want %d", n, tc.wantCount)
			}
			if n := refusals.UndebuggedCount(); n != tc.wantUndebugged {
				t.Errorf("%d workers without a debugger counted, want %d", n, tc.wantUndebugged)
			}
			got := out.get()
			if tc.wantUndebugged > 0 {
				// The IDE is told what serve's log says.
				if len(told) != 1 || len(got) != 1 || told[0] != got[0] {
					t.Errorf("told the IDE %q, serve's log %q: want the same one line", told, got)
				}
				if last := refusals.LastUndebugged(); !strings.HasPrefix(last, "debugpy is not installed") || Clean(last, len(last)) != last {
					t.Errorf("LastUndebugged %q: want the cleaned reason", last)
				}
				if len(reg.Pending()) != 0 {
					t.Errorf("%d hellos pending: a worker without a debugger must hold no session", len(reg.Pending()))
				}
			} else if len(told) != 0 {
				t.Errorf("told the IDE %q, want nothing", told)
			}
			switch {
			case tc.wantLine == "" && len(got) != 0:
				t.Errorf("summary %q, want none", got)
			case tc.wantLine != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.wantLine)):
				t.Errorf("summary %q, want one line starting %q", got, tc.wantLine)
			}
			for _, l := range got {
				if Clean(l, len(l)) != l {
					t.Errorf("summary line %q holds controls", l)
				}
			}
			if (tc.wantErr == nil || tc.refuse != nil) && admittedFrom != "10.1.2.3" {
				t.Errorf("admit got the address %q, want 10.1.2.3", admittedFrom)
			}
			if tc.name == "admitted" && len(reg.Pending()) != 1 {
				t.Errorf("%d hellos pending after the admission, want 1", len(reg.Pending()))
			}
		})
	}
}

// TestRemoteIP: a hello's source is the address without the port, for
// IPv4, IPv6 and an address without a port alike.
func TestRemoteIP(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.1:5678": "10.0.0.1", "[::1]:5678": "::1", "pipe": "pipe", "": ""} {
		if got := RemoteIP(in); got != want {
			t.Errorf("RemoteIP(%q) = %q, want %q", in, got, want)
		}
	}
}
