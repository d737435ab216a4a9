package doctor

// The SSH gateway checks: reaching it, and a test worker run on it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/sparkdap/sparkdap/tunnel"
	"golang.org/x/crypto/ssh"
)

// checkSSH dials the gateway; the client it returns (nil on failure) is
// for the test connection through the tunnel.
func (d *doctor) checkSSH(ctx context.Context) *ssh.Client {
	g := d.f.Gateway
	if g == nil {
		d.report(checkResult{name: "SSH gateway", v: vSkip, detail: "no --ssh given (executors reach this machine directly)"})
		return nil
	}
	name := "SSH gateway " + g.Dest
	target, err := tunnel.ParseTarget(g.Dest)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: g.explain(err).Error(), fix: "pass --ssh user@host[:port]"})
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, g.Timeout+5*time.Second)
	defer cancel()
	client, err := tunnel.Dial(dctx, tunnel.DialConfig{Target: target, IdentityFiles: g.IdentityFiles, KnownHostsFile: g.KnownHosts,
		Timeout: g.Timeout, Log: zerolog.Nop()})
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: g.explain(err).Error(), fix: sshFix(err, target)})
		return nil
	}
	detail := fmt.Sprintf("connected, host key verified against %s, authenticated as %s", g.KnownHosts, target.User)
	if sess, err := client.NewSession(); err == nil {
		var out bytes.Buffer
		sess.Stdout = &out
		if sess.Run("command -v sparkdap || echo none") == nil {
			if p := strings.TrimSpace(out.String()); p != "none" && p != "" {
				detail += "; sparkdap on the gateway: " + p
			} else {
				detail += "; no sparkdap on the gateway's PATH (serve --ssh uploads this one)"
			}
		}
		sess.Close()
	}
	d.report(checkResult{name: name, v: vOK, detail: detail})
	return client
}

// explain names the caller's setting behind err, if the caller says how.
func (g *Gateway) explain(err error) error {
	if g.Explain == nil {
		return err
	}
	return g.Explain(err)
}

// checkTunnelConnection runs the test worker on the gateway: it connects
// where executors would (serve's --remote-listen), through the tunnel to
// the running proxy, which must list it on the IDE port.
func (d *doctor) checkTunnelConnection(ctx context.Context, client *ssh.Client, ide portState) {
	g := d.f.Gateway
	name := "test connection through the gateway (worker on the gateway → tunnel → proxy → IDE port)"
	if ide != portSparkdap {
		d.report(checkResult{name: name, v: vSkip, detail: "no sparkdap serve is running on " + d.f.IDE, fix: g.startServeFix()})
		return
	}
	if d.f.Token == "" {
		d.report(checkResult{name: name, v: vFail, detail: "no executor token was given",
			fix: "export " + d.f.TokenEnv + " (the token sparkdap serve uses) or pass --token"})
		return
	}
	addr := g.RemoteListen
	if h, p, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", p) // what listens on all addresses listens on loopback too
		}
	}
	err := d.testConnection(ctx, func(host, port string) (*probeProc, error) {
		return startRemoteProbe(client, g.RemotePython, host, port)
	}, d.f.IDE, addr, d.f.Token)
	if err != nil {
		fix := err.fix
		if fix == "" && strings.Contains(err.err.Error(), "exited before connecting") {
			fix = fmt.Sprintf("the gateway needs %s with debugpy (--remote-python), or test from an executor host instead", g.RemotePython)
		}
		if !g.RemoteListenGiven && strings.Contains(err.err.Error(), "cannot reach") {
			fix = fmt.Sprintf("doctor tested the default --remote-listen %s: give doctor the --remote-listen sparkdap serve runs with", g.RemoteListen)
		}
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("to %s on the gateway: %v", addr, err.err), fix: fix})
		return
	}
	d.report(checkResult{name: name, v: vOK, detail: fmt.Sprintf("a debugpy worker on the gateway reached %s and was listed on the IDE port", addr)})
}

// startServeFix is the fix for a tunnel test with no serve to test: the
// serve command line, with the user's --remote-listen if doctor was given
// one (a default is not the user's choice: executors on other hosts need
// 0.0.0.0:PORT).
func (g *Gateway) startServeFix() string {
	if g.RemoteListenGiven {
		return fmt.Sprintf("start 'sparkdap serve --ssh %s --remote-listen %s' and re-run to test the tunnel", g.Dest, g.RemoteListen)
	}
	return fmt.Sprintf("start 'sparkdap serve --ssh %s --remote-listen HOST:PORT' (where executors connect on the gateway), then re-run with the same --remote-listen to test the tunnel", g.Dest)
}

func sshFix(err error, t tunnel.Target) string {
	var hk *tunnel.HostKeyError
	var auth *tunnel.AuthError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &hk) && hk.Unknown:
		return fmt.Sprintf("check the fingerprint with the gateway's admin (or: ssh -p %d %s@%s), then run serve with --ssh-accept-new-host-key once", t.Port, t.User, t.Host)
	case errors.As(err, &hk):
		return "find out why the key changed before trusting it; the message says which known_hosts line to remove"
	case errors.As(err, &auth):
		return fmt.Sprintf("load your key into ssh-agent (ssh-add) or pass --ssh-identity FILE; check that 'ssh %s@%s -p %d true' works", t.User, t.Host, t.Port)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("%s does not resolve: check the spelling, your VPN, or use its IP address", t.Host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens on %s: is sshd running there, and is %d its port?", t.Addr(), t.Port)
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
		return fmt.Sprintf("%s did not answer in time: a firewall, VPN or wrong host? (--ssh-timeout to wait longer)", t.Addr())
	}
	if errors.Is(err, tunnel.ErrNoKeys) {
		return "start ssh-agent and ssh-add your key, or pass --ssh-identity FILE"
	}
	return fmt.Sprintf("check that 'ssh -p %d %s@%s true' works from this machine", t.Port, t.User, t.Host)
}
