package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/tunnel"
	"github.com/sparkdap/sparkdap/workerwrap"
)

func init() {
	register("doctor", "check ports, Python, debugpy, Spark, Java, the SSH gateway and a test connection", runDoctor)
}

// verdict is one check's outcome. Only FAIL makes doctor exit non-zero.
type verdict string

const (
	vOK   verdict = "OK"
	vWarn verdict = "WARN"
	vFail verdict = "FAIL"
	vSkip verdict = "SKIP"
)

type checkResult struct {
	name   string
	v      verdict
	detail string
	fix    string // what to do about a FAIL or WARN
}

type doctorFlags struct {
	ide, executors      string
	python, java        string
	token, ideToken     string
	ssh                 string
	remoteListen        string
	remotePython        string
	identities          stringList
	knownHosts          string
	sshTimeout, timeout time.Duration
}

// portState is what listens on an address.
type portState int

const (
	portFree portState = iota
	portSparkdap
	portOther
	portError
)

func runDoctor(args []string, stdout, stderr io.Writer) error {
	var f doctorFlags
	fs := newFlagSet("doctor", stderr)
	fs.StringVar(&f.ide, "ide", "127.0.0.1:4711", "the IDE address sparkdap serve uses (its --ide)")
	fs.StringVar(&f.executors, "executors", "127.0.0.1:5678", "the executor address sparkdap serve uses (its --executors)")
	fs.StringVar(&f.python, "python", "", "the Python the Spark workers run (default $PYSPARK_PYTHON, else python3)")
	fs.StringVar(&f.java, "java", "", "the java Spark runs (default $JAVA_HOME/bin/java, else java)")
	fs.StringVar(&f.token, "token", "", "the running proxy's executor token, for the test connection (default $"+tokenEnv+")")
	fs.StringVar(&f.ideToken, "ide-token", "", "the running proxy's IDE token, if it has one (default $"+ideTokenEnv+")")
	fs.StringVar(&f.ssh, "ssh", "", "also check this SSH gateway: user@host[:port], as for serve --ssh")
	fs.StringVar(&f.remoteListen, "remote-listen", "127.0.0.1:5678", "with --ssh: where serve's tunnel listens for executors on the gateway (serve's --remote-listen)")
	fs.StringVar(&f.remotePython, "remote-python", "python3", "with --ssh: the Python with debugpy on the gateway, for the test connection through the tunnel")
	fs.Var(&f.identities, "ssh-identity", "private key `file` for --ssh (repeatable; default: ssh-agent, then ~/.ssh/id_*)")
	fs.StringVar(&f.knownHosts, "ssh-known-hosts", tunnel.DefaultKnownHosts(), "known_hosts `file` the gateway's host key is checked against")
	fs.DurationVar(&f.sshTimeout, "ssh-timeout", 15*time.Second, "bound on reaching the gateway and the SSH handshake")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "bound on each other check")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: sparkdap doctor [--ide ADDR] [--executors ADDR] [--python PYTHON] [--ssh user@host] [flags]

Checks, each with a verdict (OK, WARN, FAIL with the reason and the fix):
  - the IDE and executor ports are free, or a sparkdap is already serving there
  - the Python that Spark uses imports debugpy
  - the Spark version (pyspark, in that Python), Java
  - the SSH gateway, if --ssh is given (host key checked against known_hosts)
  - a test connection along the whole path: a throwaway Python process says
    the wrapper's hello and calls debugpy.connect, and the proxy must list it
    on its IDE port. Against the running sparkdap serve if there is one (give
    its token), else against a temporary proxy on loopback.
  - with --ssh and a running 'sparkdap serve --ssh', the same test worker
    run on the gateway (--remote-python) against --remote-listen: through
    the tunnel to the proxy, as executors connect.
Exits 0 only if no check fails.

Examples:
  sparkdap doctor
  SPARKDAP_TOKEN=... sparkdap doctor --ide 127.0.0.1:4711 --executors 127.0.0.1:5678
  sparkdap doctor --python /opt/venvs/spark/bin/python --ssh me@edge.example.com
  SPARKDAP_TOKEN=... sparkdap doctor --ssh me@edge.example.com --remote-listen 0.0.0.0:5678

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (doctor takes only flags)", fs.Args())
	}
	if f.token == "" {
		f.token = os.Getenv(tokenEnv)
	}
	if f.ideToken == "" {
		f.ideToken = os.Getenv(ideTokenEnv)
	}
	d := &doctor{f: f, out: stdout}
	return d.run(context.Background())
}

