package doctor

// The SSH gateway checks: reaching it, and a test worker run on it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/sparkdap/sparkdap/internal/safefile"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/tunnel"
	"github.com/sparkdap/sparkdap/workerwrap"
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
// the running proxy, which must list it on the IDE port. When the
// gateway's Python has no debugpy and the job ships one, the worker runs
// with that, as the executors would (startShippedProbe).
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
	start := func(host, port string) (*probeProc, error) {
		return startRemoteProbe(client, g.RemotePython, host, port)
	}
	worker := "a debugpy worker on the gateway"
	needs := "with debugpy"
	if d.f.ShipsDebugger && d.remoteLacksDebugpy(ctx, client, g.RemotePython) {
		// The executors' daemon would unpack the wheel the job ships
		// beside the wrapper: the test worker does the same.
		wheel, err := d.shippedDebugger(ctx)
		if err != nil {
			d.report(checkResult{name: name, v: vWarn,
				detail: fmt.Sprintf("not run: %s on the gateway has no debugpy, and the debugger the job ships, which the test worker would use instead, cannot be had here: %v",
					g.RemotePython, err),
				fix: fmt.Sprintf("sparkdap submit, conf and wrap ship it from the same place: fix that and re-run, or install debugpy in %s (--remote-python)", g.RemotePython)})
			return
		}
		start = func(host, port string) (*probeProc, error) {
			return startShippedProbe(ctx, client, g.RemotePython, wheel, host, port, d.f.Timeout)
		}
		worker = fmt.Sprintf("a worker on the gateway with the debugpy the job ships (%s has none; %s uploaded beside the wrapper and unpacked as the executors' daemon does)",
			g.RemotePython, workerwrap.ShippedDebugpyWheel)
		needs = "to be a Python 3.8 or later"
	}
	err := d.testConnection(ctx, start, d.f.IDE, addr, d.f.Token)
	if err != nil {
		fix := err.fix
		if fix == "" && strings.Contains(err.err.Error(), "exited before connecting") {
			fix = fmt.Sprintf("the gateway needs %s %s (--remote-python), or test from an executor host instead", g.RemotePython, needs)
		}
		if !g.RemoteListenGiven && strings.Contains(err.err.Error(), "cannot reach") {
			fix = fmt.Sprintf("doctor tested the default --remote-listen %s: give doctor the --remote-listen sparkdap serve runs with", g.RemoteListen)
		}
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("to %s on the gateway: %v", addr, err.err), fix: fix})
		return
	}
	d.report(checkResult{name: name, v: vOK, detail: fmt.Sprintf("%s reached %s and was listed on the IDE port", worker, addr)})
}

// shippedWheel is where doctor gets the debugger a job ships, as
// submit, conf and wrap get it: sparkdap's cache, else pip download into
// it. A variable so that tests choose the wheel.
var shippedWheel = func(ctx context.Context) (string, error) {
	dir, err := workerwrap.DebuggerCacheDir()
	if err != nil {
		return "", err
	}
	return workerwrap.DebugpyWheel(ctx, "python3", dir)
}

// shippedDebugger is the wheel the job ships, read, within the check
// timeout.
func (d *doctor) shippedDebugger(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
	defer cancel()
	path, err := shippedWheel(ctx)
	if err != nil {
		return nil, err
	}
	if filepath.Base(path) != workerwrap.ShippedDebugpyWheel {
		return nil, fmt.Errorf("%s is not %s", path, workerwrap.ShippedDebugpyWheel)
	}
	return safefile.ReadFile(path)
}

