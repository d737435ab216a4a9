package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/acceptretry"
)

// preamblePrefix starts the one text line the agent writes on stdout before
// yamux takes over: "SPARKDAP-AGENT <protocol> <listen address>". It proves
// the remote command really is a compatible agent, carries the address it
// bound (port 0 allowed), and lets the client skip anything a login shell
// printed before it.
const (
	preamblePrefix = "SPARKDAP-AGENT "
	// protocolVersion 2: every stream starts with a stream header (see
	// source.go).
	protocolVersion = "2"
)

// yamuxConfig is shared by both ends.
//
// Flow control is yamux's per-stream window: a debuggee that floods output
// fills only its own 256 KiB window and then waits, while other streams keep
// moving. Keepalive is on for the agent's sake: the agent cannot see the
// laptop's SSH keepalives (sshd answers them), so if the laptop vanishes
// without a FIN, yamux pings are how the agent notices, exits and frees
// its listening port for the next agent. The laptop side detects a dead
// connection with SSH keepalives, which also cover forward mode; its yamux
// keepalive is harmless and bounds a wedged agent too.
func yamuxConfig(log zerolog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = 1024 // a job start connects many workers at once
	c.EnableKeepAlive = true
	c.KeepAliveInterval = 15 * time.Second
	c.ConnectionWriteTimeout = 15 * time.Second
	c.StreamCloseTimeout = time.Minute
	c.StreamOpenTimeout = 30 * time.Second
	c.LogOutput = nil
	c.Logger = yamuxLogger{log}
	return c
}

// yamuxLogger sends yamux's messages (mostly "session shutdown" noise) to
// debug level.
type yamuxLogger struct{ log zerolog.Logger }

func (l yamuxLogger) Print(v ...any)                 { l.log.Debug().Msg(strings.TrimSpace(fmt.Sprint(v...))) }
func (l yamuxLogger) Printf(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l yamuxLogger) Println(v ...any)               { l.log.Debug().Msg(strings.TrimSpace(fmt.Sprintln(v...))) }

// stdioConn is the agent's stdin and stdout as one connection.
type stdioConn struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (c stdioConn) Close() error {
	for _, cl := range c.closers {
		_ = cl.Close()
	}
	return nil
}

// AgentConfig configures the gateway side.
type AgentConfig struct {
	// Listen is where executors' debugpy.connect arrives on the gateway.
	Listen string
	// ListenRetry bounds how long to retry a busy port: after a reconnect,
	// the previous agent may still hold it until it notices its session is
	// gone (at most a yamux keepalive timeout).
	ListenRetry time.Duration
	Log         zerolog.Logger
}

// RunAgent serves executors on cfg.Listen, carrying each connection as one
// yamux stream over in/out (the SSH session's stdio) until the session or
// ctx ends. Nothing but the preamble and yamux frames is written to out.
func RunAgent(ctx context.Context, in io.Reader, out io.Writer, closers []io.Closer, cfg AgentConfig) error {
	log := cfg.Log
	l, err := listenRetry(ctx, cfg.Listen, cfg.ListenRetry, log)
	if err != nil {
		return err
	}
	defer l.Close()
	if _, err := fmt.Fprintf(out, "%s%s %s\n", preamblePrefix, protocolVersion, l.Addr()); err != nil {
		return fmt.Errorf("write preamble: %w", err)
	}
	sess, err := yamux.Client(stdioConn{Reader: in, Writer: out, closers: closers}, yamuxConfig(log))
	if err != nil {
		return fmt.Errorf("yamux: %w", err)
	}
	defer sess.Close()
	log.Info().Str("listen", l.Addr().String()).Msg("agent up")

	go func() {
		select {
		case <-ctx.Done():
		case <-sess.CloseChan():
		}
		l.Close()
	}()

	sessCtx := sessContext(sess)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		// Running out of file descriptors fails one accept, not the agent:
		// it keeps serving the workers it has.
		c, err := acceptretry.Accept(ctx, l, func(error) bool { return sess.IsClosed() }, func(err error, wait time.Duration) {
			log.Warn().Err(err).Dur("retry_in", wait).Msg("accept failed; still serving")
		})
		if err != nil {
			if ctx.Err() != nil || sess.IsClosed() {
				log.Info().Msg("proxy session ended; agent exiting")
				return nil
			}
			return fmt.Errorf("accept on %s: %w", l.Addr(), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveExecutorConn(sessCtx, sess, c, log)
		}()
	}
}

func serveExecutorConn(sessCtx context.Context, sess *yamux.Session, c net.Conn, log zerolog.Logger) {
	// The proxy's per-source limits apply to the executor's address, which
	// only the agent sees: it goes first on the stream.
	var src netip.AddrPort
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		src = a.AddrPort()
	}
	header, err := appendStreamHeader(nil, src)
	if err != nil {
		log.Warn().Err(err).Str("executor", c.RemoteAddr().String()).Msg("dropping executor connection")
		c.Close()
		return
	}
	st, err := sess.OpenStream()
	if err != nil {
		// The debuggee sees its connection close and runs undebugged.
		log.Warn().Err(err).Str("executor", c.RemoteAddr().String()).Msg("cannot open tunnel stream; dropping executor connection")
		c.Close()
		return
	}
	if _, err := st.Write(header); err != nil {
		log.Debug().Err(err).Str("executor", c.RemoteAddr().String()).Msg("tunnel stream closed before its header; dropping executor connection")
		st.Close()
		c.Close()
		return
	}
	log.Debug().Str("executor", c.RemoteAddr().String()).Uint32("stream", st.StreamID()).Msg("executor connected")
	// Close the executor socket as soon as the tunnel dies rather than when
	// the debuggee next writes.
	stop := context.AfterFunc(sessCtx, func() { c.Close() })
	defer stop()
	pipe(c, st)
	log.Debug().Uint32("stream", st.StreamID()).Msg("executor disconnected")
}

// sessContext is done when the yamux session closes.
func sessContext(sess *yamux.Session) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-sess.CloseChan()
		cancel()
	}()
	return ctx
}

func listenRetry(ctx context.Context, addr string, retry time.Duration, log zerolog.Logger) (net.Listener, error) {
	deadline := time.Now().Add(retry)
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().Add(delay).After(deadline) {
			return nil, fmt.Errorf("listen for executors on %s: %w", addr, err)
		}
		log.Info().Str("listen", addr).Int("attempt", attempt).Msg("port busy (a previous agent may still be exiting); retrying")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}
