package vscodeclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// InitializeArgs are the initialize arguments VS Code 1.139 (code-server)
// sends, root and child sessions alike.
func InitializeArgs() map[string]any {
	return map[string]any{
		"clientID": "vscode", "clientName": "code-server", "adapterID": "debugpy",
		"pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true,
		"supportsVariableType": true, "supportsVariablePaging": true,
		"supportsRunInTerminalRequest": true, "locale": "en",
		"supportsProgressReporting": true, "supportsInvalidatedEvent": true,
		"supportsMemoryReferences": true, "supportsArgsCanBeInterpretedByShell": true,
		"supportsMemoryEvent": true, "supportsStartDebuggingRequest": true,
		"supportsANSIStyling": true,
	}
}

// requestTimeout bounds each request VS Code makes by itself (configuring,
// showing a stop); a proxy that never answers fails the step, not the test
// process.
const requestTimeout = 30 * time.Second

// disconnectTimeout is how long VS Code waits for the answer to disconnect
// before it closes the connection anyway.
const disconnectTimeout = 2 * time.Second

// Options configure an IDE.
type Options struct {
	// Workspace is the folder VS Code has open (workspaceFolder).
	Workspace string
	// Trace, if set, logs every message of every session.
	Trace func(format string, args ...any)
}

// IDE is one VS Code window: the editor's breakpoints and every debug
// session it has open. Safe for concurrent use.
type IDE struct {
	opts Options
	life context.Context
	stop context.CancelFunc

	mu  sync.Mutex
	bps map[string][]int // local path → lines set in the editor
	// conditions are the breakpoints' conditions, by local path and line
	// (none: the breakpoint stops unconditionally).
	conditions map[string]map[int]string
	sessions   []*Session

	stops    chan *Stop
	children chan *Session
	wg       sync.WaitGroup
}

// New returns an IDE with no sessions.
func New(o Options) *IDE {
	life, stop := context.WithCancel(context.Background())
	return &IDE{opts: o, life: life, stop: stop, bps: map[string][]int{},
		stops: make(chan *Stop, 256), children: make(chan *Session, 256)}
}

// Close ends every session's connection (as closing the window does, with
// no disconnect) and waits for the IDE's goroutines.
func (ide *IDE) Close() {
	ide.stop()
	for _, s := range ide.Sessions() {
		s.Client.Close()
	}
	ide.wg.Wait()
}

// Sessions lists every session ever started, root first.
func (ide *IDE) Sessions() []*Session {
	ide.mu.Lock()
	defer ide.mu.Unlock()
	return append([]*Session(nil), ide.sessions...)
}

// Stops delivers each stop as VS Code shows it (after its threads,
// stackTrace, scopes and variables requests). It holds up to 256 unread
// stops; more are dropped.
func (ide *IDE) Stops() <-chan *Stop { return ide.stops }

// Children delivers each child session once its attach was answered. It
// holds up to 256 unread sessions; more are dropped from the channel (not
// from Sessions).
func (ide *IDE) Children() <-chan *Session { return ide.children }

// SetBreakpoints sets the editor's breakpoints of a file before any
// session starts; sessions send them when they configure themselves.
func (ide *IDE) SetBreakpoints(path string, lines ...int) {
	ide.mu.Lock()
	defer ide.mu.Unlock()
	delete(ide.conditions, path)
	if len(lines) == 0 {
		delete(ide.bps, path)
		return
	}
	ide.bps[path] = append([]int(nil), lines...)
}

// SetConditionalBreakpoint adds a breakpoint with a condition (the
// editor's "Edit Condition…") to a file's breakpoints before any session
// starts: VS Code sends it as {"line": N, "condition": "…"}.
func (ide *IDE) SetConditionalBreakpoint(path string, line int, condition string) {
	ide.mu.Lock()
	defer ide.mu.Unlock()
	if !slices.Contains(ide.bps[path], line) {
		ide.bps[path] = append(ide.bps[path], line)
	}
	if ide.conditions == nil {
		ide.conditions = map[string]map[int]string{}
	}
	if ide.conditions[path] == nil {
		ide.conditions[path] = map[int]string{}
	}
	ide.conditions[path][line] = condition
}