// remoteLacksDebugpy says whether python on the gateway surely has no
// debugpy to import; a Python that does not run, or does not answer in
// time, is left to the test worker to report.
func (d *doctor) remoteLacksDebugpy(ctx context.Context, client *ssh.Client, python string) bool {
	const code = "import importlib.util\n" +
		"try:\n    spec = importlib.util.find_spec('debugpy')\nexcept Exception:\n    spec = None\n" +
		"print('sparkdap-debugpy ' + ('yes' if spec else 'no'))\n"
	sess, err := client.NewSession()
	if err != nil {
		return false
	}
	defer sess.Close()
	var stdout bytes.Buffer
	sess.Stdout = &stdout
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
	defer cancel()
	done := make(chan error, 1) // the session's Close (deferred) ends Run if it is late
	go func() { done <- sess.Run(shellquote.Quote(python) + " -c " + shellquote.Quote(code)) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return false
	}
	// A sitecustomize may print before the answer.
	return err == nil && strings.Contains("\n"+stdout.String(), "\nsparkdap-debugpy no\n")
}

// shippedProbeScript runs the test worker with the debugger the job
// ships, as an executor would: it writes the wrapper and the wheel that
// come first on its stdin (the module's name, the wheel's name and their
// sizes are its arguments) into a new private directory, imports the
// wrapper from there, so that it finds the wheel beside its own file, has
// it load its debugger as the executors' daemon does (the Python's own
// if usable, else the shipped wheel, unpacked into a private directory),
// then runs its probe (workerwrap.ProbeArgs), which reads the token from
// the rest of stdin. It removes what it unpacked as it ends.
const shippedProbeScript = `import os, shutil, sys, tempfile
module, module_size, wheel, wheel_size, host, port = sys.argv[1:7]
here = tempfile.mkdtemp(prefix="sparkdap-doctor-")
try:
    for name, size in ((module + ".py", int(module_size)), (wheel, int(wheel_size))):
        data = sys.stdin.buffer.read(size)
        if len(data) != size:
            sys.exit("sparkdap doctor: %s arrived short (%d of %d bytes)" % (name, len(data), size))
        with open(os.path.join(here, name), "wb") as f:
            f.write(data)
    sys.path.insert(0, here)
    rd = __import__(module)
    # As the probe sets them before its import of debugpy, which is now.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    os.environ.setdefault("PYDEVD_CONNECT_TIMEOUT", "10")
    try:
        try:
            rd._load_own_or_shipped(False, True)
        except Exception as exc:
            print("NODEBUGPY %s: %s" % (sys.executable, exc), flush=True)
            sys.exit(3)
        sys.exit(rd._probe(host, int(port), sys.stdin, sys.stdout))
    finally:
        rd._close_shipped()
finally:
    shutil.rmtree(here, ignore_errors=True)
`

// startShippedProbe runs the test worker with python on the gateway and
// the debugger the job ships (wheel): the wrapper and the wheel go first
// on its stdin (shippedProbeScript), within timeout.
func startShippedProbe(ctx context.Context, client *ssh.Client, python string, wheel []byte, host, port string, timeout time.Duration) (*probeProc, error) {
	var wrapper bytes.Buffer
	o := workerwrap.NewOptions()
	o.Proxy = net.JoinHostPort(host, port)
	if err := workerwrap.Render(&wrapper, o); err != nil {
		return nil, err
	}
	command := shellquote.Quote(python) + " -c " + shellquote.Quote(shippedProbeScript)
	for _, arg := range []string{workerwrap.ModuleName, strconv.Itoa(wrapper.Len()),
		workerwrap.ShippedDebugpyWheel, strconv.Itoa(len(wheel)), host, port} {
		command += " " + shellquote.Quote(arg)
	}
	p, err := startRemote(client, command)
	if err != nil {
		return nil, err
	}
	// The upload waits on the gateway's reading: bounded, as every check.
	uploaded := make(chan error, 1)
	go func() {
		_, err := p.stdin.Write(wrapper.Bytes())
		if err == nil {
			_, err = p.stdin.Write(wheel)
		}
		uploaded <- err
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case err = <-uploaded:
	case <-ctx.Done():
		err = fmt.Errorf("not read within %s", timeout)
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("upload the wrapper and %s: %w (stderr: %s)", workerwrap.ShippedDebugpyWheel, err, lastStderr(p.stderr))
	}
	return p, nil
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
