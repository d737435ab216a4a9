//go:build linux

package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority; every certificate it issues
// lives as long as one test run may.
type pki struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	CA   string // path of the CA certificate
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sparkdap-kubetest-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, cert: cert, key: key, CA: filepath.Join(dir, "ca.crt")}
	if err := writePEM(p.CA, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return p, nil
}

// issue writes NAME.crt and NAME.key: a certificate for cn in the groups
// orgs, for clients, for servers at ips and dns, or both; its key is ECDSA.
func (p *pki) issue(name, cn string, orgs []string, ips []net.IP, dns []string) (crt, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	return p.issueFor(k, name, cn, orgs, ips, dns)
}

// issueRSA is issue with an RSA key, written as PKCS #1: the one kind of
// client key Spark's Kubernetes client (fabric8) reads from a kubeconfig
// without extra providers.
func (p *pki) issueRSA(name, cn string, orgs []string) (crt, key string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	return p.issueFor(k, name, cn, orgs, nil, nil)
}

func (p *pki) issueFor(k crypto.Signer, name, cn string, orgs []string, ips []net.IP, dns []string) (crt, key string, err error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, k.Public(), p.key)
	if err != nil {
		return "", "", err
	}
	crt, key = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := writePEM(crt, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if rk, ok := k.(*rsa.PrivateKey); ok {
		return crt, key, writePEM(key, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk))
	}
	return crt, key, writeKey(key, k.(*ecdsa.PrivateKey))
}

// serviceAccountKey writes the key pair that signs service account tokens.
func (p *pki) serviceAccountKey() (pub, priv string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return "", "", err
	}
	pub, priv = filepath.Join(p.dir, "sa.pub"), filepath.Join(p.dir, "sa.key")
	if err := writePEM(pub, "PUBLIC KEY", pubDER); err != nil {
		return "", "", err
	}
	return pub, priv, writeKey(priv, k)
}

// writeKey writes k as PKCS #8.
func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// kubeconfig writes a kubeconfig for server that authenticates with the
// client certificate crt/key and trusts only the cluster's CA.
func (p *pki) kubeconfig(path, server, crt, key string) error {
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: kubetest
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: kubetest
current-context: kubetest
`, server, p.CA, crt, key)
	return os.WriteFile(path, []byte(doc), 0o600)
}
