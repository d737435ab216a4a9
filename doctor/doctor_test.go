package doctor

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// debugpyPython is a real interpreter with debugpy, or the test is
// testenv.Missing.
func debugpyPython(t *testing.T) string {
	t.Helper()
	return testenv.Python(t, "debugpy")
}

// freeAddr is a loopback address nobody listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runDoctor runs every check as sparkdap doctor does, with its defaults
// where cfg leaves them, and returns the exit code the CLI would.
func runDoctor(t *testing.T, cfg Config) (int, string) {
	t.Helper()
	cfg.Timeout = 60 * time.Second
	cfg.TokenEnv, cfg.IDETokenEnv = "SPARKDAP_TOKEN", "SPARKDAP_IDE_TOKEN"
	if g := cfg.Gateway; g != nil {
		g.Timeout = 10 * time.Second
		if g.RemotePython == "" {
			g.RemotePython = "python3"
		}
	}
	var stdout bytes.Buffer
	start := time.Now()
	err := Run(context.Background(), cfg, &stdout)
	code := 0
	if err != nil {
		code = 1
	}
	t.Logf("doctor %+v → %v in %s\n%s", cfg, err, time.Since(start).Round(time.Millisecond), stdout.String())
	return code, stdout.String()
}

// line returns the output line of the check whose name starts with name.
func checkLine(t *testing.T, out, name string) string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if len(l) > 6 && strings.HasPrefix(l[6:], name) {
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "      fix: ") {
				return l + "\n" + lines[i+1]
			}
			return l
		}
	}
	t.Fatalf("no %q check in:\n%s", name, out)
	return ""
}

func wantCheck(t *testing.T, out, name string, v verdict, wants ...string) {
	t.Helper()
	l := checkLine(t, out, name)
	if !strings.HasPrefix(l, string(v)+" ") {
		t.Errorf("check %q: want %s, got %q", name, v, l)
	}
	for _, w := range wants {
		if !strings.Contains(l, w) {
			t.Errorf("check %q lacks %q: %q", name, w, l)
		}
	}
}

func TestDoctorHealthyNothingRunning(t *testing.T) {
	testenv.SkipIfShort(t, "runs Python, pyspark and Java")
	py := debugpyPython(t)
	code, out := runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t), Python: py})
	if code != 0 {
		t.Fatalf("exit %d on a healthy machine", code)
	}
	wantCheck(t, out, "IDE port", vOK, "free")
	wantCheck(t, out, "executor port", vOK, "free")
	wantCheck(t, out, "Python", vOK, "debugpy 1.")
	wantCheck(t, out, "Spark version", vOK, "pyspark ")
	wantCheck(t, out, "Java", vOK)
	wantCheck(t, out, "SSH gateway", vSkip)
	wantCheck(t, out, "test connection", vOK, "temporary proxy")
	if !strings.Contains(out, "all checks passed") {
		t.Error("no summary line")
	}
}

// startHub runs an in-process sparkdap proxy, as `sparkdap serve` would.
func startHub(t *testing.T, token string) (ide, exe string) {
	return startHubConfig(t, dap.Config{Token: token, Log: zerolog.Nop()})
}

func startHubConfig(t *testing.T, cfg dap.Config) (ide, exe string) {
	t.Helper()
	hub := dap.NewHub(cfg)
	srv, err := dap.Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv.IDEAddr().String(), srv.ExecutorAddr().String()
}

func TestDoctorRunningProxy(t *testing.T) {
	testenv.SkipIfShort(t, "runs Python, pyspark and Java for each case")
	py := debugpyPython(t)
	ide, exe := startHub(t, "doctor-tok")
	t.Run("right token", func(t *testing.T) {
		code, out := runDoctor(t, Config{IDE: ide, Executors: exe, Python: py, Token: "doctor-tok"})
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		wantCheck(t, out, "IDE port", vOK, "a sparkdap is already serving here (0 executor(s) connected)")
		wantCheck(t, out, "executor port", vOK, "a sparkdap is already serving here")
		wantCheck(t, out, "test connection", vOK, "listed on the IDE port by the running sparkdap serve")
	})
	t.Run("wrong token", func(t *testing.T) {
		code, out := runDoctor(t, Config{IDE: ide, Executors: exe, Python: py, Token: "nope"})
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		wantCheck(t, out, "test connection", vFail, "did not prove it knows the token", "fix: export SPARKDAP_TOKEN")
	})
	t.Run("no token", func(t *testing.T) {
		code, out := runDoctor(t, Config{IDE: ide, Executors: exe, Python: py})
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		wantCheck(t, out, "test connection", vFail, "no executor token was given")
	})
	t.Run("ports of different proxies", func(t *testing.T) {
		code, out := runDoctor(t, Config{IDE: ide, Executors: freeAddr(t), Python: py, Token: "doctor-tok"})
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		wantCheck(t, out, "test connection", vFail, "only one of --ide and --executors is a sparkdap")
	})
}

