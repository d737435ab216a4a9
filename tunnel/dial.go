package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Target is the gateway as the user wrote it: user@host[:port].
type Target struct {
	User string
	Host string
	Port int
}

// ErrBadTarget is ParseTarget's error: the text is not user@host[:port].
var ErrBadTarget = errors.New("not an SSH target")

// ErrNoKnownHosts is Dial's error when no known_hosts file is given and
// there is no home directory for the default one.
var ErrNoKnownHosts = errors.New("no known_hosts file (no home directory for the default)")

// ErrNoKeys is Dial's error when there is no key to offer: no ssh-agent
// and none of the identity files readable.
var ErrNoKeys = errors.New("no SSH keys to offer")

// IdentityError is Dial's error for an identity file given explicitly
// that cannot be used.
type IdentityError struct {
	File string
	Err  error
}

func (e *IdentityError) Error() string { return "identity file " + e.File + ": " + e.Err.Error() }
func (e *IdentityError) Unwrap() error { return e.Err }

// ParseTarget reads user@host[:port]; the user defaults to the local one
// and the port to 22, as with ssh(1). IPv6 hosts need brackets when a port
// is given: user@[::1]:2222.
func ParseTarget(s string) (Target, error) {
	var t Target
	rest := s
	if i := strings.LastIndex(s, "@"); i >= 0 {
		t.User, rest = s[:i], s[i+1:]
		if t.User == "" {
			return Target{}, fmt.Errorf("%w %q: empty user before @", ErrBadTarget, s)
		}
	} else {
		u, err := user.Current()
		if err != nil {
			return Target{}, fmt.Errorf("%w %q: no user given and the local one is unknown: %w", ErrBadTarget, s, err)
		}
		t.User = u.Username
	}
	t.Port = 22
	if h, p, err := net.SplitHostPort(rest); err == nil {
		port, perr := strconv.Atoi(p)
		if perr != nil || port < 1 || port > 65535 {
			return Target{}, fmt.Errorf("%w %q: bad port %q", ErrBadTarget, s, p)
		}
		t.Host, t.Port = h, port
	} else {
		// No port, or a bare IPv6 address with colons in it.
		t.Host = strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]")
	}
	if t.Host == "" {
		return Target{}, fmt.Errorf("%w %q: want user@host[:port]", ErrBadTarget, s)
	}
	return t, nil
}

// Addr is host:port for dialing.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

func (t Target) String() string { return t.User + "@" + t.Addr() }

// DialConfig says how to reach and trust the gateway.
type DialConfig struct {
	Target Target
	// IdentityFiles are private keys to offer, like ssh -i. When empty, the
	// default ~/.ssh identities are tried. Keys held by ssh-agent
	// (SSH_AUTH_SOCK) are always offered first.
	IdentityFiles []string
	// KnownHostsFile is where host keys are checked (and appended to when
	// AcceptNewHostKey is set). Default ~/.ssh/known_hosts.
	KnownHostsFile string
	// AcceptNewHostKey adds an unknown host's key to KnownHostsFile, like
	// ssh -o StrictHostKeyChecking=accept-new. A changed key is refused
	// regardless.
	AcceptNewHostKey bool
	// Timeout bounds the TCP connect plus the SSH handshake.
	Timeout time.Duration
	Log     zerolog.Logger
}

// preferredCiphers puts AES-GCM first: with AES-NI it is the fastest cipher
// x/crypto/ssh has (measured ~0.9x OpenSSH, ChaCha20 ~0.55x).
var preferredCiphers = []string{
	ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherChaCha20Poly1305,
	ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR,
}

// HostKeyError is a refusal to trust the gateway. It is never worth
// retrying: only the user can decide, so reconnect loops stop on it.
type HostKeyError struct {
	Host        string
	Fingerprint string
	Unknown     bool // else the key changed
	msg         string
}

func (e *HostKeyError) Error() string { return e.msg }

// DefaultKnownHosts is ~/.ssh/known_hosts.
func DefaultKnownHosts() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".ssh", "known_hosts")
}

