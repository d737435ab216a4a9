package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/sparkdap/sparkdap/testkit/sshdtest"
)

// gateway is a real OpenSSH sshd on loopback with generated keys, in a
// temporary directory of its own.
type gateway struct{ *sshdtest.Gateway }

func startGateway(ctx context.Context) (*gateway, error) {
	dir, err := os.MkdirTemp("", "sparkdap-bench-sshd")
	if err != nil {
		return nil, err
	}
	g, err := sshdtest.Start(ctx, "127.0.0.1", dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &gateway{g}, nil
}

func (g *gateway) close() {
	g.Close()
	os.RemoveAll(g.Dir)
}

func freePort() (int, error) { return sshdtest.FreePort("127.0.0.1") }

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
