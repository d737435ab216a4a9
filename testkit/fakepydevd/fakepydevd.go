// Package fakepydevd is a lightweight stand-in for pydevd's side of a
// debugpy connection: it dials an adapter (as debugpy.connect does) and
// answers the requests a debug adapter sends — pydevdAuthorize with its
// access token, pydevdSystemInfo, initialize, attach, setBreakpoints (with
// ids from a per-process counter), configurationDone, threads, stackTrace,
// scopes, variables, evaluate, continue … — with pydevd's message shapes and
// seq numbering (2, 4, 6, …). Every fake hands out the same local ids
// (thread 1, frame 2, …), as real pydevd processes do.
//
// It is for benchmarks and load tests that need hundreds or thousands of
// debuggees, where real debugpy processes would cost ~30 MB each, and for
// the proxy's fast protocol tests. It does not import the proxy (only the
// wire framing it shares with it, internal/dapwire), so it can test any
// adapter. Each peer costs one goroutine and a 4 KiB read buffer;
// writes are one frame per Write call (header and body together), so it has
// none of pydevd's Nagle stalls.
//
// With Config.Record a peer also keeps every message the adapter sent
// (Recorded, WaitRequest) and models what pydevd would stop at (Hit, State);
// that costs memory per message, so it is off for load tests.
package fakepydevd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// Config describes the debuggee a peer pretends to be.
type Config struct {
	// Token is what pydevdAuthorize answers as clientAccessToken (the
	// access_token given to debugpy.connect).
	Token string
	// PID is reported by pydevdSystemInfo.
	PID int
	// FramePath is the file of the one stack frame it reports; default
	// /job/udf.py.
	FramePath string
	// MaxFrameBytes bounds one incoming message; default 1 MiB.
	MaxFrameBytes int
	// Record keeps every message the adapter sends and tracks the
	// breakpoints and exception filters it arms, as pydevd's state does.
	Record bool
	// Verify decides whether a line breakpoint binds, and with what
	// message; nil binds all. It runs on the peer's goroutine.
	Verify func(path string, line int) (bool, string)
	// EchoUnknown answers a request the fake does not know with success and
	// body {"echo": arguments}, so an adapter's passthrough can be checked;
	// without it such a request fails as unsupported.
	EchoUnknown bool
	// NoThreadEvent leaves out the thread "started" event pydevd sends for
	// its main thread after configurationDone, for tests that check every
	// event an IDE is sent.
	NoThreadEvent bool
	// OnMalformed, if set, is called on the peer's goroutine when the
	// adapter sends a frame that is not a JSON message; the peer then hangs
	// up, as it always does.
	OnMalformed func(body []byte, err error)
}

// Message is one message the adapter sent, as recorded with Config.Record.
type Message struct {
	Type      string
	Command   string
	Seq       int64
	Arguments map[string]any
	// Raw is the message's JSON body.
	Raw []byte
}

// ErrClosed is returned by WaitRequest when the connection ended first.
var ErrClosed = errors.New("fakepydevd: connection closed")

// Peer is one fake pydevd connection.
//
// The serving goroutine owns the read side; wmu serialises writes (and seq);
// mu guards the scriptable settings and the recorded state.
type Peer struct {
	conn net.Conn
	cfg  Config

	wmu sync.Mutex
	seq int64

	mu        sync.Mutex
	framePath string
	tamper    func(req Message, resp map[string]any)
	recorded  []Message
	changed   chan struct{} // closed and replaced on each recorded message
	armed     map[string][]int64
	armedIDs  map[string][]int64 // pydevd's id of each armed breakpoint, as armed lists them
	filters   []any
	suspended bool
	threads   []Thread // what threads answers, in order

	bpNext     atomic.Int64
	requests   atomic.Int64
	configured chan struct{}
	confOnce   sync.Once
	done       chan struct{}
	err        error // why serve ended; read after done
	commands   sync.Map
}