type doctor struct {
	f       doctorFlags
	out     io.Writer
	results []checkResult
}

func (d *doctor) report(r checkResult) {
	d.results = append(d.results, r)
	fmt.Fprintf(d.out, "%-4s  %s: %s\n", r.v, r.name, r.detail)
	if r.fix != "" {
		for _, l := range strings.Split(r.fix, "\n") {
			fmt.Fprintf(d.out, "      fix: %s\n", l)
		}
	}
}

func (d *doctor) run(ctx context.Context) error {
	ideState := d.checkPort(ctx, "IDE port", d.f.ide, "--ide", d.probeIDE)
	exeState := d.checkPort(ctx, "executor port", d.f.executors, "--executors", probeExecutorPort)
	py, pyOK := d.checkPython(ctx)
	if pyOK {
		d.checkSpark(ctx, py)
	} else {
		d.report(checkResult{name: "Spark version", v: vSkip, detail: "needs a working Python (see above)"})
	}
	d.checkJava(ctx)
	gateway := d.checkSSH(ctx)
	d.checkTestConnection(ctx, py, pyOK, ideState, exeState)
	if gateway != nil {
		d.checkTunnelConnection(ctx, gateway, ideState)
		gateway.Close()
	}

	failed := 0
	for _, r := range d.results {
		if r.v == vFail {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(d.out, "\n%d of %d checks failed\n", failed, len(d.results))
		return fmt.Errorf("%d check(s) failed", failed)
	}
	fmt.Fprintf(d.out, "\nall checks passed\n")
	return nil
}

// checkPort says whether sparkdap serve can listen on addr, or is already
// listening there (probe speaks to whatever holds the port).
func (d *doctor) checkPort(ctx context.Context, what, addr, flagName string, probe func(context.Context, string) (bool, string)) portState {
	name := what + " " + addr
	if _, _, err := net.SplitHostPort(addr); err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("not HOST:PORT: %v", err),
			fix: fmt.Sprintf("pass %s HOST:PORT, e.g. 127.0.0.1:4711", flagName)})
		return portError
	}
	l, err := net.Listen("tcp", addr)
	if err == nil {
		l.Close()
		d.report(checkResult{name: name, v: vOK, detail: "free: sparkdap serve can listen here"})
		return portFree
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("cannot listen: %v", err),
			fix: fmt.Sprintf("use an address of this machine with %s (127.0.0.1:PORT for loopback)", flagName)})
		return portError
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ok, info := probe(pctx, addr); ok {
		d.report(checkResult{name: name, v: vOK, detail: "a sparkdap is already serving here" + info})
		return portSparkdap
	}
	d.report(checkResult{name: name, v: vFail,
		detail: "in use by another program (it does not answer as sparkdap)",
		fix:    fmt.Sprintf("stop that program (see: ss -ltnp 'sport = :%s'), or give sparkdap serve and doctor another %s", portOf(addr), flagName)})
	return portOther
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// probeIDE asks the listener for sparkdap's path report: only sparkdap
// knows that request, and it answers it without an attach.
func (d *doctor) probeIDE(ctx context.Context, addr string) (bool, string) {
	n, err := d.listExecutors(ctx, addr, 0)
	if err != nil {
		var refused *sparkdapRefusal
		if errors.As(err, &refused) {
			return true, " (" + refused.Error() + ")"
		}
		return false, ""
	}
	return true, fmt.Sprintf(" (%d executor(s) connected)", n)
}

// sparkdapRefusal is a sparkdap answering the status request with an error
// (e.g. an IDE token is required): still a sparkdap.
type sparkdapRefusal struct{ msg string }

func (e *sparkdapRefusal) Error() string { return e.msg }

