package tunnel

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Upper bounds for things that take milliseconds on a quiet machine: SSH
// handshakes in pure Go under -race, next to Spark JVMs on 2 CPUs, have
// taken seconds. They bound waits; no test asserts speed with them.
const (
	testHandshakeTimeout = 30 * time.Second
	testWait             = 30 * time.Second
)

// testServer is an in-process SSH server for fast host-key, auth and
// keepalive tests; the real-sshd tests live in integration/.
type testServer struct {
	addr     string
	hostKeys []ssh.Signer
}

// startTestServer accepts clientKey and answers global requests with
// onRequest (nil: reply true at once). Channels are refused.
func startTestServer(t *testing.T, hostKeys []ssh.Signer, clientKey ssh.PublicKey, onRequest func(*ssh.Request)) *testServer {
	t.Helper()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(clientKey.Marshal()) {
				return nil, nil
			}
			return nil, os.ErrPermission
		},
	}
	for _, k := range hostKeys {
		cfg.AddHostKey(k)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					c.Close()
					return
				}
				go ssh.DiscardRequests(nil)
				go func() {
					for ch := range chans {
						ch.Reject(ssh.Prohibited, "test server")
					}
				}()
				for r := range reqs {
					if onRequest != nil {
						onRequest(r)
					} else if r.WantReply {
						r.Reply(true, nil)
					}
				}
			}()
		}
	}()
	return &testServer{addr: l.Addr().String(), hostKeys: hostKeys}
}

func newEd25519(t *testing.T) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

func newECDSA(t *testing.T) ssh.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeIdentity stores priv as an OpenSSH private key file.
func writeIdentity(t *testing.T, priv ed25519.PrivateKey, passphrase string) string {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
