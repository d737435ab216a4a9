package tunnel

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/crypto/ssh"
)

// forwardLink is a tcpip-forward on the gateway, as with ssh -R: sshd
// itself listens and opens one SSH channel per executor connection. It
// needs nothing installed on the gateway, but the gateway's sshd must allow
// remote forwarding (AllowTcpForwarding, and GatewayPorts for a
// non-loopback address), and pydevd's connection then ends at sshd, which
// does not re-arm TCP_QUICKACK: expect pydevd's ~40 ms per message there.
type forwardLink struct {
	l net.Listener
}

func startForward(client *ssh.Client, addr string) (*forwardLink, error) {
	l, err := client.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remote forward %s (tcpip-forward refused: is AllowTcpForwarding on, the port free, and for a non-loopback address GatewayPorts clientspecified?): %w", addr, err)
	}
	return &forwardLink{l: l}, nil
}

func (f *forwardLink) addr() string { return f.l.Addr().String() }

// serve hands every forwarded connection to handle until the listener or
// its SSH connection dies.
func (f *forwardLink) serve(ctx context.Context, handle func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { f.l.Close() })
	defer stop()
	for {
		c, err := f.l.Accept()
		if err != nil {
			f.l.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("remote forward %s ended: %w", f.l.Addr(), err)
		}
		handle(c)
	}
}
