// Package pycharmtest is a test double of PyCharm's "Python Debug Server":
// it listens, accepts one debuggee connection (pydevd, or the sparkdap proxy
// standing in for many) and speaks pydevd's line protocol to it as
// PyCharm's RemoteDebugger does (see /work/shared/notes: what PyCharm sends
// and parses, read from JetBrains/intellij-community's RemoteDebugger,
// PyDebugProcess and the command classes):
//
//   - Start does what PyDebugProcess does after accepting: CMD_VERSION with
//     two fields ("1.1\tUNIX", so pydevd uses its by-line breakpoint layout),
//     the line breakpoints (suspend policy ALL unless told otherwise),
//     SHOW_RETURN_VALUES, then CMD_RUN.
//   - Like RemoteDebugger.processResponse it keeps a thread table that only
//     CMD_THREAD_CREATE names (ids "-1" ignored), CMD_THREAD_KILL removes and
//     suspends of never-created threads are recorded as anomalies
//     ("Trying to stop on non-existent thread").
//   - CMD_EXIT (129) drops the whole session, as fireCommunicationError does
//     in PyRemoteDebugProcess: the double closes the connection and every
//     later wait fails with ErrSessionDropped.
//   - Any other message that answers no request of the double's is what
//     PyCharm drops silently; the double records it (Strays) so tests can
//     assert the proxy sends none.
package pycharmtest

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/sparkdap/sparkdap/pycharm"
)

// ErrSessionDropped is returned by waits after the debuggee sent CMD_EXIT:
// PyCharm tears the session down on it.
var ErrSessionDropped = errors.New("PyCharm dropped the session: the debuggee sent CMD_EXIT (129)")

// Command ids PyCharm's RemoteDebugger dispatches as events rather than as
// answers (AbstractThreadCommand.isThreadCommand, isWriteToConsole,
// isExitEvent, isCallSignatureTrace, isConcurrencyEvent, isInputRequested,
// ProcessCreatedCommand, isShowWarningCommand).
var pycharmEvents = map[int]bool{
	pycharm.CmdThreadCreate: true, pycharm.CmdThreadKill: true, pycharm.CmdThreadSuspend: true,
	pycharm.CmdThreadRun: true, 142: true, 116: true, cmdExit: true, 130: true, 145: true, 147: true,
	149: true, 150: true,
}

const cmdExit = 129

// Server is one listening debug server. All fields behind mu.
type Server struct {
	ln net.Listener

	mu        sync.Mutex
	conn      net.Conn
	seq       int // PyCharm numbers its requests 1, 3, 5, …
	in        chan pycharm.Message
	backlog   []pycharm.Message
	readErr   error
	dropped   bool
	sent      map[int]bool      // seqs of requests not answered yet
	threads   map[string]string // thread id → name, from CMD_THREAD_CREATE only
	anomalies []string
	strays    []pycharm.Message
	// Log, if set, gets every message both ways.
	Log func(dir string, m pycharm.Message)
}

// Listen listens on a free loopback port.
func Listen() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Server{ln: ln, seq: -1, in: make(chan pycharm.Message, 100000),
		sent: map[int]bool{}, threads: map[string]string{}}, nil
}

// Addr is host:port to give `serve --pycharm`.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close ends the listener and the connection.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
}

// Accept waits for the debuggee's connection.
func (s *Server) Accept(ctx context.Context) error {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := s.ln.Accept()
		ch <- result{c, err}
	}()
	select {
	case <-ctx.Done():
		s.ln.Close()
		return ctx.Err()
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		s.mu.Lock()
		s.conn = r.c
		s.mu.Unlock()
		go s.read(r.c)
		return nil
	}
}

func (s *Server) read(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		m, err := pycharm.ReadMessage(br, pycharm.MaxLineBytes)
		if err == nil && m.ID == cmdExit {
			if s.Log != nil {
				s.Log("<-", m)
			}
			err = ErrSessionDropped
			s.mu.Lock()
			s.dropped = true
			s.mu.Unlock()
			c.Close()
		}
		if err != nil {
			s.mu.Lock()
			s.readErr = err
			s.mu.Unlock()
			close(s.in)
			return
		}
		if s.Log != nil {
			s.Log("<-", m)
		}
		s.dispatch(m)
		s.in <- m
	}
}