// Dial connects to an adapter's executor port and serves the connection.
func Dial(ctx context.Context, addr string, cfg Config) (*Peer, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakepydevd: dial %s: %w", addr, err)
	}
	return New(c, cfg), nil
}

// New serves an established connection and takes ownership of it.
func New(conn net.Conn, cfg Config) *Peer {
	if cfg.FramePath == "" {
		cfg.FramePath = "/job/udf.py"
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 1 << 20
	}
	p := &Peer{conn: conn, cfg: cfg, framePath: cfg.FramePath, configured: make(chan struct{}), done: make(chan struct{}),
		threads: []Thread{{ID: 1, Name: "MainThread"}}}
	if cfg.Record {
		p.changed = make(chan struct{})
	}
	go p.serve()
	return p
}

// Configured is closed once the adapter sent configurationDone: the point
// where debugpy.connect returns in a real worker.
func (p *Peer) Configured() <-chan struct{} { return p.configured }

// Done is closed when the connection has ended.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err is why the connection ended (nil before Done, io.EOF for a clean close
// by the adapter).
func (p *Peer) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Requests counts the requests received so far.
func (p *Peer) Requests() int64 { return p.requests.Load() }

// Count is how many requests named command were received.
func (p *Peer) Count(command string) int64 {
	if v, ok := p.commands.Load(command); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// Close ends the connection.
func (p *Peer) Close() error { return p.conn.Close() }

// SetFramePath changes the file of the frame it reports stopped in.
func (p *Peer) SetFramePath(path string) {
	p.mu.Lock()
	p.framePath = path
	p.mu.Unlock()
}

// SetTamper makes the peer pass each response through tamper before sending
// it (a hostile executor holding the token); nil stops that. tamper runs on
// the peer's goroutine.
func (p *Peer) SetTamper(tamper func(req Message, resp map[string]any)) {
	p.mu.Lock()
	p.tamper = tamper
	p.mu.Unlock()
}

// Send sends m as a message of its own, numbered in the peer's sequence
// (e.g. a reverse request).
func (p *Peer) Send(m map[string]any) error { return p.send(m) }

// WriteRaw writes b to the connection as is, between whole frames.
func (p *Peer) WriteRaw(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.conn.Write(b)
	return err
}

// Recorded is every message received so far (with Config.Record).
func (p *Peer) Recorded() []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.recorded)
}

// Commands names the commands of the messages received so far, in order,
// comma-separated (with Config.Record).
func (p *Peer) Commands() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.recorded))
	for _, r := range p.recorded {
		names = append(names, r.Command)
	}
	return strings.Join(names, ",")
}

// WaitRequest waits until a message for command for which match (nil
// matches all) holds has been received, and returns the first. It needs
// Config.Record. It fails with ErrClosed if the connection ends first, or
// with ctx's error; either names the commands received.
func (p *Peer) WaitRequest(ctx context.Context, command string, match func(Message) bool) (Message, error) {
	if !p.cfg.Record {
		return Message{}, errors.New("fakepydevd: WaitRequest without Config.Record")
	}
	for closed := false; ; {
		p.mu.Lock()
		for _, r := range p.recorded {
			if r.Command == command && (match == nil || match(r)) {
				p.mu.Unlock()
				return r, nil
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if closed {
			return Message{}, fmt.Errorf("no %s request; got %s: %w", command, p.Commands(), ErrClosed)
		}
		select {
		case <-changed:
		case <-p.done:
			closed = true // every message served is recorded by now: look once more
		case <-ctx.Done():
			return Message{}, fmt.Errorf("no %s request; got %s: %w", command, p.Commands(), ctx.Err())
		}
	}
}

// Hit runs the worker's code at path:line: the peer stops there, as pydevd
// does, if a breakpoint is armed at that path and it is not already
// stopped, naming in hitBreakpointIds the id its setBreakpoints answer gave
// that breakpoint. It reports whether it stopped. It needs Config.Record.
func (p *Peer) Hit(path string, line int64) (bool, error) {
	p.mu.Lock()
	stop := !p.suspended && slices.Contains(p.armed[path], line)
	if stop {
		p.suspended = true
	}
	p.mu.Unlock()
	if !stop {
		return false, nil
	}
	id, _ := p.ArmedID(path, line)
	return true, p.StopAt(1, id)
}

// ArmedID is the id the peer's setBreakpoints answer gave the breakpoint
// armed now at path:line, as pydevd names it in a stop there. It needs
// Config.Record.
func (p *Peer) ArmedID(path string, line int64) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.armed[path], line)
	if i < 0 || i >= len(p.armedIDs[path]) {
		return 0, false
	}
	return p.armedIDs[path][i], true
}

