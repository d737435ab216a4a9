package dapclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// ErrClosed is returned once the connection is gone, whether Close was
// called or the adapter hung up.
var ErrClosed = errors.New("dapclient: connection closed")

// Response is a response from the adapter to one of our requests.
type Response struct {
	Seq        int             `json:"seq"`
	RequestSeq int             `json:"request_seq"`
	Command    string          `json:"command"`
	Success    bool            `json:"success"`
	Message    string          `json:"message,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
}

// Err turns an unsuccessful response into an error naming the command.
func (r *Response) Err() error {
	if r.Success {
		return nil
	}
	return fmt.Errorf("dapclient: %s failed: %s (body %s)", r.Command, r.Message, r.Body)
}

// Decode unmarshals the body into v, typically a go-dap body struct such as
// *dap.StackTraceResponseBody.
func (r *Response) Decode(v any) error {
	return decodeBody(r.Command+" response", r.Body, v)
}

// Event is an event sent by the adapter.
type Event struct {
	Seq   int             `json:"seq"`
	Event string          `json:"event"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// Decode unmarshals the body into v, typically a go-dap body struct such as
// *dap.StoppedEventBody.
func (e *Event) Decode(v any) error {
	return decodeBody(e.Event+" event", e.Body, v)
}

func decodeBody(what string, body json.RawMessage, v any) error {
	if len(body) == 0 {
		body = json.RawMessage("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("dapclient: decode %s body %s: %w", what, body, err)
	}
	return nil
}

// ReverseHandler answers a request sent by the adapter. body is marshalled
// into the response; it may be nil.
type ReverseHandler func(command string, args json.RawMessage) (success bool, body any)

// Client is one DAP connection. All methods are safe for concurrent use.
type Client struct {
	conn net.Conn

	// life is cancelled by Close so that reverse-request handlers that do
	// slow work (following a child session) stop with the connection.
	life       context.Context
	cancelLife context.CancelFunc

	wmu sync.Mutex // one frame at a time on the wire; also guards seq
	seq int

	mu      sync.Mutex
	pending map[int]*Pending
	events  []logged
	changed chan struct{} // closed and replaced whenever events or readErr change
	readErr error
	reverse ReverseHandler

	trace atomic.Pointer[func(format string, args ...any)]

	readerDone chan struct{}
	handlers   sync.WaitGroup
	closeOnce  sync.Once
}

type logged struct {
	ev    *Event
	taken bool
}

// Dial connects to a DAP server at addr (host:port).
func Dial(ctx context.Context, addr string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dapclient: dial %s: %w", addr, err)
	}
	return New(conn), nil
}

// New runs a client over an established connection and takes ownership of it.
func New(conn net.Conn) *Client {
	life, cancel := context.WithCancel(context.Background())
	c := &Client{
		conn:       conn,
		life:       life,
		cancelLife: cancel,
		pending:    map[int]*Pending{},
		changed:    make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// SetTrace logs every frame in both directions through logf (t.Logf works
// if the client is closed before the test ends). nil turns tracing off.
func (c *Client) SetTrace(logf func(format string, args ...any)) {
	if logf == nil {
		c.trace.Store(nil)
		return
	}
	c.trace.Store(&logf)
}

func (c *Client) tracef(format string, args ...any) {
	if p := c.trace.Load(); p != nil {
		(*p)(format, args...)
	}
}

// OnReverseRequest installs the handler for requests the adapter sends us.
// Install it before Initialize: adapters only send reverse requests after
// learning our capabilities, and one that arrives with no handler is
// answered success:false. Each request runs the handler on its own
// goroutine, so a handler may block (e.g. to open a child session) without
// stalling this connection.
func (c *Client) OnReverseRequest(h ReverseHandler) {
	c.mu.Lock()
	c.reverse = h
	c.mu.Unlock()
}

// Close closes the connection and waits for the reader and any running
// reverse-request handlers to finish. Pending requests and waiters fail
// with ErrClosed.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.cancelLife()
		err = c.conn.Close()
		<-c.readerDone
		c.handlers.Wait()
	})
	return err
}

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.readerDone }

// Pending is a request whose response has not necessarily arrived yet.
type Pending struct {
	Command string
	Seq     int
	done    chan struct{}
	resp    *Response
	err     error
}

// Wait blocks until the response arrives, the connection drops or ctx ends.
func (p *Pending) Wait(ctx context.Context) (*Response, error) {
	select {
	case <-p.done:
		return p.resp, p.err
	case <-ctx.Done():
		return nil, fmt.Errorf("dapclient: waiting for %s response (seq %d): %w", p.Command, p.Seq, ctx.Err())
	}
}

// Send writes a request and returns without waiting for the response. It is
// needed where the adapter answers out of order, e.g. debugpy answers
// attach only after configurationDone.
func (c *Client) Send(ctx context.Context, command string, args any) (*Pending, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.seq++
	p := &Pending{Command: command, Seq: c.seq, done: make(chan struct{})}

	c.mu.Lock()
	if c.readErr != nil {
		err := c.readErr
		c.mu.Unlock()
		return nil, fmt.Errorf("dapclient: send %s: %w", command, err)
	}
	c.pending[p.Seq] = p
	c.mu.Unlock()

	msg := map[string]any{"seq": p.Seq, "type": "request", "command": command}
	if args != nil {
		msg["arguments"] = args
	}
	if err := c.writeLocked(ctx, msg); err != nil {
		c.mu.Lock()
		delete(c.pending, p.Seq)
		c.mu.Unlock()
		return nil, fmt.Errorf("dapclient: send %s: %w", command, err)
	}
	return p, nil
}