// listExecutors sends sparkdapPaths to the IDE port. With pid > 0 it
// reports 1 if that process is among the executors, else 0.
func (d *doctor) listExecutors(ctx context.Context, addr string, pid int) (int, error) {
	c, err := dapclient.Dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var args map[string]any
	if d.f.ideToken != "" {
		args = map[string]any{dap.IDETokenArg: d.f.ideToken}
	}
	resp, err := c.Request(ctx, dap.PathsCommand, args)
	if err != nil {
		return 0, err
	}
	if err := resp.Err(); err != nil {
		if strings.Contains(err.Error(), "sparkdap") || strings.Contains(err.Error(), dap.IDETokenArg) {
			return 0, &sparkdapRefusal{msg: err.Error()}
		}
		return 0, err
	}
	// The body is {"executors": [...]}, null when there are none: the key
	// is what tells sparkdap's answer from another adapter's.
	var body map[string]json.RawMessage
	if err := resp.Decode(&body); err != nil {
		return 0, fmt.Errorf("not a sparkdap answer: %v", err)
	}
	raw, ok := body["executors"]
	if !ok {
		return 0, errors.New("not a sparkdap answer: no executors in it")
	}
	var reports []dap.PathReport
	if err := json.Unmarshal(raw, &reports); err != nil {
		return 0, fmt.Errorf("not a sparkdap answer: %v", err)
	}
	if pid <= 0 {
		return len(reports), nil
	}
	mark := fmt.Sprintf("pid %d", pid)
	for _, r := range reports {
		if strings.Contains(r.Label+" ·", mark+" ·") {
			return 1, nil
		}
	}
	return 0, nil
}

// probeExecutorPort sends a hello sparkdap refuses (no pid): a sparkdap
// answers "SPARKDAP/1 REFUSED", and nothing is admitted.
func probeExecutorPort(ctx context.Context, addr string) (bool, string) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, ""
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, `SPARKDAP/1 {"pid": 0, "label": "sparkdap doctor port probe"}`+"\n"); err != nil {
		return false, ""
	}
	var buf []byte
	chunk := make([]byte, 4096)
	for len(buf) < 64<<10 {
		n, err := conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if i := bytes.Index(buf, []byte("SPARKDAP/1 ")); i >= 0 && bytes.IndexByte(buf[i:], '\n') >= 0 {
			return true, ""
		}
		if err != nil {
			return false, ""
		}
	}
	return false, ""
}

// pythonFor resolves the interpreter Spark's workers run.
func (d *doctor) pythonFor() (name, why string) {
	switch {
	case d.f.python != "":
		return d.f.python, "--python"
	case os.Getenv("PYSPARK_PYTHON") != "":
		return os.Getenv("PYSPARK_PYTHON"), "$PYSPARK_PYTHON"
	}
	return "python3", "PYSPARK_PYTHON is unset, so Spark runs python3 from PATH"
}

// runPython runs py -c code with the check timeout; it returns stdout and,
// on failure, the last line of stderr (the exception) as the error.
func (d *doctor) runPython(ctx context.Context, py, code string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d.f.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", code)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("no answer within %s", d.f.timeout)
	}
	if err != nil {
		if last := lastLine(stderr.String()); last != "" {
			return "", errors.New(last)
		}
		return "", err
	}
	return strings.TrimSpace(stdout.String()), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func (d *doctor) checkPython(ctx context.Context) (string, bool) {
	py, why := d.pythonFor()
	name := "Python " + py + " (" + why + ")"
	path, err := exec.LookPath(py)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "not found: " + err.Error(),
			fix: "install Python 3, or set PYSPARK_PYTHON (and --python here) to an interpreter's path"})
		return py, false
	}
	out, err := d.runPython(ctx, path, "import sys, debugpy; print(debugpy.__version__, sys.version.split()[0], sys.executable)")
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "cannot import debugpy: " + err.Error(),
			fix: fmt.Sprintf("%s -m pip install debugpy   (on every executor too), or point PYSPARK_PYTHON at an interpreter that has it", shellQuote(path))})
		return path, false
	}
	f := strings.Fields(out)
	if len(f) < 3 {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("unexpected answer %q", out)})
		return path, false
	}
	d.report(checkResult{name: name, v: vOK, detail: fmt.Sprintf("debugpy %s, Python %s (%s)", f[0], f[1], strings.Join(f[2:], " "))})
	return path, true
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

