package doctor

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/internal/buildinfo"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/testkit/watchtest"
)

func known(exec, host, version, state string) control.KnownWorker {
	return control.KnownWorker{Worker: selection.Worker{ExecutorID: exec, Host: host, SparkdapVersion: version}, State: state}
}

// The verdict compares each worker's wrapper version with serve's: OK
// when all match, WARN naming each other version with a count and an
// example worker (a wrapper that said none is an older sparkdap), SKIP
// when there is nothing to compare. Live workers decide; those that went
// away only when none is live; those without a watch, whose version is
// unknown, never.
func TestWrapperVerdict(t *testing.T) {
	const serve = "0.3.0"
	for _, tc := range []struct {
		name    string
		ans     control.Answer
		mine    string
		v       verdict
		details []string // each in the detail
		fix     string   // in the fix, "" for none
	}{
		{"all match", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("1", "a", serve, control.StateRunning), known("2", "b", serve, control.StateIdle)}},
			serve, vOK, []string{"all 2 worker(s) of the running job run the wrapper of sparkdap 0.3.0, serve's"}, ""},
		{"no workers", control.Answer{Version: serve}, serve, vSkip, []string{"no worker has reached it yet"}, ""},
		{"one other version", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("1", "a", serve, control.StateRunning), known("2", "b", "0.2.0", control.StateStopped), known("3", "c", "0.2.0", control.StateIdle)}},
			serve, vWarn, []string{"serve is sparkdap 0.3.0, but 2 of 3 worker(s) of the running job", "2 on sparkdap 0.2.0 (e.g. executor 2 on host b)"},
			"resubmit the job with this sparkdap's wrapper"},
		{"older wrappers", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("4", "d", "", control.StateRunning), known("5", "e", "0.2.0", control.StateRunning), known("6", "f", "", control.StateIdle)}},
			serve, vWarn, []string{"3 of 3", "2 on an older sparkdap (before version reporting) (e.g. executor 4 on host d); 1 on sparkdap 0.2.0 (e.g. executor 5 on host e)"},
			"or run the sparkdap serve of the job's version"},
		{"gone workers ignored while some are live", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("1", "a", serve, control.StateRunning), known("2", "b", "0.1.0", control.StateFinished)}},
			serve, vOK, []string{"all 1 worker(s) of the running job"}, ""},
		{"only gone workers", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("2", "b", "0.1.0", control.StateFinished), known("3", "c", "0.1.0", control.StateFailed)}},
			serve, vWarn, []string{"2 of 2 worker(s) that reached serve and went away", "2 on sparkdap 0.1.0"}, "resubmit"},
		{"doctor is another release than serve", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("1", "a", "0.4.0", control.StateRunning)}},
			"0.4.0", vWarn, []string{"1 on sparkdap 0.4.0"}, "the wrapper of serve's sparkdap 0.3.0 (its sparkdap submit, wrap or conf; this doctor is 0.4.0)"},
		{"serve too old to say", control.Answer{Known: []control.KnownWorker{
			known("1", "a", "", control.StateRunning)}},
			serve, vWarn, []string{"serve is an older sparkdap (before version reporting), but 1 of 1"}, "restart serve with this sparkdap (0.3.0)"},
		{"unwatched workers not compared", control.Answer{Version: serve, Known: []control.KnownWorker{
			known("1", "a", serve, control.StateRunning), {Worker: selection.Worker{Host: "b", PID: 7}, State: control.StateStopped, Unwatched: true}}},
			serve, vOK, []string{"all 1 worker(s) of the running job run the wrapper of sparkdap 0.3.0, serve's (1 stopped worker(s) that follow no selection watch not compared"}, ""},
		{"only unwatched workers", control.Answer{Version: serve, Known: []control.KnownWorker{
			{Worker: selection.Worker{Host: "b", PID: 7}, State: control.StateStopped, Unwatched: true}}},
			serve, vSkip, []string{"its 1 worker(s) follow no selection watch, which says their version: nothing to compare"}, ""},
		{"no executor id", control.Answer{Version: serve, Known: []control.KnownWorker{
			{Worker: selection.Worker{PID: 42, SparkdapVersion: "0.2.0"}, State: control.StateRunning}}},
			serve, vWarn, []string{"(e.g. pid 42)"}, "resubmit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wrapperVerdict(tc.ans, tc.mine)
			if r.v != tc.v || r.name != wrapperCheckName {
				t.Errorf("%s %q, want %s", r.v, r.name, tc.v)
			}
			for _, d := range tc.details {
				if !strings.Contains(r.detail, d) {
					t.Errorf("detail %q lacks %q", r.detail, d)
				}
			}
			if (tc.fix == "") != (r.fix == "") || !strings.Contains(r.fix, tc.fix) {
				t.Errorf("fix %q, want one with %q", r.fix, tc.fix)
			}
		})
	}
}