// State reports whether the peer is stopped, and describes what is still
// armed ("" for nothing). It needs Config.Record.
func (p *Peer) State() (suspended bool, armed string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for path, lines := range p.armed {
		parts = append(parts, fmt.Sprintf("%s:%v", path, lines))
	}
	if len(p.filters) > 0 {
		parts = append(parts, fmt.Sprintf("exceptions %v", p.filters))
	}
	sort.Strings(parts)
	return p.suspended, strings.Join(parts, " ")
}

// record keeps m and follows pydevd's state for it.
func (p *Peer) record(m *request, raw []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recorded = append(p.recorded, Message{Type: m.Type, Command: m.Command, Seq: m.Seq, Arguments: m.Arguments,
		Raw: raw})
	args := m.Arguments
	switch m.Command {
	case "setBreakpoints":
		src, _ := args["source"].(map[string]any)
		path, _ := src["path"].(string)
		bps, _ := args["breakpoints"].([]any)
		var lines []int64
		for _, b := range bps {
			if bm, ok := b.(map[string]any); ok {
				lines = append(lines, toInt(bm["line"]))
			}
		}
		if p.armed == nil {
			p.armed = map[string][]int64{}
		}
		if len(lines) == 0 {
			delete(p.armed, path)
		} else {
			p.armed[path] = lines
		}
		delete(p.armedIDs, path) // answer gives the new ones
	case "setExceptionBreakpoints":
		p.filters, _ = args["filters"].([]any)
	case "continue":
		p.suspended = false
	case "pause":
		p.suspended = true
	case "disconnect":
		p.armed, p.armedIDs, p.filters, p.suspended = nil, nil, nil, false
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Wait blocks until the connection ends or ctx does.
func (p *Peer) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop reports a breakpoint hit on thread 1, as pydevd does.
func (p *Peer) Stop() error { return p.StopThread(1) }

// StopThread reports a breakpoint hit on thread tid.
func (p *Peer) StopThread(tid int64) error { return p.StopAt(tid, 0) }

// StopAt reports a hit on thread tid of the breakpoints pydevd numbered
// ids.
func (p *Peer) StopAt(tid int64, ids ...int64) error {
	hits := make([]any, len(ids))
	for i, id := range ids {
		hits[i] = id
	}
	return p.Event("stopped", map[string]any{"reason": "breakpoint", "threadId": tid, "allThreadsStopped": true,
		"hitBreakpointIds": hits})
}

// Thread is one thread the peer lists in its threads answers.
type Thread struct {
	ID   int64
	Name string
}

// Threads is what the peer's threads answer lists now.
func (p *Peer) Threads() []Thread {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.threads)
}

// StartThread adds a thread to the peer's threads answers and reports it
// with a thread "started" event, as pydevd does when it first traces a
// thread.
func (p *Peer) StartThread(id int64, name string) error {
	p.mu.Lock()
	p.threads = append(p.threads, Thread{ID: id, Name: name})
	p.mu.Unlock()
	return p.Event("thread", map[string]any{"reason": "started", "threadId": id})
}

// ExitThread removes a thread from the peer's threads answers and reports
// it with a thread "exited" event.
func (p *Peer) ExitThread(id int64) error {
	p.mu.Lock()
	p.threads = slices.DeleteFunc(p.threads, func(t Thread) bool { return t.ID == id })
	p.mu.Unlock()
	return p.Event("thread", map[string]any{"reason": "exited", "threadId": id})
}

// hasThread reports whether tid is one of the peer's threads.
func (p *Peer) hasThread(tid int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.threads, func(t Thread) bool { return t.ID == tid })
}