// EditBreakpoints changes a file's breakpoints in the editor while
// debugging: VS Code sends the file's new breakpoints to every live
// session. It returns the first session's answer.
func (ide *IDE) EditBreakpoints(ctx context.Context, path string, lines ...int) ([]dap.Breakpoint, error) {
	ide.SetBreakpoints(path, lines...)
	var first []dap.Breakpoint
	var firstErr error
	got := false
	for _, s := range ide.Sessions() {
		if s.Ended() {
			continue
		}
		var body dap.SetBreakpointsResponseBody
		err := s.Client.Call(ctx, "setBreakpoints", setBreakpointsArgs(path, lines, nil), &body)
		if !got {
			first, firstErr, got = body.Breakpoints, err, true
		}
	}
	return first, firstErr
}

func setBreakpointsArgs(path string, lines []int, conditions map[int]string) map[string]any {
	bps := make([]any, len(lines))
	ls := make([]any, len(lines))
	for i, l := range lines {
		bp := map[string]any{"line": l}
		if c := conditions[l]; c != "" {
			bp["condition"] = c
		}
		bps[i] = bp
		ls[i] = l
	}
	return map[string]any{"source": map[string]any{"name": filepath.Base(path), "path": path},
		"lines": ls, "breakpoints": bps, "sourceModified": false}
}

// Attach starts the root session from a launch.json attach configuration
// (with "connect"), as pressing F5 does, and returns once it is configured
// (configurationDone answered).
func (ide *IDE) Attach(ctx context.Context, config map[string]any) (*Session, error) {
	cfg := deepCopy(config)
	addr, err := connectAddr(cfg)
	if err != nil {
		return nil, err
	}
	// What VS Code and the Python Debugger extension add.
	cfg["clientOS"] = "unix"
	cfg["debugOptions"] = []any{"RedirectOutput", "ShowReturnValue"}
	cfg["showReturnValue"] = true
	if ide.opts.Workspace != "" {
		cfg["workspaceFolder"] = ide.opts.Workspace
	}
	cfg["__configurationTarget"] = 6
	if _, ok := cfg["type"]; !ok {
		cfg["type"] = "debugpy"
	}
	if _, ok := cfg["request"]; !ok {
		cfg["request"] = "attach"
	}
	s, err := ide.start(ctx, nil, addr, cfg, "")
	if err != nil {
		return nil, err
	}
	select {
	case err := <-s.configured:
		return s, err
	case <-ctx.Done():
		return s, fmt.Errorf("vscodeclient: configuring the root session: %w", ctx.Err())
	}
}

// connectAddr is host:port of a configuration's connect.
func connectAddr(cfg map[string]any) (string, error) {
	c, _ := cfg["connect"].(map[string]any)
	if c == nil {
		return "", fmt.Errorf("vscodeclient: configuration has no connect: %v", cfg)
	}
	host, _ := c["host"].(string)
	if host == "" {
		host = "127.0.0.1"
	}
	var port string
	switch p := c["port"].(type) {
	case json.Number:
		port = p.String()
	case float64:
		port = strconv.Itoa(int(p))
	case int:
		port = strconv.Itoa(p)
	case string:
		port = p
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("vscodeclient: configuration's connect has no port: %v", c)
	}
	return net.JoinHostPort(host, port), nil
}

// Session is one debug session (one DAP connection).
type Session struct {
	ide    *IDE
	ID     string
	Name   string
	Type   string
	Parent *Session
	// Addr is where the session connected.
	Addr   string
	Client *dapclient.Client
	// Config is the attach arguments it sent.
	Config map[string]any

	caps       map[string]any
	configured chan error // one value: the outcome of configuring
	ended      chan struct{}
	endOnce    sync.Once
	terminated atomic.Bool
	shutting   atomic.Bool

	mu          sync.Mutex
	disconnects []map[string]any
	// breakpointIDs are the ids this session's setBreakpoints answers
	// gave, by file: what a stop's hitBreakpointIds must name.
	breakpointIDs map[string][]int
}

// BreakpointIDs lists the ids the adapter gave this session's breakpoints
// in path when the session was configured.
func (s *Session) BreakpointIDs(path string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.breakpointIDs[path])
}

// Ended reports whether the session is over (its connection is gone).
func (s *Session) Ended() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// Done is closed when the session is over.
func (s *Session) Done() <-chan struct{} { return s.ended }