// dispatch keeps the thread table and notes what PyCharm would drop.
func (s *Server) dispatch(m pycharm.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.ID {
	case pycharm.CmdThreadCreate:
		ths, _, err := ParseXML(m.Payload)
		if err != nil || len(ths) == 0 {
			s.anomalies = append(s.anomalies, fmt.Sprintf("unparsable thread create %v", m))
			return
		}
		if ths[0].ID != "-1" {
			s.threads[ths[0].ID] = ths[0].Name
		}
	case pycharm.CmdThreadKill:
		delete(s.threads, strings.TrimSpace(pycharm.PyUnquote(m.Payload)))
	case pycharm.CmdThreadSuspend:
		ths, _, err := ParseXML(m.Payload)
		if err != nil || len(ths) == 0 {
			s.anomalies = append(s.anomalies, fmt.Sprintf("unparsable suspend %v", m))
			return
		}
		if _, ok := s.threads[ths[0].ID]; !ok {
			s.anomalies = append(s.anomalies, "Trying to stop on non-existent thread: "+ths[0].ID)
		}
	default:
		if pycharmEvents[m.ID] {
			return
		}
		if s.sent[m.Seq] {
			delete(s.sent, m.Seq)
			return
		}
		s.strays = append(s.strays, m)
	}
}

// Threads is the thread table: id → name as PyCharm would show it.
func (s *Server) Threads() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.threads))
	for k, v := range s.threads {
		out[k] = v
	}
	return out
}

// ThreadName is the name PyCharm shows for a thread, "" if never created.
func (s *Server) ThreadName(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threads[id]
}

// Anomalies lists what PyCharm would log as errors (suspends of threads it
// was never told about, unparsable thread events).
func (s *Server) Anomalies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.anomalies...)
}

// Strays lists the messages PyCharm would have dropped silently: not an
// event it handles, and no answer to a request it made.
func (s *Server) Strays() []pycharm.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pycharm.Message(nil), s.strays...)
}

// Dropped reports whether the debuggee made PyCharm drop the session.
func (s *Server) Dropped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Send sends a command and returns its sequence number.
func (s *Server) Send(id int, fields ...string) (int, error) {
	s.mu.Lock()
	if s.dropped {
		s.mu.Unlock()
		return 0, ErrSessionDropped
	}
	s.seq += 2
	m := pycharm.Message{ID: id, Seq: s.seq, Payload: strings.Join(fields, "\t")}
	s.sent[m.Seq] = true
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return 0, errors.New("not connected")
	}
	if s.Log != nil {
		s.Log("->", m)
	}
	_, err := c.Write(m.Marshal())
	return m.Seq, err
}

// WaitFor returns the first message, in arrival order, that match accepts;
// the others stay queued for later calls.
func (s *Server) WaitFor(ctx context.Context, match func(pycharm.Message) bool) (pycharm.Message, error) {
	s.mu.Lock()
	for i, m := range s.backlog {
		if match(m) {
			s.backlog = append(s.backlog[:i:i], s.backlog[i+1:]...)
			s.mu.Unlock()
			return m, nil
		}
	}
	s.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return pycharm.Message{}, fmt.Errorf("waiting for a message: %w", ctx.Err())
		case m, ok := <-s.in:
			if !ok {
				s.mu.Lock()
				err := s.readErr
				s.mu.Unlock()
				return pycharm.Message{}, fmt.Errorf("connection ended: %w", err)
			}
			if match(m) {
				return m, nil
			}
			s.mu.Lock()
			s.backlog = append(s.backlog, m)
			s.mu.Unlock()
		}
	}
}

// Request sends a command and waits for the answer with its seq.
func (s *Server) Request(ctx context.Context, id int, fields ...string) (pycharm.Message, error) {
	seq, err := s.Send(id, fields...)
	if err != nil {
		return pycharm.Message{}, err
	}
	m, err := s.WaitFor(ctx, func(m pycharm.Message) bool { return m.Seq == seq && !pycharmEvents[m.ID] })
	if err == nil && m.ID == pycharm.CmdError {
		return m, fmt.Errorf("command %d failed: %s", id, pycharm.PyUnquote(m.Payload))
	}
	return m, err
}

// Handshake does what PyCharm does first: CMD_VERSION with two fields
// (version, OS), which leaves pydevd on by-line breakpoints. It returns the
// debugger's version.
func (s *Server) Handshake(ctx context.Context) (string, error) {
	m, err := s.Request(ctx, pycharm.CmdVersion, "1.1", "UNIX")
	if err != nil {
		return "", err
	}
	return pycharm.PyUnquote(m.Payload), nil
}

// Suspend policies of a line breakpoint. PyCharm's default is ALL.
const (
	PolicyAll    = "ALL"
	PolicyThread = "THREAD"
	PolicyNone   = "NONE"
)

// Breakpoint is a line breakpoint as PyCharm sends it.
type Breakpoint struct {
	File string
	Line int
	// Func is the enclosing function PyCharm names (pydevd matches it
	// against the frame's function); "" sends None (any function).
	Func string
	// Policy is the suspend policy; "" is PyCharm's default, ALL.
	Policy    string
	Condition string // "" = None
	LogExpr   string // "" = None
}

func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