// Event sends an event with body (may be nil).
func (p *Peer) Event(name string, body map[string]any) error {
	m := map[string]any{"type": "event", "event": name}
	if body != nil {
		m["body"] = body
	}
	return p.send(m)
}

// OutputEvent returns a reusable encoder for output events carrying text;
// see Output. Encoding the text once keeps a flood cheap for the sender.
func OutputEvent(category, text string) *Output {
	b, _ := json.Marshal(map[string]any{"category": category, "output": text})
	return &Output{body: b, text: len(text)}
}

// Output is an encoded output event body.
type Output struct {
	body []byte
	text int
}

// TextBytes is the length of the output text it carries.
func (o *Output) TextBytes() int { return o.text }

// SendOutput sends one output event, as pydevd does for redirected stdout.
func (p *Peer) SendOutput(o *Output) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.seq += 2
	head := `{"seq":` + strconv.FormatInt(p.seq, 10) + `,"type":"event","event":"output","body":`
	_, err := p.conn.Write(dapwire.AppendFrame(nil, []byte(head), o.body, []byte("}")))
	return err
}

func (p *Peer) send(m map[string]any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.seq += 2 // pydevd counts 2, 4, 6, …
	m["seq"] = p.seq
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = p.conn.Write(dapwire.AppendFrame(nil, body))
	return err
}

// request is the part of an incoming message a fake needs.
type request struct {
	Seq       int64          `json:"seq"`
	Type      string         `json:"type"`
	Command   string         `json:"command"`
	Arguments map[string]any `json:"arguments"`
}