// Terminated reports whether the adapter sent this session terminated
// (whether or not VS Code has acted on it yet).
func (s *Session) Terminated() bool {
	if s.terminated.Load() {
		return true
	}
	for _, ev := range s.Client.Events() {
		if ev.Event == "terminated" {
			return true
		}
	}
	return false
}

// Capabilities is the adapter's answer to initialize.
func (s *Session) Capabilities() map[string]any { return s.caps }

// Disconnects lists the arguments of every disconnect this session sent.
func (s *Session) Disconnects() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.disconnects...)
}

// Disconnect is the toolbar's Disconnect (Shift+F5 in an attach session):
// the arguments it sent.
func (s *Session) Disconnect() map[string]any {
	f := false
	return s.shutdown(false, &f, &f)
}

// Stop is the toolbar's Stop (Disconnect with Alt in an attach session):
// VS Code terminates the debuggee where the adapter supports it; for an
// attach session that is a disconnect asking to terminate it.
func (s *Session) Stop() map[string]any {
	t := true
	return s.shutdown(false, &t, nil)
}

// Restart is the toolbar's Restart in a session of an adapter without
// supportsRestartRequest: VS Code terminates the session as for a restart
// (disconnect {restart: true}, terminateDebuggee only where advertised),
// waits 300 ms and starts it again from the same configuration on a new
// connection. VS Code keeps the session object; here the new connection is
// a new Session, with the same ID, returned once configured. Only a root
// session can be restarted: a child's configuration names a one-time
// child key.
func (s *Session) Restart(ctx context.Context) (*Session, error) {
	if s.Parent != nil {
		return nil, errors.New("vscodeclient: restart a root session, not a child")
	}
	t := true
	s.shutdown(true, &t, nil)
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cfg := deepCopy(s.Config)
	n, err := s.ide.start(ctx, nil, s.Addr, cfg, s.ID)
	if err != nil {
		return nil, err
	}
	select {
	case err := <-n.configured:
		return n, err
	case <-ctx.Done():
		return n, fmt.Errorf("vscodeclient: configuring the restarted session: %w", ctx.Err())
	}
}

// shutdown is VS Code's RawDebugSession.disconnect: terminateDebuggee and
// suspendDebuggee only where the adapter advertised them, a bounded wait
// for the answer, then the connection is closed.
func (s *Session) shutdown(restart bool, terminate, suspend *bool) map[string]any {
	if !s.shutting.CompareAndSwap(false, true) {
		return nil
	}
	args := map[string]any{"restart": restart}
	if terminate != nil && s.capBool("supportTerminateDebuggee") {
		args["terminateDebuggee"] = *terminate
	}
	if suspend != nil && s.capBool("supportTerminateDebuggee") && s.capBool("supportSuspendDebuggee") {
		args["suspendDebuggee"] = *suspend
	}
	s.mu.Lock()
	s.disconnects = append(s.disconnects, args)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), disconnectTimeout)
	defer cancel()
	_, _ = s.Client.Request(ctx, "disconnect", args)
	s.Client.Close()
	s.end()
	return args
}

func (s *Session) capBool(name string) bool {
	v, _ := s.caps[name].(bool)
	return v
}

func (s *Session) end() { s.endOnce.Do(func() { close(s.ended) }) }

// Continue resumes a thread as the Continue button does.
func (s *Session) Continue(ctx context.Context, threadID int) error {
	return s.Client.Continue(ctx, threadID)
}