// Request sends a request and waits for its response. An unsuccessful
// response is not an error here; see Call for that.
func (c *Client) Request(ctx context.Context, command string, args any) (*Response, error) {
	p, err := c.Send(ctx, command, args)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Call sends a request, fails unless the response is successful, and decodes
// its body into body unless body is nil.
func (c *Client) Call(ctx context.Context, command string, args, body any) error {
	resp, err := c.Request(ctx, command, args)
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	return resp.Decode(body)
}

// writeLocked writes one frame in a single Write so that the header and body
// never travel in separate segments. Caller holds wmu.
func (c *Client) writeLocked(ctx context.Context, msg any) error {
	content, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("marshal: %w", err)
	}
	frame := dapwire.AppendFrame(nil, content)
	// A peer that stops reading must not wedge us past the caller's deadline.
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetWriteDeadline(dl)
		defer c.conn.SetWriteDeadline(time.Time{})
	}
	c.tracef("dapclient -> %s", content)
	_, err = c.conn.Write(frame)
	return err
}

// Envelope is any DAP message read off the wire: the fields of requests,
// responses and events side by side, bodies and arguments left raw for the
// caller to decode into what it expects.
type Envelope struct {
	Seq        int             `json:"seq"`
	Type       string          `json:"type"`
	Command    string          `json:"command"`
	Event      string          `json:"event"`
	RequestSeq int             `json:"request_seq"`
	Success    bool            `json:"success"`
	Message    string          `json:"message"`
	Body       json.RawMessage `json:"body"`
	Arguments  json.RawMessage `json:"arguments"`
}

func (c *Client) readLoop() {
	defer close(c.readerDone)
	fr := dapwire.NewFrameReader(c.conn, dapwire.DefaultMaxMessageBytes)
	var err error
	for {
		var content []byte
		content, err = fr.ReadFrame()
		if err != nil {
			break
		}
		c.tracef("dapclient <- %s", content)
		var m Envelope
		if m, err = DecodeEnvelope(content); err != nil {
			err = fmt.Errorf("dapclient: malformed message %q: %w", content, err)
			break
		}
		switch m.Type {
		case "response":
			c.deliver(&Response{Seq: m.Seq, RequestSeq: m.RequestSeq, Command: m.Command,
				Success: m.Success, Message: m.Message, Body: m.Body})
		case "event":
			c.logEvent(&Event{Seq: m.Seq, Event: m.Event, Body: m.Body})
		case "request":
			c.handleReverse(m.Seq, m.Command, m.Arguments)
		default:
			c.tracef("dapclient: ignoring message of type %q", m.Type)
		}
	}
	c.fail(err)
}

// fail records why the connection ended and releases everyone waiting on it.
func (c *Client) fail(err error) {
	reason := fmt.Errorf("%w: %w", ErrClosed, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readErr = reason
	for seq, p := range c.pending {
		p.err = fmt.Errorf("dapclient: waiting for %s response (seq %d): %w", p.Command, seq, reason)
		close(p.done)
		delete(c.pending, seq)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Client) deliver(resp *Response) {
	c.mu.Lock()
	p, ok := c.pending[resp.RequestSeq]
	delete(c.pending, resp.RequestSeq)
	c.mu.Unlock()
	if !ok {
		c.tracef("dapclient: response to unknown request_seq %d (%s)", resp.RequestSeq, resp.Command)
		return
	}
	p.resp = resp
	close(p.done)
}

func (c *Client) logEvent(ev *Event) {
	c.mu.Lock()
	c.events = append(c.events, logged{ev: ev})
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Client) handleReverse(seq int, command string, args json.RawMessage) {
	c.mu.Lock()
	h := c.reverse
	c.mu.Unlock()
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		success, body := false, any(nil)
		if h != nil {
			success, body = h(command, args)
		}
		msg := map[string]any{"type": "response", "request_seq": seq, "command": command, "success": success}
		if body != nil {
			msg["body"] = body
		}
		if !success {
			msg["message"] = "not supported by dapclient"
		}
		c.wmu.Lock()
		defer c.wmu.Unlock()
		c.seq++
		msg["seq"] = c.seq
		ctx, cancel := context.WithTimeout(c.life, 10*time.Second)
		defer cancel()
		if err := c.writeLocked(ctx, msg); err != nil {
			c.tracef("dapclient: answering reverse %s: %v", command, err)
		}
	}()
}

// WaitEvent returns the oldest event named event that match accepts (nil
// accepts all) and that no earlier WaitEvent returned. Events are logged
// from the moment the connection opens, so an event that arrived before the
// call is found too; each is handed out at most once, so concurrent waiters
// for the same event get distinct ones.
func (c *Client) WaitEvent(ctx context.Context, event string, match func(body json.RawMessage) bool) (*Event, error) {
	for {
		c.mu.Lock()
		for i := range c.events {
			l := &c.events[i]
			if l.taken || l.ev.Event != event || (match != nil && !match(l.ev.Body)) {
				continue
			}
			l.taken = true
			c.mu.Unlock()
			return l.ev, nil
		}
		readErr, changed := c.readErr, c.changed
		c.mu.Unlock()
		if readErr != nil {
			return nil, fmt.Errorf("dapclient: waiting for %s event: %w", event, readErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("dapclient: waiting for %s event: %w", event, ctx.Err())
		}
	}
}

// Events returns every event received so far, in order, whether or not a
// WaitEvent took it. Use it to assert that something did NOT happen.
func (c *Client) Events() []*Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Event, len(c.events))
	for i, l := range c.events {
		out[i] = l.ev
	}
	return out
}
