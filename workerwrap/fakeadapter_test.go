package workerwrap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// fakeAdapter is the smallest DAP adapter pydevd accepts: it authorizes,
// initializes, attaches and sends configurationDone on every connection, then
// records sparkdapTask events and, for every stopped event, the top stack
// frame before it continues. It stands in for the real proxy in tests.
type fakeAdapter struct {
	t     *testing.T
	ln    net.Listener
	token string
	// hangUpAfterHandshake mimics the proxy's session limit: it completes
	// the handshake, then disconnects.
	hangUpAfterHandshake bool

	// refuseHello, if set, is the reason every worker hello is refused
	// with (as the proxy does at its session limit).
	refuseHello string

	// squat makes it a program that bound the proxy's port first: it
	// answers the hello with a challenge it cannot prove.
	squat bool

	mu      sync.Mutex
	conns   int              // pydevd connections
	watches int              // watch connections (live selection) served
	reports []string         // their lines, as received
	hellos  []map[string]any // worker hellos, as received (watches not)
	tokens  []any            // clientAccessToken as received
	derived []string         // the pydevd tokens of accepted hellos, in order
	heard   strings.Builder  // everything workers sent on hello connections
	tasks   []map[string]any
	stops   []stackFrame
	errs    []error
	wg      sync.WaitGroup
	closeCh chan struct{}
}

type stackFrame struct {
	Name   string
	Path   string
	Line   int
	Reason string
}

func newFakeAdapter(t *testing.T, token string) *fakeAdapter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake adapter listen: %v", err)
	}
	a := &fakeAdapter{t: t, ln: ln, token: token, closeCh: make(chan struct{})}
	a.wg.Add(1)
	go a.accept()
	t.Cleanup(a.close)
	return a
}

func (a *fakeAdapter) addr() string { return a.ln.Addr().String() }

func (a *fakeAdapter) close() {
	select {
	case <-a.closeCh:
		return
	default:
	}
	close(a.closeCh)
	a.ln.Close()
	a.wg.Wait()
}

func (a *fakeAdapter) accept() {
	defer a.wg.Done()
	for {
		c, err := a.ln.Accept()
		if err != nil {
			return
		}
		a.wg.Add(2)
		go func() {
			defer a.wg.Done()
			<-a.closeCh
			c.Close()
		}()
		go func() {
			defer a.wg.Done()
			defer c.Close()
			if err := a.serve(c); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				a.mu.Lock()
				a.errs = append(a.errs, err)
				a.mu.Unlock()
			}
		}()
	}
}

// debugDAP prints every DAP message the fake adapter exchanges.
var debugDAP = os.Getenv("SPARKDAP_TEST_DEBUG_DAP") != ""

type dapConn struct {
	c   net.Conn
	r   *bufio.Reader // the connection's, where a hello is looked for first
	fr  *dapwire.FrameReader
	seq int
}

func (d *dapConn) send(msg map[string]any) error {
	d.seq++
	msg["seq"] = d.seq
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if debugDAP {
		fmt.Printf("-> %s\n", b)
	}
	_, err = d.c.Write(dapwire.AppendFrame(nil, b))
	return err
}