// start opens a session: connection, initialize, attach; configuring
// follows the initialized event on a goroutine of its own.
func (ide *IDE) start(ctx context.Context, parent *Session, addr string, cfg map[string]any, id string) (*Session, error) {
	name, _ := cfg["name"].(string)
	typ, _ := cfg["type"].(string)
	if id == "" {
		id = newSessionID()
	}
	s := &Session{ide: ide, ID: id, Name: name, Type: typ, Parent: parent, Addr: addr,
		configured: make(chan error, 1), ended: make(chan struct{})}
	cfg["__sessionId"] = s.ID
	s.Config = cfg
	c, err := dapclient.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("vscodeclient: session %q: %w", name, err)
	}
	s.Client = c
	if ide.opts.Trace != nil {
		prefix := "vscode[" + name + "]"
		c.SetTrace(func(format string, args ...any) { ide.opts.Trace(prefix+" "+format, args...) })
	}
	c.OnReverseRequest(func(command string, args json.RawMessage) (bool, any) {
		if command != "startDebugging" {
			return false, nil
		}
		return ide.startChild(s, args)
	})
	ide.mu.Lock()
	ide.sessions = append(ide.sessions, s)
	ide.mu.Unlock()
	fail := func(err error) (*Session, error) {
		c.Close()
		s.end()
		return nil, fmt.Errorf("vscodeclient: session %q at %s: %w", name, addr, err)
	}
	resp, err := c.Request(ctx, "initialize", InitializeArgs())
	if err != nil {
		return fail(err)
	}
	if err := resp.Err(); err != nil {
		return fail(err)
	}
	if err := resp.Decode(&s.caps); err != nil {
		return fail(err)
	}
	ide.wg.Add(3)
	go func() {
		defer ide.wg.Done()
		<-c.Done()
		s.end()
	}()
	go ide.onTerminated(s)
	go ide.onStops(s)
	attach, err := c.Send(ctx, "attach", cfg)
	if err != nil {
		return fail(err)
	}
	ide.wg.Add(1)
	go func() {
		defer ide.wg.Done()
		if _, err := c.WaitEvent(ide.life, "initialized", nil); err != nil {
			s.configured <- err
			return
		}
		s.configured <- ide.configure(s)
	}()
	r, err := attach.Wait(ctx)
	if err != nil {
		return fail(err)
	}
	if err := r.Err(); err != nil {
		return fail(err)
	}
	return s, nil
}

