// Package sshdtest runs a real OpenSSH sshd with generated keys on a given
// address (loopback, or one in a network namespace the caller made), for
// the tunnel tests and benchmarks: a host key written to a known_hosts
// file, one authorized client key, root allowed by key. `sshd -D` keeps one
// listener process; each connection is served by its children.
package sshdtest

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

	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// Path is where Debian's openssh-server puts sshd.
const Path = "/usr/sbin/sshd"

// Gateway is a running sshd and what a client needs to use it.
type Gateway struct {
	Host       string
	Port       int
	User       string
	Dir        string
	ClientKey  string // private key sshd accepts
	KnownHosts string // holds sshd's host key
	HostKey    ssh.PublicKey

	cmd    *exec.Cmd
	log    *syncbuf.Buffer
	exited chan struct{}
}

// Start runs sshd on host, keeping its files in dir, and returns once it
// accepts connections.
func Start(ctx context.Context, host, dir string) (*Gateway, error) {
	if _, err := os.Stat(Path); err != nil {
		return nil, fmt.Errorf("needs OpenSSH's server at %s (apt-get install openssh-server): %w", Path, err)
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start without its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, err
		}
	}
	port, err := FreePort(host)
	if err != nil {
		return nil, err
	}
	g := &Gateway{Host: host, Port: port, User: u.Username, Dir: dir,
		ClientKey: filepath.Join(dir, "client_key"), KnownHosts: filepath.Join(dir, "known_hosts"),
		log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	hostKeyFile := filepath.Join(dir, "host_key")
	if g.HostKey, err = WriteKey(hostKeyFile); err != nil {
		return nil, err
	}
	clientPub, err := WriteKey(g.ClientKey)
	if err != nil {
		return nil, err
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		return nil, err
	}
	line := "[" + host + "]:" + strconv.Itoa(port) + " " + string(ssh.MarshalAuthorizedKey(g.HostKey))
	if err := os.WriteFile(g.KnownHosts, []byte(line), 0o600); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"Port " + strconv.Itoa(port),
		"ListenAddress " + host,
		"HostKey " + hostKeyFile,
		"AuthorizedKeysFile " + authorized,
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"StrictModes no",
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"AllowTcpForwarding yes",
		"GatewayPorts clientspecified",
		// scp (OpenSSH 9's copies the files over SFTP).
		"Subsystem sftp internal-sftp",
		"MaxStartups 50",
		"LogLevel VERBOSE",
	}, "\n") + "\n"
	confFile := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	g.cmd = exec.Command(Path, "-D", "-e", "-f", confFile)
	g.cmd.Stderr, g.cmd.Stdout = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sshd: %w", err)
	}
	go func() { g.cmd.Wait(); close(g.exited) }()
	hostport := net.JoinHostPort(host, strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", hostport, time.Second)
		if err == nil {
			c.Close()
			return g, nil
		}
		select {
		case <-g.exited:
			return nil, fmt.Errorf("sshd exited at start:\n%s", g.Log())
		case <-ctx.Done():
			g.Close()
			return nil, fmt.Errorf("sshd never listened on %s: %w\n%s", hostport, ctx.Err(), g.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.Close()
			return nil, fmt.Errorf("sshd never listened on %s\n%s", hostport, g.Log())
		}
	}
}

// Target is user@host:port, as `serve --ssh` takes it.
func (g *Gateway) Target() string {
	return g.User + "@" + net.JoinHostPort(g.Host, strconv.Itoa(g.Port))
}

// PID is the sshd listener's process id; client connections are its
// children.
func (g *Gateway) PID() int { return g.cmd.Process.Pid }

// Log is what sshd has written so far.
func (g *Gateway) Log() string { return g.log.String() }

// Close stops sshd (and with it every connection's child).
func (g *Gateway) Close() {
	_ = g.cmd.Process.Kill()
	select {
	case <-g.exited:
	case <-time.After(5 * time.Second):
	}
}

// WriteKey generates an ed25519 key, writes the private half in OpenSSH
// format to path and returns the public half.
func WriteKey(path string) (ssh.PublicKey, error) {
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

// FreePort returns a TCP port free on host just now.
func FreePort(host string) (int, error) {
	ports, err := FreePorts(host, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports free on host just now. Every
// listener stays open until all n are picked: the kernel may hand a port
// that was just closed to the next bind of port 0, and a daemon given the
// same port twice fails to start.
func FreePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