// defaultIdentities mirrors ssh(1)'s list, minus the key types x/crypto
// cannot use.
func defaultIdentities() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		out = append(out, filepath.Join(home, ".ssh", n))
	}
	return out
}

// clientConfig builds the ssh.ClientConfig. The returned closer releases
// the ssh-agent connection, which must stay open until auth is done.
func clientConfig(c DialConfig) (*ssh.ClientConfig, func(), error) {
	kh := c.KnownHostsFile
	if kh == "" {
		kh = DefaultKnownHosts()
	}
	if kh == "" {
		return nil, nil, ErrNoKnownHosts
	}
	hostKeyCB, algos, err := hostKeyChecker(kh, c.Target, c.AcceptNewHostKey, c.Log)
	if err != nil {
		return nil, nil, err
	}
	signers, closeAgent, err := loadSigners(c.IdentityFiles, c.Log)
	if err != nil {
		return nil, nil, err
	}
	if len(signers) == 0 {
		closeAgent()
		return nil, nil, fmt.Errorf("%w: no ssh-agent (SSH_AUTH_SOCK) and none of %s readable",
			ErrNoKeys,
			strings.Join(identityList(c.IdentityFiles), ", "))
	}
	cfg := &ssh.ClientConfig{
		User:              c.Target.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		HostKeyCallback:   hostKeyCB,
		HostKeyAlgorithms: algos,
		Timeout:           c.Timeout,
		ClientVersion:     "SSH-2.0-sparkdap",
	}
	cfg.Ciphers = preferredCiphers
	return cfg, closeAgent, nil
}

func identityList(files []string) []string {
	if len(files) > 0 {
		return files
	}
	return defaultIdentities()
}

// loadSigners collects ssh-agent keys then identity files. An explicit
// identity that cannot be used is an error; a missing default one is not.
func loadSigners(files []string, log zerolog.Logger) ([]ssh.Signer, func(), error) {
	var signers []ssh.Signer
	closeAgent := func() {}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			log.Warn().Err(err).Str("SSH_AUTH_SOCK", sock).Msg("ssh-agent unreachable; using key files only")
		} else {
			closeAgent = func() { conn.Close() }
			as, err := agent.NewClient(conn).Signers()
			if err != nil {
				log.Warn().Err(err).Msg("ssh-agent: listing keys failed; using key files only")
			}
			signers = append(signers, as...)
		}
	}
	explicit := len(files) > 0
	for _, f := range identityList(files) {
		s, err := loadKeyFile(f)
		switch {
		case err == nil:
			signers = append(signers, s)
		case explicit:
			closeAgent()
			return nil, nil, &IdentityError{File: f, Err: err}
		case !errors.Is(err, os.ErrNotExist):
			log.Warn().Err(err).Str("key", f).Msg("skipping SSH key")
		}
	}
	return signers, closeAgent, nil
}

func loadKeyFile(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(b)
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		// sparkdap never prompts: a server process has no terminal to ask on.
		return nil, fmt.Errorf("key is passphrase-protected; load it into ssh-agent (ssh-add %s)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	return s, nil
}

// hostKeyChecker wraps knownhosts with clear refusals and, when asked,
// trust-on-first-use. It also returns the host key algorithms to ask for:
// the types known_hosts holds for the host first, so a server with both an
// ed25519 and an ecdsa key presents the one we know instead of looking
// changed; then the rest, so a server that really switched types is
// reported as a changed key, not as a failed negotiation (as ssh(1) does).
func hostKeyChecker(file string, t Target, acceptNew bool, log zerolog.Logger) (ssh.HostKeyCallback, []string, error) {
	db, err := knownhosts.New(file)
	if errors.Is(err, os.ErrNotExist) {
		db, err = knownhosts.New(os.DevNull)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts %s: %w", file, err)
	}
	algos := knownAlgorithms(db, t.Addr())
	cb := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := db(hostname, remote, key)
		if err == nil {
			return nil
		}
		fp := ssh.FingerprintSHA256(key)
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return fmt.Errorf("host key for %s: %w", hostname, err)
		}
		if len(ke.Want) > 0 {
			where := make([]string, 0, len(ke.Want))
			for _, w := range ke.Want {
				where = append(where, fmt.Sprintf("%s:%d", w.Filename, w.Line))
			}
			return &HostKeyError{Host: hostname, Fingerprint: fp, msg: fmt.Sprintf(
				"host key for %s changed: it now presents %s %s, but %s says otherwise. "+
					"This may be an attack (or the gateway was reinstalled). If you know why, remove the old entry with: ssh-keygen -R %s -f %s",
				hostname, key.Type(), fp, strings.Join(where, ", "), knownhosts.Normalize(hostname), file)}
		}
		if !acceptNew {
			return &HostKeyError{Host: hostname, Fingerprint: fp, Unknown: true, msg: fmt.Sprintf(
				"host %s is not in known_hosts (%s); verify the fingerprint %s (%s) and re-run with --ssh-accept-new-host-key to add it",
				hostname, file, fp, key.Type())}
		}
		if err := appendKnownHost(file, hostname, key); err != nil {
			return fmt.Errorf("host %s: accepting new host key: %w", hostname, err)
		}
		log.Warn().Str("host", hostname).Str("fingerprint", fp).Str("known_hosts", file).Msg("added new host key (--ssh-accept-new-host-key)")
		return nil
	}
	return cb, algos, nil
}