func (d *dapConn) read() (map[string]any, error) {
	body, err := d.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	if debugDAP {
		fmt.Printf("<- %s\n", body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("decode %q: %w", body, err)
	}
	return m, nil
}

// request sends a request and returns its response, handling events that
// arrive meanwhile.
func (a *fakeAdapter) request(d *dapConn, command string, args map[string]any) (map[string]any, error) {
	if err := d.send(map[string]any{"type": "request", "command": command, "arguments": args}); err != nil {
		return nil, err
	}
	seq := d.seq
	for i := 0; i < 1000; i++ {
		m, err := d.read()
		if err != nil {
			return nil, fmt.Errorf("waiting for %s response: %w", command, err)
		}
		if m["type"] == "response" && int(m["request_seq"].(float64)) == seq {
			if ok, _ := m["success"].(bool); !ok {
				return m, fmt.Errorf("%s failed: %v", command, m["message"])
			}
			return m, nil
		}
		if err := a.event(d, m); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no %s response in 1000 messages", command)
}

func (a *fakeAdapter) event(d *dapConn, m map[string]any) error {
	if m["type"] != "event" {
		return nil
	}
	body, _ := m["body"].(map[string]any)
	switch m["event"] {
	case "sparkdapTask":
		a.mu.Lock()
		a.tasks = append(a.tasks, body)
		a.mu.Unlock()
	case "stopped":
		tid := body["threadId"]
		st, err := a.request(d, "stackTrace", map[string]any{"threadId": tid, "startFrame": 0, "levels": 1})
		if err != nil {
			return err
		}
		var f stackFrame
		f.Reason, _ = body["reason"].(string)
		if frames, _ := st["body"].(map[string]any)["stackFrames"].([]any); len(frames) > 0 {
			top := frames[0].(map[string]any)
			f.Name, _ = top["name"].(string)
			f.Line = int(top["line"].(float64))
			if src, ok := top["source"].(map[string]any); ok {
				f.Path, _ = src["path"].(string)
			}
		}
		a.mu.Lock()
		a.stops = append(a.stops, f)
		a.mu.Unlock()
		if _, err := a.request(d, "continue", map[string]any{"threadId": tid}); err != nil {
			return err
		}
	}
	return nil
}

func (a *fakeAdapter) serve(c net.Conn) error {
	r := bufio.NewReader(c)
	d := &dapConn{c: c, r: r, fr: dapwire.NewFrameReader(r, 16<<20)}
	// A worker's hello comes first and unasked; pydevd waits to be spoken
	// to. The real proxy does not wait (see dap/hello.go); a fake may.
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := d.r.Peek(len(admission.HelloPrefix)); err == nil && string(b) == admission.HelloPrefix {
		return a.serveHello(c, d.r)
	}
	a.mu.Lock()
	a.conns++
	a.mu.Unlock()
	// The handshake must finish well before the wrapper's guard gives up.
	c.SetDeadline(time.Now().Add(20 * time.Second))
	auth, err := a.request(d, "pydevdAuthorize", map[string]any{"debugServerAccessToken": nil})
	if err != nil {
		return err
	}
	got := auth["body"].(map[string]any)["clientAccessToken"]
	a.mu.Lock()
	a.tokens = append(a.tokens, got)
	a.mu.Unlock()
	// As the proxy does for a worker that said hello: only the one-time
	// token its hello derived, once.
	a.mu.Lock()
	tok, _ := got.(string)
	ok := a.token == "" || (tok != "" && slices.Contains(a.derived, tok))
	if ok && a.token != "" {
		a.derived = slices.DeleteFunc(a.derived, func(s string) bool { return s == tok })
	}
	a.mu.Unlock()
	if !ok {
		return nil // refuse: close before configurationDone
	}
	if _, err := a.request(d, "initialize", map[string]any{
		"clientID": "sparkdap-test", "adapterID": "debugpy", "pathFormat": "path",
		"linesStartAt1": true, "columnsStartAt1": true,
	}); err != nil {
		return err
	}
	if _, err := a.request(d, "attach", map[string]any{"justMyCode": false}); err != nil {
		return err
	}
	if _, err := a.request(d, "configurationDone", nil); err != nil {
		return err
	}
	if a.hangUpAfterHandshake {
		return nil
	}
	c.SetDeadline(time.Time{})
	for {
		m, err := d.read()
		if err != nil {
			return err
		}
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		if err := a.event(d, m); err != nil {
			return err
		}
	}
}

// serveHello answers a worker's hello as the proxy does (SPARKDAP/2, see
// admission/challenge.go), or as a squatter that cannot prove the token.
func (a *fakeAdapter) serveHello(c net.Conn, r *bufio.Reader) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	first, err := r.ReadString('\n')
	a.mu.Lock()
	a.heard.WriteString(first)
	a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	wn, ok := strings.CutPrefix(strings.TrimSpace(first), admission.HelloPrefix+"HELLO ")
	if !ok {
		return fmt.Errorf("malformed hello %q", first)
	}
	pn, err := admission.NewNonce()
	if err != nil {
		return err
	}
	proof := admission.ProxyProof(a.token, wn, pn)
	if a.squat {
		proof = strings.Repeat("ab", 32)
	}
	if _, err := c.Write([]byte(admission.HelloPrefix + "CHALLENGE " + pn + " " + proof + "\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	a.mu.Lock()
	a.heard.WriteString(line)
	a.mu.Unlock()
	if errors.Is(err, io.EOF) && line == "" {
		return nil // the worker hung up at the proof, as it must with a squatter
	}
	if err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	var hello map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, admission.HelloPrefix)), &hello); err != nil {
		return fmt.Errorf("malformed hello %q: %w", line, err)
	}
	proofOK := hello["proof"] == admission.WorkerProof(a.token, wn, pn)
	hello["proofOK"] = proofOK
	delete(hello, "proof")
	if hello["watch"] == true && (proofOK || a.token == "") {
		return a.serveWatch(c, r)
	}
	a.mu.Lock()
	a.hellos = append(a.hellos, hello)
	a.mu.Unlock()
	reply := "OK"
	switch {
	case a.refuseHello != "":
		reply = "REFUSED " + a.refuseHello
	case a.token != "" && !proofOK:
		reply = "REFUSED wrong access token"
	default:
		a.mu.Lock()
		a.derived = append(a.derived, admission.PydevdToken(a.token, wn, pn))
		a.mu.Unlock()
	}
	_, err = c.Write([]byte(admission.HelloPrefix + reply + "\n"))
	return err
}

// serveWatch follows a worker's watch connection as the proxy does: OK,
// the selection the job was submitted with, then its reports until it
// closes.
func (a *fakeAdapter) serveWatch(c net.Conn, r *bufio.Reader) error {
	if _, err := c.Write([]byte(admission.HelloPrefix + "OK\n" + admission.HelloPrefix + "SELECT null\n")); err != nil {
		return err
	}
	a.mu.Lock()
	a.watches++
	a.mu.Unlock()
	c.SetDeadline(time.Time{})
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil
		}
		a.mu.Lock()
		a.reports = append(a.reports, strings.TrimSpace(line))
		a.mu.Unlock()
	}
}

type adapterReport struct {
	hellos []map[string]any
	conns  int
	tokens []any
	heard  string
	tasks  []map[string]any
	stops  []stackFrame
	errs   []error
	// watches and reports are the watch connections and their lines.
	watches int
	reports []string
}

func (a *fakeAdapter) report() adapterReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	return adapterReport{append([]map[string]any(nil), a.hellos...), a.conns, append([]any(nil), a.tokens...), a.heard.String(), append([]map[string]any(nil), a.tasks...),
		append([]stackFrame(nil), a.stops...), append([]error(nil), a.errs...), a.watches, append([]string(nil), a.reports...)}
}

// waitFor polls cond until it holds or ctx ends; pydevd sends events from a
// writer thread, so they may trail the job's end slightly.
func waitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}