// configure is what VS Code sends once a session is initialized: every
// file's breakpoints, function and exception breakpoints, all at once;
// then configurationDone and threads.
func (ide *IDE) configure(s *Session) error {
	ctx, cancel := context.WithTimeout(ide.life, requestTimeout)
	defer cancel()
	ide.mu.Lock()
	paths := make([]string, 0, len(ide.bps))
	for p := range ide.bps {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var sent []*dapclient.Pending
	for _, p := range paths {
		pend, err := s.Client.Send(ctx, "setBreakpoints", setBreakpointsArgs(p, ide.bps[p], ide.conditions[p]))
		if err != nil {
			ide.mu.Unlock()
			return err
		}
		sent = append(sent, pend)
	}
	bpSent := len(sent) // sent[:bpSent] answer paths[i]
	ide.mu.Unlock()
	filters := []any{}
	if fs, ok := s.caps["exceptionBreakpointFilters"].([]any); ok {
		for _, f := range fs {
			if m, ok := f.(map[string]any); ok && m["default"] == true {
				filters = append(filters, m["filter"])
			}
		}
	}
	for _, req := range []struct {
		cmd  string
		args map[string]any
	}{
		{"setFunctionBreakpoints", map[string]any{"breakpoints": []any{}}},
		{"setExceptionBreakpoints", map[string]any{"filters": filters}},
	} {
		pend, err := s.Client.Send(ctx, req.cmd, req.args)
		if err != nil {
			return err
		}
		sent = append(sent, pend)
	}
	for i, p := range sent {
		r, err := p.Wait(ctx)
		if err != nil {
			return err
		}
		if err := r.Err(); err != nil {
			return err
		}
		if i < bpSent {
			var body dap.SetBreakpointsResponseBody
			if err := r.Decode(&body); err != nil {
				return fmt.Errorf("setBreakpoints %s: %w", paths[i], err)
			}
			ids := make([]int, 0, len(body.Breakpoints))
			for _, bp := range body.Breakpoints {
				ids = append(ids, bp.Id)
			}
			s.mu.Lock()
			if s.breakpointIDs == nil {
				s.breakpointIDs = map[string][]int{}
			}
			s.breakpointIDs[paths[i]] = ids
			s.mu.Unlock()
		}
	}
	if err := s.Client.ConfigurationDone(ctx); err != nil {
		return err
	}
	_, err := s.Client.Threads(ctx)
	return err
}

// startChild answers a startDebugging reverse request as VS Code does: a
// new session of the parent's type, with the configuration given, on a
// connection of its own to the configuration's connect address.
func (ide *IDE) startChild(parent *Session, raw json.RawMessage) (bool, any) {
	var req struct {
		Request       string         `json:"request"`
		Configuration map[string]any `json:"configuration"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&req); err != nil || req.Configuration == nil {
		return false, nil
	}
	cfg := deepCopy(req.Configuration)
	cfg["type"] = parent.Type
	cfg["request"] = req.Request
	addr, err := connectAddr(cfg)
	if err != nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ide.life, requestTimeout)
	defer cancel()
	s, err := ide.start(ctx, parent, addr, cfg, "")
	if err != nil {
		if ide.opts.Trace != nil {
			ide.opts.Trace("vscodeclient: child session: %v", err)
		}
		return false, nil
	}
	select {
	case ide.children <- s:
	default:
	}
	return true, nil
}

// onTerminated: VS Code answers terminated with disconnect (asking not to
// terminate the debuggee, where that is understood) and ends the session.
func (ide *IDE) onTerminated(s *Session) {
	defer ide.wg.Done()
	if _, err := s.Client.WaitEvent(ide.life, "terminated", nil); err != nil {
		return
	}
	s.terminated.Store(true)
	f := false
	s.shutdown(false, &f, nil)
}

// Stop is a stop as VS Code shows it.
type Stop struct {
	Session *Session
	Event   dap.StoppedEventBody
	Thread  string // the stopped thread's name
	Frames  []dap.StackFrame
	Scopes  []dap.Scope
	Locals  map[string]string // the first scope's variables
	Err     error             // a request VS Code made failed
}

// Top is the innermost frame, or a zero frame.
func (st *Stop) Top() dap.StackFrame {
	if len(st.Frames) == 0 {
		return dap.StackFrame{}
	}
	return st.Frames[0]
}

// onStops shows every stop of the session, in order.
func (ide *IDE) onStops(s *Session) {
	defer ide.wg.Done()
	for {
		ev, err := s.Client.WaitEvent(ide.life, "stopped", nil)
		if err != nil {
			return
		}
		st := &Stop{Session: s, Locals: map[string]string{}}
		if err := ev.Decode(&st.Event); err != nil {
			st.Err = err
		} else {
			st.Err = ide.show(s, st)
		}
		if errors.Is(st.Err, dapclient.ErrClosed) {
			continue // the session ended while VS Code looked
		}
		select {
		case ide.stops <- st:
		default:
		}
	}
}

// show makes the requests VS Code makes for a stop.
func (ide *IDE) show(s *Session, st *Stop) error {
	ctx, cancel := context.WithTimeout(ide.life, requestTimeout)
	defer cancel()
	c := s.Client
	threads, err := c.Threads(ctx)
	if err != nil {
		return err
	}
	for _, th := range threads {
		if th.Id == st.Event.ThreadId {
			st.Thread = th.Name
		}
	}
	var top dap.StackTraceResponseBody
	if err := c.Call(ctx, "stackTrace", map[string]any{"threadId": st.Event.ThreadId, "startFrame": 0, "levels": 1}, &top); err != nil {
		return err
	}
	st.Frames = top.StackFrames
	if len(st.Frames) == 0 {
		return nil
	}
	var rest *dapclient.Pending
	if top.TotalFrames > 1 {
		if rest, err = c.Send(ctx, "stackTrace", map[string]any{"threadId": st.Event.ThreadId, "startFrame": 1, "levels": 19}); err != nil {
			return err
		}
	}
	var scopes dap.ScopesResponseBody
	if err := c.Call(ctx, "scopes", map[string]any{"frameId": st.Frames[0].Id}, &scopes); err != nil {
		return err
	}
	st.Scopes = scopes.Scopes
	if rest != nil {
		r, err := rest.Wait(ctx)
		if err != nil {
			return err
		}
		var more dap.StackTraceResponseBody
		if err := r.Err(); err != nil {
			return err
		}
		if err := r.Decode(&more); err != nil {
			return err
		}
		st.Frames = append(st.Frames, more.StackFrames...)
	}
	if len(st.Scopes) > 0 {
		vars, err := c.Variables(ctx, st.Scopes[0].VariablesReference)
		if err != nil {
			return err
		}
		for _, v := range vars {
			st.Locals[v.Name] = v.Value
		}
	}
	return nil
}

func deepCopy(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("vscodeclient: configuration %v: %v", m, err))
	}
	out := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&out)
	return out
}

// newSessionID is a random UUID, as VS Code names sessions.
func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
