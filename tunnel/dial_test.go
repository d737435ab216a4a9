package tunnel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Target
		err  string
	}{
		{in: "alice@gw", want: Target{"alice", "gw", 22}},
		{in: "alice@gw:2222", want: Target{"alice", "gw", 2222}},
		{in: "alice@[::1]:2222", want: Target{"alice", "::1", 2222}},
		{in: "alice@::1", want: Target{"alice", "::1", 22}},
		{in: "a@b@gw", want: Target{"a@b", "gw", 22}},
		{in: "alice@gw:0", err: "bad port"},
		{in: "alice@gw:x", err: "bad port"},
		{in: "@gw", err: "empty user"},
		{in: "alice@", err: "want user@host"},
		{in: "alice@gw:99999", err: "bad port"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTarget(tc.in)
			if tc.err != "" && !errors.Is(err, ErrBadTarget) {
				t.Errorf("ParseTarget(%q): %v, want ErrBadTarget", tc.in, err)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseTarget(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseTarget(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
	if got, err := ParseTarget("gw"); err != nil || got.User == "" || got.Port != 22 {
		t.Fatalf("ParseTarget(gw) = %+v, %v; want the local user, port 22", got, err)
	}
}

func targetOf(t *testing.T, addr string) Target {
	t.Helper()
	tg, err := ParseTarget("tester@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func knownLine(addr string, k ssh.PublicKey) string {
	return knownhosts.Line([]string{addr}, k) + "\n"
}

// TestDialHostKeyPolicy checks every host-key outcome against an
// in-process server.
func TestDialHostKeyPolicy(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	clientSigner, clientPriv := newEd25519(t)
	identity := writeIdentity(t, clientPriv, "")
	edHost, _ := newEd25519(t)
	ecHost := newECDSA(t)
	otherEd, _ := newEd25519(t)
	// The server offers both types, like a stock sshd.
	srv := startTestServer(t, []ssh.Signer{edHost, ecHost}, clientSigner.PublicKey(), nil)
	edOnly := startTestServer(t, []ssh.Signer{edHost}, clientSigner.PublicKey(), nil)

	for _, tc := range []struct {
		name      string
		addr      string
		known     func(addr string) string
		acceptNew bool
		wantErr   []string // empty: success
		unknown   bool
	}{
		{name: "known ed25519", addr: srv.addr, known: func(a string) string { return knownLine(a, edHost.PublicKey()) }},
		// Only the ecdsa key is known: the client must ask for ecdsa
		// rather than let ed25519 win the negotiation and look changed.
		{name: "known ecdsa of a two-key host", addr: srv.addr, known: func(a string) string { return knownLine(a, ecHost.PublicKey()) }},
		{name: "unknown host", addr: srv.addr, known: func(string) string { return "" }, unknown: true,
			wantErr: []string{"is not in known_hosts", ssh.FingerprintSHA256(edHost.PublicKey()), "--ssh-accept-new-host-key"}},
		{name: "other hosts only", addr: srv.addr, known: func(string) string { return knownLine("elsewhere:22", edHost.PublicKey()) }, unknown: true,
			wantErr: []string{"is not in known_hosts"}},
		{name: "changed same type", addr: srv.addr, known: func(a string) string { return knownLine(a, otherEd.PublicKey()) },
			wantErr: []string{"host key for " + srv.addr + " changed", "ssh-keygen -R"}},
		// The host used to have an ecdsa key and now only has ed25519:
		// a changed key, not a negotiation failure.
		{name: "changed type", addr: edOnly.addr, known: func(a string) string { return knownLine(a, ecHost.PublicKey()) },
			wantErr: []string{"host key for " + edOnly.addr + " changed"}},
		{name: "changed key is refused even with accept-new", addr: srv.addr, acceptNew: true,
			known:   func(a string) string { return knownLine(a, otherEd.PublicKey()) },
			wantErr: []string{"changed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kh := filepath.Join(t.TempDir(), "known_hosts")
			if err := os.WriteFile(kh, []byte(tc.known(tc.addr)), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Dial(context.Background(), DialConfig{Target: targetOf(t, tc.addr), IdentityFiles: []string{identity},
				KnownHostsFile: kh, AcceptNewHostKey: tc.acceptNew, Timeout: testHandshakeTimeout, Log: zerolog.Nop()})
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded, want a refusal")
			}
			var hk *HostKeyError
			if !errors.As(err, &hk) || hk.Unknown != tc.unknown {
				t.Fatalf("error %T %v, want *HostKeyError with Unknown=%v", err, err, tc.unknown)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

func TestDialAcceptNewHostKeyAppends(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	clientSigner, clientPriv := newEd25519(t)
	identity := writeIdentity(t, clientPriv, "")
	host, _ := newEd25519(t)
	srv := startTestServer(t, []ssh.Signer{host}, clientSigner.PublicKey(), nil)
	kh := filepath.Join(t.TempDir(), "fresh", "known_hosts") // directory does not exist yet
	cfg := DialConfig{Target: targetOf(t, srv.addr), IdentityFiles: []string{identity}, KnownHostsFile: kh,
		AcceptNewHostKey: true, Timeout: testHandshakeTimeout, Log: zerolog.Nop()}
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial with accept-new: %v", err)
	}
	c.Close()
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != knownLine(knownhosts.Normalize(srv.addr), host.PublicKey()) {
		t.Fatalf("known_hosts = %q", b)
	}
	// Now known: a second dial without accept-new succeeds and adds nothing.
	cfg.AcceptNewHostKey = false
	c, err = Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("second Dial: %v", err)
	}
	c.Close()
	if b2, _ := os.ReadFile(kh); string(b2) != string(b) {
		t.Fatalf("known_hosts changed on a known host: %q", b2)
	}
}

func TestDialAuth(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	clientSigner, clientPriv := newEd25519(t)
	_, otherPriv := newEd25519(t)
	host, _ := newEd25519(t)
	srv := startTestServer(t, []ssh.Signer{host}, clientSigner.PublicKey(), nil)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(knownLine(srv.addr, host.PublicKey())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		identity []string
		wantErr  string
	}{
		{"right key", []string{writeIdentity(t, clientPriv, "")}, ""},
		{"wrong key", []string{writeIdentity(t, otherPriv, "")}, "refused every key"},
		{"wrong then right", []string{writeIdentity(t, otherPriv, ""), writeIdentity(t, clientPriv, "")}, ""},
		{"passphrase-protected", []string{writeIdentity(t, clientPriv, "secret")}, "ssh-add"},
		{"missing file", []string{filepath.Join(t.TempDir(), "nope")}, "identity file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(context.Background(), DialConfig{Target: targetOf(t, srv.addr), IdentityFiles: tc.identity,
				KnownHostsFile: kh, Timeout: testHandshakeTimeout, Log: zerolog.Nop()})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
			}
			// The CLI names the flag from the type (cmd/sparkdap).
			var ie *IdentityError
			if tc.name == "missing file" && (!errors.As(err, &ie) || ie.File != tc.identity[0]) {
				t.Errorf("error %v: want an *IdentityError for %s", err, tc.identity[0])
			}
		})
	}
}

func TestDialRespectsContext(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	_, clientPriv := newEd25519(t)
	// A listener that never speaks SSH: the handshake must not hang.
	l := startSilentListener(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Dial(ctx, DialConfig{Target: targetOf(t, l), IdentityFiles: []string{writeIdentity(t, clientPriv, "")},
		KnownHostsFile: filepath.Join(t.TempDir(), "kh"), Timeout: 10 * time.Second, Log: zerolog.Nop()})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Dial to a silent server: %v after %v", err, time.Since(start))
	}
}

func TestPreferredCiphersAESGCMFirst(t *testing.T) {
	if preferredCiphers[0] != ssh.CipherAES128GCM {
		t.Fatalf("first cipher %s, want AES-GCM (fastest in x/crypto with AES-NI)", preferredCiphers[0])
	}
}