func TestDoctorProxyWithIDEToken(t *testing.T) {
	testenv.SkipIfShort(t, "runs Python, pyspark and Java")
	py := debugpyPython(t)
	ide, exe := startHubConfig(t, dap.Config{Token: "exe-tok", IDEToken: "ide-tok", Log: zerolog.Nop()})
	code, out := runDoctor(t, Config{IDE: ide, Executors: exe, Python: py, Token: "exe-tok"})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "IDE port", vOK, "a sparkdap is already serving here", "requires an IDE token")
	wantCheck(t, out, "test connection", vFail, "requires an IDE token", "fix: pass the proxy's IDE token: --ide-token or $SPARKDAP_IDE_TOKEN")

	code, out = runDoctor(t, Config{IDE: ide, Executors: exe, Python: py, Token: "exe-tok", IDEToken: "ide-tok"})
	if code != 0 {
		t.Fatalf("exit %d with both tokens", code)
	}
	wantCheck(t, out, "test connection", vOK, "running sparkdap serve")
}

// squatter holds a port with something that is not sparkdap: it answers
// like a web server and hangs up.
func squatter(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// silent holds a port and never says anything.
func silent(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

func TestDoctorPortBusy(t *testing.T) {
	testenv.SkipIfShort(t, "runs Python, pyspark and Java")
	py := debugpyPython(t)
	web, quiet := squatter(t), silent(t)
	start := time.Now()
	code, out := runDoctor(t, Config{IDE: web, Executors: quiet, Python: py})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	_, port, _ := net.SplitHostPort(web)
	wantCheck(t, out, "IDE port", vFail, "in use by another program (it does not answer as sparkdap)", "ss -ltnp 'sport = :"+port+"'", "another --ide")
	wantCheck(t, out, "executor port", vFail, "in use by another program", "another --executors")
	// The Python side is still checked, against a temporary proxy.
	wantCheck(t, out, "test connection", vOK, "temporary proxy")
	if !strings.Contains(out, "2 of 7 checks failed") {
		t.Error("summary does not count the two failures")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a silent port cost %s: probes must be bounded", d)
	}
}

func TestDoctorPythonWithoutDebugpy(t *testing.T) {
	py := debugpyPython(t)
	// An interpreter that exists but has no debugpy: the same Python with
	// site-packages switched off, as a bare system or venv-less Python is.
	shim := filepath.Join(t.TempDir(), "python-without-debugpy")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec "+shellquote.Quote(py)+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYSPARK_PYTHON", shim) // what Spark would use: no --python
	code, out := runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t)})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "Python "+shim+" ($PYSPARK_PYTHON)", vFail,
		"cannot import debugpy: ModuleNotFoundError: No module named 'debugpy'", "fix: "+shim+" -m pip install 'debugpy>=1.6.7,<1.9'")
	wantCheck(t, out, "Spark version", vSkip)
	wantCheck(t, out, "test connection", vSkip, "needs a Python with a debugger the wrapper uses")

	t.Setenv("PYSPARK_PYTHON", filepath.Join(t.TempDir(), "no-such-python"))
	code, out = runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t)})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "Python", vFail, "not found", "set PYSPARK_PYTHON")
}

func TestDoctorSparkVersionAndJava(t *testing.T) {
	dir := t.TempDir()
	// A fake Python whose pyspark is old, and a java that is missing.
	fake := filepath.Join(dir, "python")
	script := "#!/bin/sh\ncase \"$2\" in *pyspark*) echo 3.3.2;; *) printf 'supported\\tdebugpy\\t1.8.22\\t3.11.0\\tdebugpy 1.8.22\\n';; esac\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &doctor{f: Config{Python: fake, Java: filepath.Join(dir, "java"), Timeout: 10 * time.Second}, out: &bytes.Buffer{}}
	ctx := context.Background()
	py, ok := d.checkPython(ctx)
	if !ok {
		t.Fatalf("fake python refused: %+v", d.results)
	}
	d.checkSpark(ctx, py)
	d.checkJava(ctx)
	out := d.out.(*bytes.Buffer).String()
	wantCheck(t, out, "Spark version", vWarn, "pyspark 3.3.2", "3.5 and 4.x")
	wantCheck(t, out, "Java (--java)", vFail, "not found", "install a JDK")
}