// runCheck runs only the wrapper check against the socket at path and
// returns its output; ide is what the ports check found on the IDE port.
func runCheck(t *testing.T, path string, ide portState) string {
	t.Helper()
	var out bytes.Buffer
	d := &doctor{f: Config{IDE: "127.0.0.1:4711", Control: path, Timeout: 10 * time.Second}, out: &out, ideState: ide}
	d.checkWrapperVersion(context.Background())
	return out.String()
}

// With no serve on the socket, the check says so and is no failure: no
// socket at all, or one a serve that ended left behind.
func TestWrapperCheckWithoutServe(t *testing.T) {
	dir := testenv.SocketDir(t)
	stale := filepath.Join(dir, "stale.sock")
	testenv.StaleSocket(t, stale)
	for name, path := range map[string]string{"no socket": filepath.Join(dir, "none.sock"), "stale socket": stale} {
		t.Run(name, func(t *testing.T) {
			out := runCheck(t, path, portFree)
			if !strings.HasPrefix(out, "SKIP  the running job's wrapper: no sparkdap serve is running") || !strings.Contains(out, path) {
				t.Errorf("output %q", out)
			}
		})
	}
	// A sparkdap on the IDE port (the ports check found it) whose control
	// socket is elsewhere: its own --control.
	out := runCheck(t, filepath.Join(dir, "none.sock"), portSparkdap)
	if !strings.HasPrefix(out, "SKIP  the running job's wrapper: not checked: a sparkdap serves the IDE port") ||
		!strings.Contains(out, "fix: if that serve was started with --control, give doctor the same --control") {
		t.Errorf("output %q", out)
	}
}

// boardBackend is a control.Backend of a real Board and no stopped worker.
type boardBackend struct{ board *selection.Board }

func (b boardBackend) StoppedWorkers(context.Context) []control.StoppedWorker { return nil }
func (b boardBackend) CaptureStopped(context.Context, uint64, *int, int64) (control.CaptureResult, error) {
	return control.CaptureResult{}, control.ErrUnsupported
}
func (b boardBackend) Board() *selection.Board { return b.board }

// serveWatches serves watch hellos on a loopback executor port onto
// board, as serve's front ends do (admission.ServeHello, Board.Admit),
// and returns the port's address.
func serveWatches(t *testing.T, board *selection.Board, token string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := admission.NewRegistry(admission.Config{Token: token})
	refusals := admission.NewRefusalLog(func(string) {}, time.Minute, 16)
	t.Cleanup(func() { l.Close(); reg.Close(); refusals.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				send := func(b []byte) { _ = c.SetWriteDeadline(time.Now().Add(5 * time.Second)); _, _ = c.Write(b) }
				_ = admission.ServeHello(admission.HelloConn{Remote: c.RemoteAddr().String(), Reader: br, Send: send, Log: zerolog.Nop(),
					Watch: func(h admission.Hello) (func() error, error) {
						wa, err := board.Admit(h)
						if err != nil {
							return nil, err
						}
						return func() error { return wa.Serve(br, send) }, nil
					}}, reg, refusals, func(string, admission.Hello) (string, error) { return "", admission.ErrNoWatch })
			}()
		}
	}()
	return l.Addr().String()
}

// Against a real serve's parts (a control socket server, a Board and
// watch connections that say their hellos), doctor warns about a job
// whose workers run two releases' wrappers, naming the other one.
func TestWrapperCheckAgainstControlServer(t *testing.T) {
	const token = "a-test-token-of-enough-length-0123456789"
	board := selection.NewBoard(0)
	exe := serveWatches(t, board, token)
	path := filepath.Join(testenv.SocketDir(t), "control.sock")
	l, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- control.Serve(ctx, l, zerolog.Nop(), boardBackend{board}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	for _, w := range []struct {
		exec, host, version string
		pid                 int64
	}{{"1", "node-a", buildinfo.Version, 101}, {"2", "node-b", "0.0.1", 202}} {
		f, err := watchtest.DialHello(exe, token, admission.Hello{
			TaskInfo: admission.TaskInfo{ExecutorID: w.exec, Host: w.host, PID: w.pid}, SparkdapVersion: w.version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := f.Next(5 * time.Second); err != nil { // admitted: the Board follows it
			t.Fatal(err)
		}
	}

	out := runCheck(t, path, portSparkdap)
	want := "WARN  the running job's wrapper: serve is sparkdap " + buildinfo.Version +
		", but 1 of 2 worker(s) of the running job run another release's wrapper: 1 on sparkdap 0.0.1 (e.g. executor 2 on host node-b)\n" +
		"      fix: resubmit the job with this sparkdap's wrapper"
	if !strings.HasPrefix(out, want) {
		t.Errorf("output\n%s\nwant it to start\n%s", out, want)
	}
}