func (d *doctor) checkSpark(ctx context.Context, py string) {
	name := "Spark version"
	out, err := d.runPython(ctx, py, "import pyspark; print(pyspark.__version__)")
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("%s cannot import pyspark: %v", py, err),
			fix: fmt.Sprintf("%s -m pip install pyspark (matching your cluster's Spark), or add $SPARK_HOME/python to PYTHONPATH", shellQuote(py))})
		return
	}
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		d.report(checkResult{name: name, v: vWarn, detail: fmt.Sprintf("pyspark reports version %q, which sparkdap cannot read", out)})
		return
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if (major == 3 && minor >= 5) || major == 4 {
		d.report(checkResult{name: name, v: vOK, detail: "pyspark " + out})
		return
	}
	d.report(checkResult{name: name, v: vWarn, detail: "pyspark " + out + ": sparkdap is made and tested for Spark 3.5 and 4.x",
		fix: "the worker wrapper may still work; if breakpoints never bind, try Spark 3.5 or later"})
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?`)

func (d *doctor) checkJava(ctx context.Context) {
	java, why := d.f.java, "--java"
	if java == "" {
		java, why = "java", "from PATH"
		if home := os.Getenv("JAVA_HOME"); home != "" {
			java, why = filepath.Join(home, "bin", "java"), "$JAVA_HOME"
		}
	}
	name := "Java (" + why + ")"
	path, err := exec.LookPath(java)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("%s not found: %v", java, err),
			fix: "install a JDK (Spark 4 needs Java 17 or 21; 3.5 runs on 8, 11, 17) and put it on PATH or set JAVA_HOME"})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.f.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-version")
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("%s -version failed: %v: %s", path, err, lastLine(string(out))),
			fix: "repair or reinstall the JDK, or set JAVA_HOME to a working one"})
		return
	}
	first := lastLine(strings.SplitN(string(out), "\n", 2)[0])
	m := javaVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		d.report(checkResult{name: name, v: vWarn, detail: "unrecognised version: " + first})
		return
	}
	major, _ := strconv.Atoi(m[1])
	if major == 1 && m[2] != "" { // 1.8 = Java 8
		major, _ = strconv.Atoi(m[2])
	}
	if major < 17 {
		d.report(checkResult{name: name, v: vWarn, detail: first + ": Spark 4 needs Java 17 or later",
			fix: "fine for Spark 3.5; for Spark 4 install Java 17 and set JAVA_HOME"})
		return
	}
	d.report(checkResult{name: name, v: vOK, detail: first})
}

// checkSSH dials the gateway; the client it returns (nil on failure) is
// for the test connection through the tunnel.
func (d *doctor) checkSSH(ctx context.Context) *ssh.Client {
	if d.f.ssh == "" {
		d.report(checkResult{name: "SSH gateway", v: vSkip, detail: "no --ssh given (executors reach this machine directly)"})
		return nil
	}
	name := "SSH gateway " + d.f.ssh
	target, err := tunnel.ParseTarget(d.f.ssh)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: err.Error(), fix: "pass --ssh user@host[:port]"})
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, d.f.sshTimeout+5*time.Second)
	defer cancel()
	client, err := tunnel.Dial(dctx, tunnel.DialConfig{Target: target, IdentityFiles: d.f.identities,
		KnownHostsFile: d.f.knownHosts, Timeout: d.f.sshTimeout, Log: zerolog.Nop()})
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: err.Error(), fix: sshFix(err, target)})
		return nil
	}
	detail := fmt.Sprintf("connected, host key verified against %s, authenticated as %s", d.f.knownHosts, target.User)
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

// checkTunnelConnection runs the test worker on the gateway: it connects
// where executors would (serve's --remote-listen), through the tunnel to
// the running proxy, which must list it on the IDE port.
func (d *doctor) checkTunnelConnection(ctx context.Context, client *ssh.Client, ide portState) {
	name := "test connection through the gateway (worker on the gateway → tunnel → proxy → IDE port)"
	if ide != portSparkdap {
		d.report(checkResult{name: name, v: vSkip, detail: "no sparkdap serve is running on " + d.f.ide,
			fix: fmt.Sprintf("start 'sparkdap serve --ssh %s --remote-listen %s' and re-run to test the tunnel", d.f.ssh, d.f.remoteListen)})
		return
	}
	if d.f.token == "" {
		d.report(checkResult{name: name, v: vFail, detail: "no executor token was given",
			fix: "export " + tokenEnv + " (the token sparkdap serve uses) or pass --token"})
		return
	}
	addr := d.f.remoteListen
	if h, p, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", p) // what listens on all addresses listens on loopback too
		}
	}
	err := d.testConnection(ctx, func(host, port string) (*probeProc, error) {
		return startRemoteProbe(client, d.f.remotePython, host, port)
	}, d.f.ide, addr, d.f.token)
	if err != nil {
		fix := err.fix
		if fix == "" && strings.Contains(err.err.Error(), "exited before connecting") {
			fix = fmt.Sprintf("the gateway needs %s with debugpy (--remote-python), or test from an executor host instead", d.f.remotePython)
		}
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("to %s on the gateway: %v", addr, err.err), fix: fix})
		return
	}
	d.report(checkResult{name: name, v: vOK, detail: fmt.Sprintf("a debugpy worker on the gateway reached %s and was listed on the IDE port", addr)})
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
	if strings.Contains(err.Error(), "no SSH keys") {
		return "start ssh-agent and ssh-add your key, or pass --ssh-identity FILE"
	}
	return fmt.Sprintf("check that 'ssh -p %d %s@%s true' works from this machine", t.Port, t.User, t.Host)
}

// The worker side of the test connection is the wrapper's own hello client
// (workerwrap.ProbeArgs: the hello, then debugpy.connect, then it stays
// connected until its stdin closes). The token comes on stdin's first line,
// never on a command line.

func (d *doctor) checkTestConnection(ctx context.Context, py string, pyOK bool, ide, exe portState) {
	name := "test connection (hello → debugpy.connect → proxy → IDE port)"
	if !pyOK {
		d.report(checkResult{name: name, v: vSkip, detail: "needs a Python with debugpy (see above)"})
		return
	}
	ideAddr, exeAddr, token := d.f.ide, d.f.executors, d.f.token
	against := "the running sparkdap serve"
	switch {
	case ide == portSparkdap && exe == portSparkdap:
		if token == "" {
			d.report(checkResult{name: name, v: vFail, detail: "a sparkdap is serving, but no executor token was given",
				fix: "export " + tokenEnv + " (the token sparkdap serve printed or was given) or pass --token"})
			return
		}
	case ide == portSparkdap || exe == portSparkdap:
		d.report(checkResult{name: name, v: vFail,
			detail: "only one of --ide and --executors is a sparkdap; they must be the two ports of the same sparkdap serve",
			fix:    "pass the --ide and --executors addresses sparkdap serve was started with"})
		return
	default:
		// No sparkdap running: test the Python side against a temporary
		// proxy, so a healthy machine can be told from a broken one before
		// anything is started.
		tok := make([]byte, 16)
		_, _ = rand.Read(tok)
		token = hex.EncodeToString(tok)
		hub := dap.NewHub(dap.Config{Token: token, Log: zerolog.Nop()})
		srv, err := dap.Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
		if err != nil {
			d.report(checkResult{name: name, v: vFail, detail: "cannot start a temporary proxy: " + err.Error()})
			return
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() { _ = srv.Serve(sctx); close(served) }()
		defer func() { stop(); <-served }()
		ideAddr, exeAddr = srv.IDEAddr().String(), srv.ExecutorAddr().String()
		against = "a temporary proxy on " + exeAddr + " (no sparkdap serve is running; start one and re-run to test yours)"
	}
	err := d.testConnection(ctx, func(host, port string) (*probeProc, error) {
		return startLocalProbe(py, host, port)
	}, ideAddr, exeAddr, token)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("against %s: %v", against, err.err), fix: err.fix})
		return
	}
	d.report(checkResult{name: name, v: vOK, detail: "a debugpy worker was admitted and listed on the IDE port by " + against})
}

type pathError struct {
	err error
	fix string
}

// probeProc is a running test worker (workerwrap.ProbeArgs), here or on the gateway.
type probeProc struct {
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *syncbuf.Buffer // the probe's stderr, for error messages
	wait   func() error
	kill   func()
}

// startLocalProbe runs the probe with py on this machine.
func startLocalProbe(py, host, port string) (*probeProc, error) {
	cmd := exec.Command(py, workerwrap.ProbeArgs(host, port)...)
	p := &probeProc{stderr: &syncbuf.Buffer{}}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.wait = cmd.Wait
	p.kill = func() { _ = cmd.Process.Kill() }
	return p, nil
}

// startRemoteProbe runs the probe with python on the gateway, over SSH.
func startRemoteProbe(client *ssh.Client, python, host, port string) (*probeProc, error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	p := &probeProc{stderr: &syncbuf.Buffer{}}
	if p.stdin, err = sess.StdinPipe(); err != nil {
		sess.Close()
		return nil, err
	}
	if p.stdout, err = sess.StdoutPipe(); err != nil {
		sess.Close()
		return nil, err
	}
	sess.Stderr = p.stderr
	command := shellQuote(python)
	for _, arg := range workerwrap.ProbeArgs(host, port) {
		command += " " + shellQuote(arg)
	}
	if err := sess.Start(command); err != nil {
		sess.Close()
		return nil, err
	}
	p.wait = sess.Wait
	p.kill = func() { _ = sess.Signal(ssh.SIGKILL); sess.Close() }
	return p, nil
}

// testConnection runs one probe worker against the executor address
// (as start dials it) and checks the IDE port lists it.
func (d *doctor) testConnection(ctx context.Context, start func(host, port string) (*probeProc, error), ideAddr, exeAddr, token string) *pathError {
	host, port, err := net.SplitHostPort(exeAddr)
	if err != nil {
		return &pathError{err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, d.f.timeout)
	defer cancel()
	p, err := start(host, port)
	if err != nil {
		return &pathError{err: fmt.Errorf("start the test worker: %w", err)}
	}
	if _, err := io.WriteString(p.stdin, token+"\n"); err != nil {
		p.kill()
		return &pathError{err: fmt.Errorf("start the test worker: %w", err)}
	}
	exited := make(chan struct{})
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(p.stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = p.wait()
		close(exited)
	}()
	defer func() {
		p.stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			p.kill()
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return &pathError{err: fmt.Errorf("the worker did not finish connecting within %s (stderr: %s)", d.f.timeout, lastStderr(p.stderr)),
				fix: "is the proxy overloaded or stopped? sparkdap serve --log-level debug shows each connection"}
		case line, ok := <-lines:
			if !ok {
				return &pathError{err: fmt.Errorf("the worker exited before connecting: %s", lastStderr(p.stderr))}
			}
			verb, rest, _ := strings.Cut(line, " ")
			switch verb {
			case "UNREACHABLE":
				return &pathError{err: errors.New("the worker cannot reach " + rest),
					fix: "is sparkdap serve (and its tunnel) up, and is " + exeAddr + " the address executors use?"}
			case "REFUSED":
				fix := ""
				if strings.Contains(rest, "token") {
					fix = "export " + tokenEnv + " with the token sparkdap serve uses (the executors need the same one), or pass --token"
				} else if strings.Contains(rest, "session limit") {
					fix = "raise serve's --max-sessions, or wait for debugged tasks to finish"
				}
				return &pathError{err: errors.New("the proxy refused the worker: " + rest), fix: fix}
			case "NOHELLO":
				return &pathError{err: errors.New(rest), fix: exeAddr + " is not a sparkdap executor port"}
			case "UNPROVEN":
				return &pathError{err: errors.New(rest),
					fix: "export " + tokenEnv + " with the token sparkdap serve uses, or pass --token; if it is right, another program holds " + exeAddr + " (ss -ltnp shows whose)"}
			case "NODEBUGPY":
				return &pathError{err: errors.New("no debugpy in " + rest), fix: "pip install debugpy in the Python the executors run"}
			case "CONNECTED":
				// debugpy.connect returns once the proxy's handshake is
				// done: the IDE port must now list this process.
				pid, err := strconv.Atoi(rest)
				if err != nil {
					return &pathError{err: fmt.Errorf("test worker said %q", line)}
				}
				return d.waitListed(ctx, ideAddr, pid)
			}
		}
	}
}

func (d *doctor) waitListed(ctx context.Context, ideAddr string, pid int) *pathError {
	var last error
	for {
		n, err := d.listExecutors(ctx, ideAddr, pid)
		if err == nil && n == 1 {
			return nil
		}
		var refused *sparkdapRefusal
		if errors.As(err, &refused) { // asking again will not help
			return &pathError{err: err, fix: "pass the proxy's IDE token: --ide-token or $" + ideTokenEnv}
		}
		last = err
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("the worker connected but the IDE port does not list it")
			}
			return &pathError{err: last, fix: "the proxy admitted the worker but does not list it: see sparkdap serve's log (--log-level debug)"}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lastStderr is the last line a probe wrote to stderr (the exception), for
// error messages.
func lastStderr(b *syncbuf.Buffer) string {
	if l := lastLine(b.String()); l != "" {
		return l
	}
	return "(nothing on stderr)"
}