// sshServer is a minimal SSH server: it accepts the one client key and
// refuses sessions, or with exec runs session commands here with sh -c,
// standing in for a gateway.
type sshServer struct {
	addr    string
	hostKey ssh.PublicKey
}

func startSSHServer(t *testing.T, clientKey ssh.PublicKey, execOK ...bool) sshServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), clientKey.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(90 * time.Second)) // a doctor run on a loaded machine outlasts 20 s
				sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					return
				}
				defer sc.Close()
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					if len(execOK) == 0 || !execOK[0] || nc.ChannelType() != "session" {
						_ = nc.Reject(ssh.Prohibited, "no sessions here")
						continue
					}
					ch, reqs, err := nc.Accept()
					if err != nil {
						continue
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						serveExec(ch, reqs)
					}()
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return sshServer{addr: l.Addr().String(), hostKey: hostSigner.PublicKey()}
}

// serveExec runs one session's exec request with sh -c and reports its
// exit status, like sshd.
func serveExec(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	done := make(chan struct{})
	for req := range reqs {
		switch req.Type {
		case "exec":
			var payload struct{ Command string }
			if cmd != nil || ssh.Unmarshal(req.Payload, &payload) != nil {
				_ = req.Reply(false, nil)
				continue
			}
			cmd = exec.Command("sh", "-c", payload.Command)
			cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
			cmd.WaitDelay = 5 * time.Second
			// Like sshd, the exit does not wait for the client's stdin.
			stdin, err := cmd.StdinPipe()
			if err != nil {
				_ = req.Reply(false, nil)
				return
			}
			if err := cmd.Start(); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			go func() { _, _ = io.Copy(stdin, ch); stdin.Close() }()
			_ = req.Reply(true, nil)
			go func() {
				defer close(done)
				err := cmd.Wait()
				status := uint32(0)
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					status = uint32(ee.ExitCode())
				}
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
				ch.Close()
			}()
		case "signal":
			if cmd != nil && cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
	if cmd != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		<-done
	}
}

func writeClientKey(t *testing.T, dir string) (string, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return path, signer.PublicKey()
}

func TestDoctorSSH(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	dir := t.TempDir()
	key, pub := writeClientKey(t, dir)
	otherKey, _ := writeClientKey(t, t.TempDir())
	srv := startSSHServer(t, pub)
	known := filepath.Join(dir, "known_hosts")
	empty := filepath.Join(dir, "empty_known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.addr)}, srv.hostKey)
	if err := os.WriteFile(known, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	closed := freeAddr(t)

	tests := []struct {
		name      string
		target    string
		key       string
		known     string
		v         verdict
		wants     []string
		maxDurSec int
	}{
		{name: "reachable and trusted", target: "me@" + srv.addr, key: key, known: known, v: vOK,
			wants: []string{"connected, host key verified against " + known, "authenticated as me"}},
		{name: "unknown host key", target: "me@" + srv.addr, key: key, known: empty, v: vFail,
			wants: []string{"is not in known_hosts", "SHA256:", "fix: check the fingerprint", "--ssh-accept-new-host-key"}},
		{name: "changed host key", target: "me@" + srv.addr, key: key, known: changedKnownHosts(t, srv.addr), v: vFail,
			wants: []string{"host key for", "changed", "fix: find out why the key changed"}},
		{name: "key refused", target: "me@" + srv.addr, key: otherKey, known: known, v: vFail,
			wants: []string{"refused every key", "fix: load your key into ssh-agent"}},
		{name: "nothing listening", target: "me@" + closed, key: key, known: known, v: vFail,
			wants: []string{"connection refused", "fix: nothing listens on " + closed}},
		{name: "host that does not resolve", target: "me@no-such-gateway.invalid", key: key, known: known, v: vFail,
			wants: []string{"no-such-gateway.invalid", "fix: no-such-gateway.invalid does not resolve"}},
		{name: "bad target", target: "me@", key: key, known: known, v: vFail, wants: []string{"want user@host[:port]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &doctor{f: Config{Gateway: &Gateway{Dest: tt.target, IdentityFiles: []string{tt.key}, KnownHosts: tt.known,
				Timeout: 10 * time.Second}}, out: &out}
			if c := d.checkSSH(context.Background()); c != nil {
				c.Close()
			}
			t.Log(out.String())
			wantCheck(t, out.String(), "SSH gateway", tt.v, tt.wants...)
		})
	}
}

