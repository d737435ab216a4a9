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
// debuggees, where real debugpy processes would cost ~30 MB each. It does
// not import the proxy, so it can test any adapter. Each peer costs one
// goroutine and a 4 KiB read buffer; writes are one frame per Write call
// (header and body together), so it has none of pydevd's Nagle stalls.
package fakepydevd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
}

// Peer is one fake pydevd connection.
type Peer struct {
	conn net.Conn
	cfg  Config

	wmu sync.Mutex
	seq int64

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
	p := &Peer{conn: conn, cfg: cfg, configured: make(chan struct{}), done: make(chan struct{})}
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
func (p *Peer) Stop() error {
	return p.Event("stopped", map[string]any{"reason": "breakpoint", "threadId": 1, "allThreadsStopped": true,
		"hitBreakpointIds": []any{0}})
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
	var buf bytes.Buffer
	buf.Grow(len(o.body) + 96)
	body := []byte(`{"seq":` + strconv.FormatInt(p.seq, 10) + `,"type":"event","event":"output","body":`)
	body = append(body, o.body...)
	body = append(body, '}')
	buf.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	buf.Write(body)
	_, err := p.conn.Write(buf.Bytes())
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
	frame := make([]byte, 0, len(body)+32)
	frame = append(frame, "Content-Length: "...)
	frame = strconv.AppendInt(frame, int64(len(body)), 10)
	frame = append(frame, "\r\n\r\n"...)
	frame = append(frame, body...)
	_, err = p.conn.Write(frame)
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
	br := bufio.NewReaderSize(p.conn, 4096)
	for {
		body, err := readFrame(br, p.cfg.MaxFrameBytes)
		if err != nil {
			p.err = err
			return
		}
		var m request
		if err := json.Unmarshal(body, &m); err != nil {
			p.err = fmt.Errorf("fakepydevd: malformed message %q: %w", body, err)
			return
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
		if err := p.send(resp); err != nil {
			p.err = err
			return
		}
		switch m.Command {
		case "configurationDone":
			p.confOnce.Do(func() { close(p.configured) })
			_ = p.Event("thread", map[string]any{"reason": "started", "threadId": 1})
		case "continue":
			_ = p.Event("continued", map[string]any{"threadId": 1, "allThreadsContinued": true})
		}
	}
}

// readFrame reads one Content-Length framed message.
func readFrame(br *bufio.Reader, max int) ([]byte, error) {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, errors.New("fakepydevd: header line too long")
			}
			return nil, err
		}
		s := strings.TrimRight(string(line), "\r\n")
		if s == "" {
			break
		}
		if k, v, ok := strings.Cut(s, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
			if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 {
				return nil, fmt.Errorf("fakepydevd: bad Content-Length %q", v)
			}
		}
	}
	if n < 0 {
		return nil, errors.New("fakepydevd: frame without Content-Length")
	}
	if n > max {
		return nil, fmt.Errorf("fakepydevd: %d-byte frame over the %d-byte limit", n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	return body, nil
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
		for _, b := range bps {
			bm, _ := b.(map[string]any)
			id := p.bpNext.Add(1) - 1 // pydevd's breakpoint ids start at 0
			out = append(out, map[string]any{"id": id, "verified": true, "line": toInt(bm["line"]),
				"source": map[string]any{"path": path}})
		}
		return map[string]any{"breakpoints": out}, true
	case "threads":
		return map[string]any{"threads": []any{map[string]any{"id": 1, "name": "MainThread"}}}, true
	case "stackTrace":
		if tid := toInt(args["threadId"]); tid != 1 {
			return map[string]any{"error": fmt.Sprintf("unknown thread %d", tid)}, false
		}
		return map[string]any{"stackFrames": []any{map[string]any{"id": 2, "name": "compute", "line": 5,
			"column": 1, "source": map[string]any{"path": p.cfg.FramePath}}}, "totalFrames": 1}, true
	case "scopes":
		return map[string]any{"scopes": []any{map[string]any{"name": "Locals", "variablesReference": 3}}}, true
	case "variables":
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
	return map[string]any{"error": "unsupported command " + m.Command}, false
}
