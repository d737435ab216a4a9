// Package pycharmtest is a test double of PyCharm's "Python Debug Server":
// it listens, accepts one debuggee connection (pydevd, or the sparkdap proxy
// standing in for many) and speaks pydevd's line protocol to it as
// PyCharm's RemoteDebugger does. Written from pydevd-pycharm's
// pydevd_comm.py / pydevd_process_net_command.py, not from PyCharm's code.
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

// Server is one listening debug server.
type Server struct {
	ln net.Listener

	mu      sync.Mutex
	conn    net.Conn
	seq     int // PyCharm numbers its requests 1, 3, 5, …
	in      chan pycharm.Message
	backlog []pycharm.Message
	readErr error
	// Log, if set, gets every message both ways.
	Log func(dir string, m pycharm.Message)
}

// Listen listens on a free loopback port.
func Listen() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Server{ln: ln, seq: -1, in: make(chan pycharm.Message, 100000)}, nil
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
		s.in <- m
	}
}

// Send sends a command and returns its sequence number.
func (s *Server) Send(id int, fields ...string) (int, error) {
	s.mu.Lock()
	s.seq += 2
	m := pycharm.Message{ID: id, Seq: s.seq, Payload: strings.Join(fields, "\t")}
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
	m, err := s.WaitFor(ctx, func(m pycharm.Message) bool { return m.Seq == seq })
	if err == nil && m.ID == pycharm.CmdError {
		return m, fmt.Errorf("command %d failed: %s", id, pycharm.PyUnquote(m.Payload))
	}
	return m, err
}

// Handshake does what PyCharm does first: CMD_VERSION, asking for
// breakpoints by id. It returns the debugger's version.
func (s *Server) Handshake(ctx context.Context) (string, error) {
	m, err := s.Request(ctx, pycharm.CmdVersion, "1.1", "UNIX", "ID")
	if err != nil {
		return "", err
	}
	return pycharm.PyUnquote(m.Payload), nil
}

// SetBreakpoint sets a line breakpoint by id (the layout after Handshake).
func (s *Server) SetBreakpoint(id int, file string, line int) error {
	_, err := s.Send(pycharm.CmdSetBreak, fmt.Sprint(id), "python-line", file, fmt.Sprint(line),
		"None", "None", "None", "None", "False", "NONE")
	return err
}

// RemoveBreakpoint removes it.
func (s *Server) RemoveBreakpoint(id int, file string) error {
	_, err := s.Send(pycharm.CmdRemoveBreak, "python-line", file, fmt.Sprint(id))
	return err
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