func (p *Peer) serve() {
	defer close(p.done)
	defer p.conn.Close()
	fr := dapwire.NewFrameReader(p.conn, p.cfg.MaxFrameBytes)
	for {
		body, err := fr.ReadFrame()
		if err != nil {
			p.err = err
			return
		}
		var m request
		if err := json.Unmarshal(body, &m); err != nil {
			p.err = fmt.Errorf("fakepydevd: malformed message %q: %w", body, err)
			if p.cfg.OnMalformed != nil {
				p.cfg.OnMalformed(body, err)
			}
			return
		}
		if p.cfg.Record {
			p.record(&m, body)
		}
		if m.Type != "request" {
			continue
		}
		p.requests.Add(1)
		v, _ := p.commands.LoadOrStore(m.Command, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		answer, ok := p.answer(&m)
		resp := map[string]any{"type": "response", "request_seq": m.Seq, "command": m.Command, "success": ok}
		if ok {
			resp["body"] = answer
		} else {
			resp["message"] = fmt.Sprint(answer["error"])
		}
		if m.Command == "attach" {
			_ = p.Event("initialized", nil)
		}
		p.mu.Lock()
		tamper := p.tamper
		p.mu.Unlock()
		if tamper != nil {
			tamper(Message{Type: m.Type, Command: m.Command, Seq: m.Seq, Arguments: m.Arguments, Raw: body}, resp)
		}
		if err := p.send(resp); err != nil {
			p.err = err
			return
		}
		switch m.Command {
		case "configurationDone":
			p.confOnce.Do(func() { close(p.configured) })
			if !p.cfg.NoThreadEvent {
				_ = p.Event("thread", map[string]any{"reason": "started", "threadId": 1})
			}
		case "continue":
			_ = p.Event("continued", map[string]any{"threadId": 1, "allThreadsContinued": true})
		case "pause":
			// pydevd suspends the threads and reports the stop once they
			// reach Python code again.
			_ = p.Event("stopped", map[string]any{"reason": "pause", "threadId": 1, "allThreadsStopped": true})
		case "disconnect":
			if term, _ := m.Arguments["terminateDebuggee"].(bool); term {
				// pydevd kills its process: the connection ends.
				p.err = io.EOF
				return
			}
		}
	}
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}

// answer plays pydevd: the same answers, with ids from per-process counters.
func (p *Peer) answer(m *request) (map[string]any, bool) {
	args := m.Arguments
	switch m.Command {
	case "pydevdAuthorize":
		return map[string]any{"clientAccessToken": p.cfg.Token}, true
	case "pydevdSystemInfo":
		return map[string]any{
			"python":   map[string]any{"version": "3.11.7final0", "implementation": map[string]any{"name": "cpython"}},
			"platform": map[string]any{"name": "linux"},
			"process":  map[string]any{"pid": p.cfg.PID, "ppid": 1, "executable": "/usr/bin/python3", "bitness": 64}}, true
	case "initialize", "attach", "configurationDone", "setFunctionBreakpoints", "setExceptionBreakpoints",
		"disconnect", "setDebuggerProperty", "setPydevdSourceMap":
		return map[string]any{}, true
	case "setBreakpoints":
		src, _ := args["source"].(map[string]any)
		path, _ := src["path"].(string)
		bps, _ := args["breakpoints"].([]any)
		out := make([]any, 0, len(bps))
		ids := make([]int64, 0, len(bps))
		for _, b := range bps {
			bm, _ := b.(map[string]any)
			line := toInt(bm["line"])
			ok, msg := true, ""
			if p.cfg.Verify != nil {
				ok, msg = p.cfg.Verify(path, int(line))
			}
			id := p.bpNext.Add(1) - 1 // pydevd's breakpoint ids start at 0
			ids = append(ids, id)
			bp := map[string]any{"id": id, "verified": ok, "line": line, "source": map[string]any{"path": path}}
			if msg != "" {
				bp["message"] = msg
			}
			out = append(out, bp)
		}
		if p.cfg.Record && len(ids) > 0 {
			p.mu.Lock()
			if p.armedIDs == nil {
				p.armedIDs = map[string][]int64{}
			}
			p.armedIDs[path] = ids
			p.mu.Unlock()
		}
		return map[string]any{"breakpoints": out}, true
	case "threads":
		ts := p.Threads()
		out := make([]any, len(ts))
		for i, t := range ts {
			out[i] = map[string]any{"id": t.ID, "name": t.Name}
		}
		return map[string]any{"threads": out}, true
	case "pause":
		return map[string]any{}, true
	case "stackTrace":
		if tid := toInt(args["threadId"]); !p.hasThread(tid) {
			return map[string]any{"error": fmt.Sprintf("unknown thread %d", tid)}, false
		}
		p.mu.Lock()
		path := p.framePath
		p.mu.Unlock()
		if path == "" {
			path = "/job/udf.py"
		}
		// pydevd gives a frame a sourceReference for its text to be fetched
		// from the process.
		return map[string]any{"stackFrames": []any{map[string]any{"id": 2, "name": "compute", "line": 5,
			"column": 1, "source": map[string]any{"path": path, "sourceReference": 4}}}, "totalFrames": 1}, true
	case "scopes":
		return map[string]any{"scopes": []any{map[string]any{"name": "Locals", "variablesReference": 3}}}, true
	case "variables":
		if ref := toInt(args["variablesReference"]); ref != 3 {
			return map[string]any{"error": fmt.Sprintf("unknown reference %d", ref)}, false
		}
		return map[string]any{"variables": []any{map[string]any{"name": "pid", "value": strconv.Itoa(p.cfg.PID),
			"variablesReference": 0}}}, true
	case "evaluate":
		if fid := toInt(args["frameId"]); fid != 2 {
			return map[string]any{"error": fmt.Sprintf("unknown frame %d", fid)}, false
		}
		return map[string]any{"result": strconv.Itoa(p.cfg.PID), "variablesReference": 0}, true
	case "continue":
		return map[string]any{"allThreadsContinued": true}, true
	}
	if p.cfg.EchoUnknown {
		return map[string]any{"echo": args}, true
	}
	return map[string]any{"error": "unsupported command " + m.Command}, false
}