// changedKnownHosts lists another key for addr, as after a reinstall (or
// an attack).
func changedKnownHosts(t *testing.T, addr string) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, s.PublicKey())
	if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDoctorBadAddress(t *testing.T) {
	var stdout bytes.Buffer
	d := &doctor{out: &stdout}
	if st := d.checkPort(context.Background(), "IDE port", "nonsense", "--ide", d.probeIDE); st != portError {
		t.Errorf("bad address: state %v", st)
	}
	if !strings.Contains(stdout.String(), "not HOST:PORT") {
		t.Errorf("output %q", stdout.String())
	}
}

// The test connection through the gateway: the worker runs "on the
// gateway" (here, through an SSH exec) and dials the tunnel's listen
// address, which in this test is the proxy's executor port itself.
func TestDoctorThroughGateway(t *testing.T) {
	testenv.SkipIfShort(t, "starts sshd")
	py := debugpyPython(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	dir := t.TempDir()
	key, pub := writeClientKey(t, dir)
	srv := startSSHServer(t, pub, true)
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(knownhosts.Line([]string{knownhosts.Normalize(srv.addr)}, srv.hostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ide, exe := startHub(t, "gw-tok")
	gateway := func(remotePython string) *Gateway {
		return &Gateway{Dest: "me@" + srv.addr, IdentityFiles: []string{key}, KnownHosts: known, RemoteListen: exe, RemotePython: remotePython}
	}
	common := func(remotePython string) Config {
		return Config{IDE: ide, Executors: exe, Python: py, Token: "gw-tok", Gateway: gateway(remotePython)}
	}

	code, out := runDoctor(t, common(py))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantCheck(t, out, "SSH gateway", vOK, "host key verified")
	wantCheck(t, out, "test connection through the gateway", vOK, "a debugpy worker on the gateway reached "+exe)

	shim := filepath.Join(dir, "python-without-debugpy")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec "+shellquote.Quote(py)+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out = runDoctor(t, common(shim))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "test connection through the gateway", vFail, "no debugpy in", "pip install debugpy")

	// The executors' Python is run on the gateway, as the job names it.
	t.Setenv("PYSPARK_PYTHON", py)
	viaGateway := Config{IDE: ide, Executors: exe, Token: "gw-tok", Gateway: gateway(py),
		Confs: []string{"spark.pyspark.python=" + shim}}
	code, out = runDoctor(t, viaGateway)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "executors' Python "+shim+" (spark.pyspark.python) on the gateway me@"+srv.addr, vFail,
		"cannot import debugpy: ModuleNotFoundError: No module named 'debugpy'", "fix: on the cluster's nodes")
	viaGateway.Confs, viaGateway.Gateway = nil, gateway(py)
	code, out = runDoctor(t, viaGateway)
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, "executors' Python "+py+" ($PYSPARK_PYTHON) on the gateway", vOK, "debugpy 1.")

	code, out = runDoctor(t, common(filepath.Join(dir, "no-python")))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "test connection through the gateway", vFail, "exited before connecting", "--remote-python")

	// No proxy running: the tunnel test is skipped with what to start,
	// naming the user's --remote-listen, never a default the user did not
	// choose as if it were theirs.
	for _, tc := range []struct {
		listen      string
		given       bool
		want, never string
	}{
		{"0.0.0.0:6100", true, "--remote-listen 0.0.0.0:6100' and re-run", ""},
		{"127.0.0.1:5678", false, "--remote-listen HOST:PORT' (where executors connect on the gateway), then re-run with the same --remote-listen", "127.0.0.1:5678"},
	} {
		code, out = runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t), Python: py,
			Gateway: &Gateway{Dest: "me@" + srv.addr, IdentityFiles: []string{key}, KnownHosts: known,
				RemoteListen: tc.listen, RemoteListenGiven: tc.given}})
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		wantCheck(t, out, "test connection through the gateway", vSkip, "no sparkdap serve is running",
			"fix: start 'sparkdap serve --ssh me@"+srv.addr+" "+tc.want)
		if l := checkLine(t, out, "test connection through the gateway"); tc.never != "" && strings.Contains(l, tc.never) {
			t.Errorf("--remote-listen not given: the fix names the default %s as the user's:\n%s", tc.never, l)
		}
	}

	// A running proxy that doctor's default --remote-listen does not reach:
	// the fix says doctor tried a default and needs serve's address.
	dead := freeAddr(t)
	code, out = runDoctor(t, Config{IDE: ide, Executors: exe, Python: py, Token: "gw-tok",
		Gateway: &Gateway{Dest: "me@" + srv.addr, IdentityFiles: []string{key}, KnownHosts: known,
			RemoteListen: dead, RemotePython: py}})
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "test connection through the gateway", vFail, "to "+dead+" on the gateway",
		"fix: doctor tested the default --remote-listen "+dead+": give doctor the --remote-listen sparkdap serve runs with")
}

