package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/tunnel"
)

// sshFlags reach the SSH gateway: serve's tunnel and doctor's gateway
// check take the same ones, with the same defaults.
type sshFlags struct {
	ssh          string
	identities   stringList
	knownHosts   string
	timeout      time.Duration
	remoteListen string
}

func addSSHFlags(fs *flag.FlagSet, sshDetail, remoteListenDetail string) *sshFlags {
	s := &sshFlags{}
	bindSSHFlags(fs, s, sshDetail, remoteListenDetail)
	return s
}

func bindSSHFlags(fs *flag.FlagSet, s *sshFlags, sshDetail, remoteListenDetail string) {
	defString(fs, &s.ssh, "ssh", "", sshDetail)
	defList(fs, &s.identities, "ssh-identity", "")
	defString(fs, &s.knownHosts, "ssh-known-hosts", tunnel.DefaultKnownHosts(), "")
	defDuration(fs, &s.timeout, "ssh-timeout", defaultSSHTimeout, "")
	defAddr(fs, &s.remoteListen, "remote-listen", defaultRemoteListen, remoteListenDetail)
}

// target parses --ssh.
func (s *sshFlags) target() (tunnel.Target, error) {
	t, err := tunnel.ParseTarget(s.ssh)
	return t, flagError("ssh", err)
}

// dialConfig is the tunnel's dial configuration from the flags.
func (s *sshFlags) dialConfig(target tunnel.Target, log zerolog.Logger) tunnel.DialConfig {
	return tunnel.DialConfig{Target: target, IdentityFiles: s.identities, KnownHostsFile: s.knownHosts,
		Timeout: s.timeout, Log: log}
}

// tunnelFlags are serve's flags for reaching executors through an SSH
// gateway (see package tunnel).
type tunnelFlags struct {
	*sshFlags
	acceptNew     bool
	mode          string
	agentPath     string
	agentCacheDir string
	keepalive     time.Duration
	maxReconnects int
}

func addTunnelFlags(fs *flag.FlagSet) *tunnelFlags {
	t := &tunnelFlags{sshFlags: addSSHFlags(fs, "", "")}
	fs.BoolVar(&t.acceptNew, "ssh-accept-new-host-key", false, "trust a gateway not yet in known_hosts and add its key there (a changed key is always refused)")
	fs.StringVar(&t.mode, "ssh-mode", "agent", "agent: run 'sparkdap agent' on the gateway, all executors over one SSH session; forward: plain remote forward (ssh -R), nothing runs on the gateway")
	fs.StringVar(&t.agentPath, "agent-path", "", "sparkdap on the gateway (default: sparkdap on the remote PATH, else upload this executable)")
	fs.StringVar(&t.agentCacheDir, "agent-cache-dir", tunnel.DefaultAgentCacheDir, "gateway `dir` where an uploaded agent is kept")
	fs.DurationVar(&t.keepalive, "ssh-keepalive", 15*time.Second, "send SSH keepalives this often; 3 unanswered mean the connection is dead and is reconnected")
	fs.IntVar(&t.maxReconnects, "ssh-max-reconnects", 20, "give up after this many failed reconnects in a row")
	return t
}

func (t *tunnelFlags) enabled() bool { return t.ssh != "" }

// run carries executor connections from the gateway to handle (the DAP
// hub's or the PyCharm proxy's) until ctx ends.
func (t *tunnelFlags) run(ctx context.Context, handle func(context.Context, net.Conn), log zerolog.Logger, stderr io.Writer) error {
	target, err := t.target()
	if err != nil {
		return err
	}
	mode := tunnel.Mode(t.mode)
	if mode != tunnel.ModeAgent && mode != tunnel.ModeForward {
		return fmt.Errorf("--ssh-mode %q: want agent or forward", t.mode)
	}
	if err := warnIfPublic(t.remoteListen, log); err != nil {
		return fmt.Errorf("--remote-listen: %w", err)
	}
	if mode == tunnel.ModeForward && (t.agentPath != "") {
		return errors.New("--agent-path has no meaning with --ssh-mode forward")
	}
	var agentArgs []string
	if log.GetLevel() <= zerolog.DebugLevel {
		agentArgs = []string{"--log-level", "debug"}
	}
	tlog := log.With().Str("component", "tunnel").Logger()
	dial := t.dialConfig(target, tlog)
	dial.AcceptNewHostKey = t.acceptNew
	err = tunnel.Run(ctx, tunnel.Config{
		Dial: dial,
		Mode: mode, RemoteListen: t.remoteListen,
		AgentPath: t.agentPath, AgentCacheDir: t.agentCacheDir, AgentArgs: agentArgs,
		KeepaliveInterval: t.keepalive, MaxAttempts: t.maxReconnects,
		Handle: handle,
		OnUp: func(u tunnel.Up) {
			how := "tunnel up"
			if u.Reconnected {
				how = fmt.Sprintf("tunnel up again (reconnected after %d attempt(s))", u.Attempts)
			}
			fmt.Fprintf(stderr, "sparkdap: %s: executors connect to %s%s\n", how, executorAddr(target.Host, u.Addr), reachNote(u.Addr))
		},
		OnDown: func(err error, attempt int, retryIn time.Duration) {
			if attempt == 0 {
				fmt.Fprintf(stderr, "sparkdap: tunnel down: %v; reconnecting in %s\n", err, retryIn)
			} else {
				fmt.Fprintf(stderr, "sparkdap: tunnel reconnect attempt %d failed: %v; retrying in %s\n", attempt, err, retryIn)
			}
		},
		Log: tlog,
	})
	if err != nil {
		return fmt.Errorf("tunnel: %w", sshFlagError(err))
	}
	return nil
}

// sshFlagError names the flag behind a tunnel error that one flag's value
// caused, and says which flag fixes one that a missing flag caused.
func sshFlagError(err error) error {
	var ie *tunnel.IdentityError
	switch {
	case errors.Is(err, tunnel.ErrBadTarget):
		return flagError("ssh", err)
	case errors.As(err, &ie):
		return flagError("ssh-identity", err)
	case errors.Is(err, tunnel.ErrNoKnownHosts):
		return fmt.Errorf("%w: pass --ssh-known-hosts FILE", err)
	case errors.Is(err, tunnel.ErrNoKeys):
		return fmt.Errorf("%w; pass --ssh-identity FILE", err)
	}
	return err
}

// executorAddr turns the gateway's listen address into what an executor
// dials: an unspecified address means "the gateway's own name".
func executorAddr(gateway, listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if g := net.ParseIP(gateway); gateway == "localhost" || (g != nil && g.IsLoopback()) {
			// A gateway reached at loopback is a forward (kubectl
			// port-forward, ssh -L): its own address is not known here, and
			// executors never use the forward's.
			return fmt.Sprintf("port %s of the gateway's own address (%s here is a forward to it; on Kubernetes, the gateway's Service)", port, gateway)
		}
		host = gateway
	}
	return net.JoinHostPort(host, port)
}

func reachNote(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return " (on the gateway's loopback only: executors on other hosts need --remote-listen 0.0.0.0:PORT)"
	}
	return ""
}
