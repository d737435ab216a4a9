package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// maxPreambleJunk bounds what a chatty login shell may print before the
// agent's preamble.
const maxPreambleJunk = 64 << 10

// agentLink is a running agent: its session and the yamux server on it.
type agentLink struct {
	listenAddr string // where the agent listens on the gateway
	sess       *yamux.Session
	ssh        *ssh.Session
	done       chan struct{} // closed when the remote command exits
	log        zerolog.Logger
	// tail keeps the agent's last stderr lines for error messages.
	tail *tailBuffer
}

// startAgent runs cmdline on the gateway and waits for its preamble.
func startAgent(ctx context.Context, client *ssh.Client, cmdline string, log zerolog.Logger) (*agentLink, error) {
	s, err := client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("agent stdin: %w", err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("agent stdout: %w", err)
	}
	stderr, err := s.StderrPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("agent stderr: %w", err)
	}
	a := &agentLink{ssh: s, done: make(chan struct{}), log: log, tail: &tailBuffer{max: 20}}
	if err := s.Start(cmdline); err != nil {
		s.Close()
		return nil, fmt.Errorf("start agent %q: %w", cmdline, err)
	}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		relayAgentLog(stderr, log, a.tail)
	}()
	exitErr := make(chan error, 1)
	go func() {
		err := s.Wait()
		// Wait returns once stdout/stderr are drained and the exit status
		// is in; the stderr tail is then complete for error messages.
		<-stderrDone
		exitErr <- err
		close(a.done)
	}()

	br := bufio.NewReaderSize(stdout, 4096)
	type result struct {
		addr string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		addr, err := readPreamble(br)
		got <- result{addr, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			s.Close()
			<-a.done
			return nil, a.explain(fmt.Errorf("agent %q: %w", cmdline, r.err), <-exitErr)
		}
		a.listenAddr = r.addr
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	// Closing the session, not stdin: x/crypto's CloseWrite races with a
	// concurrent Write (yamux's send loop), while Close is serialized.
	conn := stdioConn{Reader: br, Writer: stdin, closers: []io.Closer{s}}
	sess, err := yamux.Server(conn, yamuxConfig(log))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("yamux: %w", err)
	}
	a.sess = sess
	return a, nil
}

// explain adds the agent's own last words to err.
func (a *agentLink) explain(err, exit error) error {
	msg := err.Error()
	if exit != nil {
		msg += " (remote " + exit.Error() + ")"
	}
	if t := a.tail.String(); t != "" {
		msg += "; agent stderr: " + t
	}
	return errors.New(msg)
}

// readPreamble skips whatever precedes the agent's preamble line and
// returns the address it reports.
func readPreamble(br *bufio.Reader) (string, error) {
	skipped := 0
	for skipped < maxPreambleJunk {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", errors.New("exited before saying it was listening")
			}
			return "", fmt.Errorf("read preamble: %w", err)
		}
		skipped += len(line)
		rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), preamblePrefix)
		if !ok {
			continue
		}
		version, addr, _ := strings.Cut(rest, " ")
		if version != protocolVersion {
			return "", fmt.Errorf("speaks tunnel protocol %q, this sparkdap speaks %q: the gateway's sparkdap is another version; "+
				"install this version there (a sparkdap on the gateway's PATH is used before uploading this one) or pass --agent-path to one of this version",
				version, protocolVersion)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("bad preamble address %q: %w", addr, err)
		}
		return addr, nil
	}
	return "", fmt.Errorf("no agent preamble in the first %d bytes of output: is it a sparkdap binary?", maxPreambleJunk)
}

// headerTimeout bounds the wait for a stream's header, which the agent
// writes as it opens the stream.
const headerTimeout = 10 * time.Second

// serve hands every stream the agent opens to handle, as a connection
// whose RemoteAddr is the executor's (its stream header), until the link
// dies. Each header is read on a goroutine of its own, which serve waits
// for, so one slow stream holds up no other.
func (a *agentLink) serve(ctx context.Context, handle func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { a.close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait() // after a.close: their reads fail at once
	var warned atomic.Bool
	for {
		st, err := a.sess.AcceptStream()
		if err != nil {
			a.close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			<-a.done
			return a.explain(errors.New("agent session ended"), nil)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = st.SetReadDeadline(time.Now().Add(headerTimeout))
			src, err := readStreamHeader(st)
			_ = st.SetReadDeadline(time.Time{})
			if err != nil {
				// A broken or foreign agent: its executors run
				// undebugged; say so once per link.
				level := a.log.Debug()
				if warned.CompareAndSwap(false, true) {
					level = a.log.Error()
				}
				level.Err(err).Msg("dropping an executor connection the agent sent without a valid stream header")
				st.Close()
				return
			}
			handle(&sourceConn{Conn: st, remote: net.TCPAddrFromAddrPort(src)})
		}()
	}
}

func (a *agentLink) close() {
	if a.sess != nil {
		a.sess.Close()
	}
	a.ssh.Close()
}

// relayAgentLog re-logs the agent's JSON log lines at their own level, so
// a gateway-side warning (a public --listen, a busy port) reaches the user.
func relayAgentLog(r io.Reader, log zerolog.Logger, tail *tailBuffer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Bytes()
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			text := string(bytes.TrimSpace(line))
			tail.add(text)
			log.Info().Str("from", "agent").Msg(text)
			continue
		}
		lvl, _ := zerolog.ParseLevel(fmt.Sprint(m["level"]))
		msg := fmt.Sprint(m["message"])
		delete(m, "level")
		delete(m, "message")
		delete(m, "time")
		tail.add(msg)
		log.WithLevel(lvl).Str("from", "agent").Fields(m).Msg(msg)
	}
}

// tailBuffer keeps the last few lines written.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tailBuffer) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, s)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, " | ")
}