// venv makes a real virtual environment of py in dir (with py's own
// site-packages, debugpy and pyspark among them, if shared).
func venv(t *testing.T, py, dir string, shared bool) string {
	t.Helper()
	args := []string{"-m", "venv", "--without-pip"}
	if shared {
		args = append(args, "--system-site-packages")
	}
	if out, err := exec.Command(py, append(args, dir)...).CombinedOutput(); err != nil {
		t.Fatalf("python -m venv %s: %v\n%s", dir, err, out)
	}
	return filepath.Join(dir, "bin", "python")
}

// TestDoctorChecksTheExecutorsPython: the Python checked is the one the job
// makes its executors run (spark.pyspark.python, possibly inside one of its
// --archives), not the local one, and a missing debugpy there fails the
// check even when this machine's Python has it.
func TestDoctorChecksTheExecutorsPython(t *testing.T) {
	testenv.SkipIfShort(t, "runs Python, pyspark and Java for each case")
	py := debugpyPython(t)
	t.Setenv("PYSPARK_PYTHON", py) // this machine's Python is fine
	dir := t.TempDir()
	bare := venv(t, py, filepath.Join(dir, "bare"), false)
	full := venv(t, py, filepath.Join(dir, "full"), true)
	pack := func(env, name string) string {
		t.Helper()
		tgz := filepath.Join(dir, name)
		if out, err := exec.Command("tar", "-C", env, "-czf", tgz, ".").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v\n%s", err, out)
		}
		return tgz
	}
	bareTgz, fullTgz := pack(filepath.Join(dir, "bare"), "bare.tar.gz"), pack(filepath.Join(dir, "full"), "full.tar.gz")
	job := func(confs, archives []string) Config {
		return Config{IDE: freeAddr(t), Executors: freeAddr(t), Confs: confs, Archives: archives}
	}
	inArchive := "spark.pyspark.python=./pyenv/bin/python"

	// A plain interpreter path in the job's conf.
	code, out := runDoctor(t, job([]string{"spark.pyspark.python=" + bare}, nil))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "executors' Python "+bare+" (spark.pyspark.python)", vFail,
		"cannot import debugpy: ModuleNotFoundError: No module named 'debugpy'", "or point spark.pyspark.python at an interpreter")
	code, out = runDoctor(t, job([]string{"spark.pyspark.python=" + full}, nil))
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, "executors' Python "+full+" (spark.pyspark.python)", vOK, "debugpy 1.")

	// A packed environment: unpacked to a temp dir and run there.
	code, out = runDoctor(t, job([]string{inArchive}, []string{bareTgz + "#pyenv"}))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	wantCheck(t, out, "executors' Python ./pyenv/bin/python (spark.pyspark.python, inside --archives "+bareTgz+"), unpacked here", vFail,
		"cannot import debugpy: ModuleNotFoundError: No module named 'debugpy'")
	code, out = runDoctor(t, job([]string{inArchive}, []string{"deps.zip," + fullTgz + "#pyenv"}))
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, "executors' Python ./pyenv/bin/python (spark.pyspark.python, inside --archives "+fullTgz+")", vOK, "debugpy 1.")
	wantCheck(t, out, "test connection", vOK) // with the unpacked interpreter

	// What doctor cannot check, it says.
	code, out = runDoctor(t, job([]string{inArchive}, []string{"hdfs:///envs/pyenv.tar.gz#pyenv"}))
	if code != 0 {
		t.Fatalf("exit %d, want 0 (a warning)", code)
	}
	wantCheck(t, out, "executors' Python ./pyenv/bin/python", vWarn, "not checked", "not a file on this machine")
	code, out = runDoctor(t, job([]string{inArchive}, nil))
	if code != 0 {
		t.Fatalf("exit %d, want 0 (a warning)", code)
	}
	wantCheck(t, out, "executors' Python ./pyenv/bin/python (spark.pyspark.python)", vWarn, "not checked", "--archives")
	if !strings.Contains(out, "1 with a warning") {
		t.Errorf("the summary does not say a check only warned:\n%s", out)
	}

	// The setting that looks right but is not.
	code, out = runDoctor(t, job([]string{"spark.executorEnv.PYSPARK_PYTHON=" + bare}, nil))
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	wantCheck(t, out, "spark.executorEnv.PYSPARK_PYTHON", vWarn, "does not choose the workers' Python", "spark.pyspark.python="+bare)
	wantCheck(t, out, "Python "+py+" ($PYSPARK_PYTHON)", vOK)
}
