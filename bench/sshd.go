package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

const sshdPath = "/usr/sbin/sshd"

// gateway is an OpenSSH sshd on loopback with generated keys, as in
// integration/tunnel_test.go.
type gateway struct {
	Host, User string
	Port       int
	Dir        string
	ClientKey  string
	KnownHosts string
	cmd        *exec.Cmd
	log        *lockedBuffer
	exited     chan struct{}
}

func writeKey(path string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewPublicKey(pub)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startGateway(ctx context.Context) (*gateway, error) {
	if _, err := os.Stat(sshdPath); err != nil {
		return nil, fmt.Errorf("needs OpenSSH's server at %s: %w", sshdPath, err)
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "sparkdap-bench-sshd")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	g := &gateway{Host: "127.0.0.1", Port: port, User: u.Username, Dir: dir, ClientKey: filepath.Join(dir, "client_key"),
		KnownHosts: filepath.Join(dir, "known_hosts"), log: &lockedBuffer{}, exited: make(chan struct{})}
	hostKeyFile := filepath.Join(dir, "host_key")
	hostKey, err := writeKey(hostKeyFile)
	if err != nil {
		return nil, err
	}
	clientPub, err := writeKey(g.ClientKey)
	if err != nil {
		return nil, err
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		return nil, err
	}
	line := "[127.0.0.1]:" + strconv.Itoa(port) + " " + string(ssh.MarshalAuthorizedKey(hostKey))
	if err := os.WriteFile(g.KnownHosts, []byte(line), 0o600); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"Port " + strconv.Itoa(port),
		"ListenAddress 127.0.0.1",
		"HostKey " + hostKeyFile,
		"AuthorizedKeysFile " + authorized,
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"StrictModes no",
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"AllowTcpForwarding yes",
		"MaxStartups 50",
		"LogLevel INFO",
	}, "\n") + "\n"
	confFile := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	g.cmd = exec.Command(sshdPath, "-D", "-e", "-f", confFile)
	g.cmd.Stderr, g.cmd.Stdout = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sshd: %w", err)
	}
	go func() { g.cmd.Wait(); close(g.exited) }()
	hostport := net.JoinHostPort(g.Host, strconv.Itoa(port))
	for range 500 {
		c, err := net.DialTimeout("tcp", hostport, time.Second)
		if err == nil {
			c.Close()
			return g, nil
		}
		select {
		case <-g.exited:
			g.close()
			return nil, fmt.Errorf("sshd exited at start: %s", g.log)
		case <-ctx.Done():
			g.close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	g.close()
	return nil, fmt.Errorf("sshd never listened on %s: %s", hostport, g.log)
}

func (g *gateway) close() {
	if g.cmd != nil && g.cmd.Process != nil {
		_ = g.cmd.Process.Kill()
		select {
		case <-g.exited:
		case <-time.After(5 * time.Second):
		}
	}
	os.RemoveAll(g.Dir)
}

// sshForward is `ssh -N -L` from a local port to target through the gateway.
type sshForward struct {
	Addr   string
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
}

func startSSHForward(ctx context.Context, g *gateway, target, cipher string) (*sshForward, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	f := &sshForward{Addr: "127.0.0.1:" + strconv.Itoa(port), log: &lockedBuffer{}, exited: make(chan struct{})}
	args := []string{"-N", "-F", "/dev/null", "-i", g.ClientKey, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + g.KnownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		"-o", "ExitOnForwardFailure=yes", "-p", strconv.Itoa(g.Port), "-L", f.Addr + ":" + target}
	if cipher != "" {
		args = append(args, "-c", cipher)
	}
	args = append(args, g.User+"@"+g.Host)
	f.cmd = exec.Command("ssh", args...)
	f.cmd.Stderr, f.cmd.Stdout = f.log, f.log
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	go func() { f.cmd.Wait(); close(f.exited) }()
	for range 500 {
		c, err := net.DialTimeout("tcp", f.Addr, time.Second)
		if err == nil {
			c.Close()
			return f, nil
		}
		select {
		case <-f.exited:
			return nil, fmt.Errorf("ssh -L exited: %s", f.log)
		case <-ctx.Done():
			f.close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	f.close()
	return nil, fmt.Errorf("ssh -L never listened on %s: %s", f.Addr, f.log)
}

func (f *sshForward) close() {
	_ = f.cmd.Process.Kill()
	select {
	case <-f.exited:
	case <-time.After(5 * time.Second):
	}
}
