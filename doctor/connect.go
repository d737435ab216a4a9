package doctor

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
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/sparkdap/sparkdap/admission"
	"golang.org/x/crypto/ssh"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/workerwrap"
)

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

// portState is what listens on an address.
type portState int

const (
	portFree portState = iota
	portSparkdap
	portOther
	portError
)

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
	if d.f.IDEToken != "" {
		args = map[string]any{dap.IDETokenArg: d.f.IDEToken}
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

// probeExecutorPort sends sparkdap's port probe: a sparkdap answers in an
// old hello's refusal form ("SPARKDAP/1 REFUSED"), admits nothing and
// reports no refused worker.
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
	if _, err := io.WriteString(conn, admission.ProbeLine); err != nil {
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

// The worker side of the test connection is the wrapper's own hello client
// (workerwrap.ProbeArgs: the hello, then debugpy.connect, then it stays
// connected until its stdin closes). The token comes on stdin's first line,
// never on a command line.

func (d *doctor) checkTestConnection(ctx context.Context, py string, pyOK bool, ide, exe portState) {
	name := "test connection (hello → debugpy.connect → proxy → IDE port)"
	if !pyOK {
		d.report(checkResult{name: name, v: vSkip, detail: "needs a Python with a debugger the wrapper uses (see above)"})
		return
	}
	ideAddr, exeAddr, token := d.f.IDE, d.f.Executors, d.f.Token
	against := "the running sparkdap serve"
	switch {
	case ide == portSparkdap && exe == portSparkdap:
		if token == "" {
			d.report(checkResult{name: name, v: vFail, detail: "a sparkdap is serving, but no executor token was given",
				fix: "export " + d.f.TokenEnv + " (the token sparkdap serve printed or was given) or pass --token"})
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
	command := shellquote.Quote(python)
	for _, arg := range workerwrap.ProbeArgs(host, port) {
		command += " " + shellquote.Quote(arg)
	}
	return startRemote(client, command)
}

// startRemote runs a test worker's shell command on the gateway, in an SSH
// session of its own.
func startRemote(client *ssh.Client, command string) (*probeProc, error) {
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
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
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
			return &pathError{err: fmt.Errorf("the worker did not finish connecting within %s (stderr: %s)", d.f.Timeout, lastStderr(p.stderr)),
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
					fix = "export " + d.f.TokenEnv + " with the token sparkdap serve uses (the executors need the same one), or pass --token"
				} else if strings.Contains(rest, "session limit") {
					fix = "raise serve's --max-sessions, or wait for debugged tasks to finish"
				}
				return &pathError{err: errors.New("the proxy refused the worker: " + rest), fix: fix}
			case "NOHELLO":
				return &pathError{err: errors.New(rest), fix: exeAddr + " is not a sparkdap executor port"}
			case "UNPROVEN":
				return &pathError{err: errors.New(rest),
					fix: "export " + d.f.TokenEnv + " with the token sparkdap serve uses, or pass --token; if it is right, another program holds " + exeAddr + " (ss -ltnp shows whose)"}
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
			return &pathError{err: err, fix: "pass the proxy's IDE token: --ide-token or $" + d.f.IDETokenEnv}
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
