package tunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
)

// The stream header is what the agent writes first on every yamux stream,
// before any byte of the executor's: the address the executor's connection
// came from, as the agent saw it. Without it every stream would look to the
// proxy as if from one place, so the proxy's per-source limits could not
// tell one host from another (and would share one budget between a
// flooding peer and every real worker).
//
//	byte 0     version (streamHeaderVersion)
//	byte 1     n, the address's length, 1..maxSourceAddrLen
//	bytes 2..  the address, "IP:port" in netip.AddrPort's canonical form
//
// The proxy reads exactly one header, never more, and refuses anything not
// in canonical form. The version is also the preamble's business (an agent
// of another protocol is refused before any stream), so a bad header means
// a broken or foreign agent.
const (
	streamHeaderVersion = 1
	// maxSourceAddrLen fits the longest IPv6 address with a zone and port:
	// "[" 39 "%" 15 "]:" 5 = 63.
	maxSourceAddrLen = 64
)

// ErrStreamHeader is wrapped by every error about a stream header.
var ErrStreamHeader = errors.New("bad tunnel stream header")

// errShortHeader: the header is incomplete (parseStreamHeader wants more).
var errShortHeader = fmt.Errorf("%w: truncated", ErrStreamHeader)

// appendStreamHeader appends the header for an executor connection from
// src to b. An IPv4-mapped IPv6 address is written as the IPv4 one.
func appendStreamHeader(b []byte, src netip.AddrPort) ([]byte, error) {
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if !src.IsValid() || src.Port() == 0 {
		return b, fmt.Errorf("%w: no source address (%v)", ErrStreamHeader, src)
	}
	s := src.String()
	if len(s) > maxSourceAddrLen {
		return b, fmt.Errorf("%w: source address %q longer than %d bytes", ErrStreamHeader, s, maxSourceAddrLen)
	}
	b = append(b, streamHeaderVersion, byte(len(s)))
	return append(b, s...), nil
}

// parseStreamHeader parses the header at the start of b, returning the
// source address and the header's length; errShortHeader if b holds only
// part of one.
func parseStreamHeader(b []byte) (netip.AddrPort, int, error) {
	if len(b) < 1 {
		return netip.AddrPort{}, 0, errShortHeader
	}
	if b[0] != streamHeaderVersion {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: version %d, this sparkdap speaks %d: the agent on the gateway is another sparkdap version",
			ErrStreamHeader, b[0], streamHeaderVersion)
	}
	if len(b) < 2 {
		return netip.AddrPort{}, 0, errShortHeader
	}
	n := int(b[1])
	if n == 0 || n > maxSourceAddrLen {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: address length %d, want 1..%d", ErrStreamHeader, n, maxSourceAddrLen)
	}
	if len(b) < 2+n {
		return netip.AddrPort{}, 0, errShortHeader
	}
	s := string(b[2 : 2+n])
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: address %q: %w", ErrStreamHeader, s, err)
	}
	if ap.Port() == 0 || ap.Addr().Is4In6() || ap.String() != s {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: address %q is not a canonical IP:port", ErrStreamHeader, s)
	}
	return ap, 2 + n, nil
}

// readStreamHeader reads one header from r, and not a byte more: what
// follows is the executor's.
func readStreamHeader(r io.Reader) (netip.AddrPort, error) {
	var buf [2 + maxSourceAddrLen]byte
	if _, err := io.ReadFull(r, buf[:2]); err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %w", ErrStreamHeader, err)
	}
	if _, _, err := parseStreamHeader(buf[:2]); err != errShortHeader {
		return netip.AddrPort{}, err // the version or the length is wrong
	}
	n := 2 + int(buf[1])
	if _, err := io.ReadFull(r, buf[2:n]); err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %w", ErrStreamHeader, err)
	}
	ap, _, err := parseStreamHeader(buf[:n])
	return ap, err
}

// sourceConn is a tunnel stream that reports the executor's own address,
// from its stream header, as RemoteAddr: the proxy's budgets, hello keys
// and logs then see the executor, not the tunnel.
type sourceConn struct {
	net.Conn
	remote net.Addr
}

func (c *sourceConn) RemoteAddr() net.Addr { return c.remote }
