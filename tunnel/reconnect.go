package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"golang.org/x/crypto/ssh"
)

// Mode is how executor connections reach the laptop.
type Mode string

const (
	// ModeAgent runs `sparkdap agent` on the gateway and multiplexes every
	// executor connection over one SSH session with yamux.
	ModeAgent Mode = "agent"
	// ModeForward asks sshd for a remote forward (ssh -R); nothing runs on
	// the gateway, and each executor connection is one SSH channel.
	ModeForward Mode = "forward"
)

// Config is a whole tunnel.
type Config struct {
	Dial DialConfig
	Mode Mode
	// RemoteListen is where executors connect on the gateway.
	RemoteListen string
	// AgentPath is the agent command on the gateway; empty means sparkdap
	// on the remote PATH, else upload this executable to AgentCacheDir.
	AgentPath     string
	AgentCacheDir string
	// AgentArgs are extra flags for the agent (e.g. its log level).
	AgentArgs []string

	// KeepaliveInterval and KeepaliveMax are ssh's ServerAliveInterval and
	// ServerAliveCountMax: after KeepaliveMax unanswered keepalives the
	// connection is declared dead and reconnected.
	KeepaliveInterval time.Duration
	KeepaliveMax      int
	// MinBackoff, MaxBackoff and MaxAttempts bound reconnecting: delays
	// double from MinBackoff up to MaxBackoff, and after MaxAttempts
	// failures in a row Run gives up.
	MinBackoff, MaxBackoff time.Duration
	MaxAttempts            int

	// Handle serves one executor connection (a yamux stream or a forwarded
	// SSH channel), whose RemoteAddr is where the executor connected from,
	// and returns when it is over. It runs on its own
	// goroutine; Run waits for all of them before returning.
	Handle func(ctx context.Context, conn net.Conn)
	// OnUp is told each time the tunnel is (re)established; OnDown each
	// time it is lost, with the delay before the next attempt.
	OnUp   func(Up)
	OnDown func(err error, attempt int, retryIn time.Duration)
	Log    zerolog.Logger
}

// Up describes an established tunnel.
type Up struct {
	// Addr is where the gateway listens for executors, as it reported.
	Addr string
	// Reconnected is false for the first connection.
	Reconnected bool
	// Attempts is how many tries this took (1 when the first succeeded).
	Attempts int
}

func (c *Config) defaults() {
	if c.Mode == "" {
		c.Mode = ModeAgent
	}
	if c.RemoteListen == "" {
		c.RemoteListen = "127.0.0.1:5678"
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 15 * time.Second
	}
	if c.KeepaliveMax <= 0 {
		c.KeepaliveMax = 3
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 20
	}
}

// link is one established tunnel over one SSH connection.
type link interface {
	addr() string
	serve(ctx context.Context, handle func(net.Conn)) error
}

func (a *agentLink) addr() string { return a.listenAddr }

// Run keeps the tunnel up until ctx ends. The first connection must
// succeed, so a typo or a refused key fails at once; after that, a lost
// connection is retried with exponential backoff. Host key refusals are
// never retried. Executor connections that die with a link just end: their
// debuggees see EOF and run on undebugged.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	log := cfg.Log
	var wg sync.WaitGroup
	defer wg.Wait()
	// Links call handle on their accept loop, so the Add happens before
	// the deferred Wait.
	handle := func(c net.Conn) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			cfg.Handle(ctx, c)
		}()
	}

	everUp := false
	failures := 0
	delay := cfg.MinBackoff
	for {
		client, l, err := connect(ctx, &cfg)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var hk *HostKeyError
			if !everUp || errors.As(err, &hk) {
				return err
			}
			failures++
			if failures >= cfg.MaxAttempts {
				return fmt.Errorf("tunnel: giving up after %d reconnect attempts: %w", failures, err)
			}
			log.Warn().Err(err).Int("attempt", failures).Dur("retry_in", delay).Msg("tunnel reconnect failed")
			if cfg.OnDown != nil {
				cfg.OnDown(err, failures, delay)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(delay):
			}
			delay = min(delay*2, cfg.MaxBackoff)
			continue
		}
		up := Up{Addr: l.addr(), Reconnected: everUp, Attempts: failures + 1}
		everUp, failures, delay = true, 0, cfg.MinBackoff
		log.Info().Str("gateway", cfg.Dial.Target.String()).Str("listen", up.Addr).Str("mode", string(cfg.Mode)).Bool("reconnected", up.Reconnected).Msg("tunnel up")
		if cfg.OnUp != nil {
			cfg.OnUp(up)
		}
		err = runLink(ctx, client, l, handle, &cfg)
		client.Close()
		if ctx.Err() != nil {
			return nil
		}
		failures = 1
		log.Warn().Err(err).Dur("retry_in", delay).Msg("tunnel down; reconnecting")
		if cfg.OnDown != nil {
			cfg.OnDown(err, 0, delay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, cfg.MaxBackoff)
	}
}

// connect dials and sets up the link for cfg.Mode.
func connect(ctx context.Context, cfg *Config) (*ssh.Client, link, error) {
	client, err := Dial(ctx, cfg.Dial)
	if err != nil {
		return nil, nil, err
	}
	var l link
	switch cfg.Mode {
	case ModeForward:
		l, err = startForward(client, cfg.RemoteListen)
	case ModeAgent:
		var path string
		path, err = ensureAgent(ctx, client, cfg.AgentPath, cfg.AgentCacheDir, cfg.Log)
		if err == nil {
			cmd := "exec " + shellquote.Quote(path) + " agent --listen " + shellquote.Quote(cfg.RemoteListen) + " --log-format json"
			for _, a := range cfg.AgentArgs {
				cmd += " " + shellquote.Quote(a)
			}
			var a *agentLink
			a, err = startAgent(ctx, client, cmd, cfg.Log)
			if err == nil {
				l = a
			}
		}
	default:
		err = fmt.Errorf("unknown tunnel mode %q (want agent or forward)", cfg.Mode)
	}
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("ssh %s: %w", cfg.Dial.Target, err)
	}
	return client, l, nil
}

// runLink serves l until it or the SSH connection under it dies. The
// keepalive catches a connection that died silently (a laptop that slept,
// a NAT that forgot us), which TCP alone would notice only much later.
func runLink(ctx context.Context, client *ssh.Client, l link, handle func(net.Conn), cfg *Config) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		err := client.Wait()
		cancel(fmt.Errorf("ssh connection closed: %w", err))
	}()
	go keepalive(ctx, client, cfg.KeepaliveInterval, cfg.KeepaliveMax, func(err error) {
		cancel(err)
		client.Close()
	})
	err := l.serve(ctx, handle)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// keepalive sends keepalive@openssh.com every interval; OpenSSH answers
// even though it does not know the request, so any reply means alive.
func keepalive(ctx context.Context, client *ssh.Client, interval time.Duration, maxMissed int, dead func(error)) {
	if interval < 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := client.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case <-ctx.Done():
			return
		case err := <-reply:
			if err != nil {
				dead(fmt.Errorf("keepalive: %w", err))
				return
			}
			missed = 0
		case <-time.After(interval):
			missed++
			if missed >= maxMissed {
				dead(fmt.Errorf("keepalive: no answer to %d keepalives %s apart", missed, interval))
				return
			}
			// The request is still pending; the next tick sends another.
			// The stray reply goroutine ends when the connection does.
		}
	}
}