// SetBreakpoint sends SET_BREAK in PyCharm's by-line layout: type, file,
// line, function, suspend policy, condition, log expression.
func (s *Server) SetBreakpoint(bp Breakpoint) error {
	policy := bp.Policy
	if policy == "" {
		policy = PolicyAll
	}
	_, err := s.Send(pycharm.CmdSetBreak, "python-line", bp.File, fmt.Sprint(bp.Line), orNone(bp.Func),
		policy, orNone(bp.Condition), orNone(bp.LogExpr))
	return err
}

// RemoveBreakpoint removes the breakpoint at file:line (PyCharm's
// RemoveBreakpointCommand: type, file, line).
func (s *Server) RemoveBreakpoint(file string, line int) error {
	_, err := s.Send(pycharm.CmdRemoveBreak, "python-line", file, fmt.Sprint(line))
	return err
}

// ShowReturnValues sends what PyCharm always sends after the breakpoints.
func (s *Server) ShowReturnValues(on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	_, err := s.Send(pycharm.CmdShowReturnValues, "SHOW_RETURN_VALUES", v)
	return err
}

// Start is PyDebugProcess's handshake and init after the connection:
// version, the breakpoints, SHOW_RETURN_VALUES 0, run. It returns the
// debugger's version.
func (s *Server) Start(ctx context.Context, bps ...Breakpoint) (string, error) {
	v, err := s.Handshake(ctx)
	if err != nil {
		return "", err
	}
	for _, bp := range bps {
		if err := s.SetBreakpoint(bp); err != nil {
			return v, err
		}
	}
	if err := s.ShowReturnValues(false); err != nil {
		return v, err
	}
	_, err = s.Send(pycharm.CmdRun)
	return v, err
}

// Frame is one <frame> of a suspend.
type Frame struct {
	ID   string `xml:"id,attr"`
	Name string `xml:"name,attr"`
	File string `xml:"file,attr"`
	Line int    `xml:"line,attr"`
}

// Thread is a <thread> of a suspend, thread create or thread list.
type Thread struct {
	ID         string  `xml:"id,attr"`
	Name       string  `xml:"name,attr"`
	StopReason string  `xml:"stop_reason,attr"`
	Frames     []Frame `xml:"frame"`
}

// Var is one <var> of a frame's variables.
type Var struct {
	Name  string `xml:"name,attr"`
	Type  string `xml:"type,attr"`
	Value string `xml:"value,attr"`
}

type xmlDoc struct {
	Threads []Thread `xml:"thread"`
	Vars    []Var    `xml:"var"`
}

// ParseXML decodes a payload as pydevd sent it (quoted XML). Thread names
// and values, quoted once more inside the XML, are unquoted.
func ParseXML(payload string) (threads []Thread, vars []Var, err error) {
	var d xmlDoc
	if err := xml.Unmarshal([]byte(pycharm.PyUnquote(payload)), &d); err != nil {
		return nil, nil, fmt.Errorf("pydevd XML %.200q: %w", payload, err)
	}
	for i := range d.Threads {
		d.Threads[i].Name = pycharm.PyUnquote(d.Threads[i].Name)
	}
	for i := range d.Vars {
		d.Vars[i].Value = pycharm.PyUnquote(d.Vars[i].Value)
	}
	return d.Threads, d.Vars, nil
}

// ConsoleExec types line into the Debug Console with frame of thread
// selected, as PyCharm does (CMD_CONSOLE_EXEC), and returns what the
// console shows before the line's answer: stdout and stderr text
// (CMD_WRITE_TO_CONSOLE).
func (s *Server) ConsoleExec(ctx context.Context, thread, frame, line string) (stdout, stderr string, err error) {
	seq, err := s.Send(pycharm.CmdConsoleExec, thread, frame, "FRAME", line)
	if err != nil {
		return "", "", err
	}
	var out, errOut strings.Builder
	for {
		m, err := s.WaitFor(ctx, func(m pycharm.Message) bool {
			return m.ID == pycharm.CmdWriteToConsole || (m.Seq == seq && !pycharmEvents[m.ID])
		})
		if err != nil {
			return out.String(), errOut.String(), err
		}
		if m.ID != pycharm.CmdWriteToConsole {
			if m.ID == pycharm.CmdError {
				return out.String(), errOut.String(), fmt.Errorf("console line failed: %s", pycharm.PyUnquote(m.Payload))
			}
			return out.String(), errOut.String(), nil
		}
		var io struct {
			IO []struct {
				S   string `xml:"s,attr"`
				Ctx string `xml:"ctx,attr"`
			} `xml:"io"`
		}
		if err := xml.Unmarshal([]byte(pycharm.PyUnquote(m.Payload)), &io); err != nil {
			return out.String(), errOut.String(), fmt.Errorf("console output %.200q: %w", m.Payload, err)
		}
		for _, o := range io.IO {
			if o.Ctx == "2" {
				errOut.WriteString(pycharm.PyUnquote(o.S))
			} else {
				out.WriteString(pycharm.PyUnquote(o.S))
			}
		}
	}
}