// appendKnownHost appends in place, as OpenSSH does, rather than through
// internal/safefile's temp file and rename: ssh processes append to the same
// file concurrently, and a rewrite would drop their lines and replace a
// known_hosts that dotfile managers often symlink. The path is the user's
// own setting, not something a repository chooses.
func appendKnownHost(file, hostname string, key ssh.PublicKey) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// probeKey is a key no known_hosts can hold: checking it makes knownhosts
// list what it does hold for a host.
type probeKey struct{}

func (probeKey) Type() string                        { return "sparkdap-probe" }
func (probeKey) Marshal() []byte                     { return []byte("sparkdap-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }

func knownAlgorithms(db ssh.HostKeyCallback, addr string) []string {
	// knownhosts only uses the remote address for IP matching; a fake one
	// that never matches keeps this to the hostname lookup.
	remote := &net.TCPAddr{IP: net.IPv4zero}
	var ke *knownhosts.KeyError
	if err := db(addr, remote, probeKey{}); !errors.As(err, &ke) {
		ke = &knownhosts.KeyError{}
	}
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, k := range ke.Want {
		if k.Key.Type() == ssh.KeyAlgoRSA {
			// An ssh-rsa key is used with these signature algorithms.
			add(ssh.KeyAlgoRSASHA512)
			add(ssh.KeyAlgoRSASHA256)
		}
		add(k.Key.Type())
	}
	if len(out) == 0 {
		// Unknown host: ask for ed25519 first like ssh(1), so the
		// fingerprint we show is the one ssh and ssh-keyscan users know.
		add(ssh.KeyAlgoED25519)
	}
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		add(a)
	}
	return out
}

// Dial connects and authenticates to the gateway.
func Dial(ctx context.Context, c DialConfig) (*ssh.Client, error) {
	cfg, closeAgent, err := clientConfig(c)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", c.Target, err)
	}
	defer closeAgent()
	addr := c.Target.Addr()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", c.Target, err)
	}
	// NewClientConn has no context: a deadline plus a watcher bound the
	// handshake by both the timeout and ctx.
	deadline, _ := dctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { conn.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if !stop() {
		if err == nil {
			sc.Close()
		}
		return nil, fmt.Errorf("ssh %s: handshake: %w", c.Target, context.Cause(dctx))
	}
	if err != nil {
		conn.Close()
		var hk *HostKeyError
		if errors.As(err, &hk) {
			return nil, hk
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, &AuthError{Target: c.Target, err: err}
		}
		return nil, fmt.Errorf("ssh %s: %w", c.Target, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// AuthError is the gateway refusing every key offered.
type AuthError struct {
	Target Target
	err    error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("ssh %s: the gateway refused every key offered (ssh-agent and --ssh-identity / ~/.ssh defaults): %v", e.Target, e.err)
}

func (e *AuthError) Unwrap() error { return e.err }
