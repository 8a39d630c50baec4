package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// pki holds the control plane's certificate authorities in a state
// directory's pki/ folder. Files are created once and reused on restart, so
// kubeconfigs handed out earlier stay valid.
type pki struct {
	dir string
}

const certValidity = 10 * 365 * 24 * time.Hour

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// ensureCA creates the self-signed CA name (name.crt, name.key) if missing.
func (p pki) ensureCA(name, commonName string) error {
	if exists(p.path(name+".crt")) && exists(p.path(name+".key")) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key for %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("creating CA %s: %w", name, err)
	}
	return p.write(name, der, key)
}

// certSpec describes a leaf certificate.
type certSpec struct {
	name         string // file base name
	ca           string // signing CA's base name
	commonName   string
	organization []string
	server       bool
	dnsNames     []string
	ips          []net.IP
}

// ensureCert creates the leaf certificate s if missing, or if the one
// there does not name every address and DNS name of s (a state directory
// kept from before the machine's address was added, or changed: the API
// server's certificate must name the address pods reach it at).
func (p pki) ensureCert(s certSpec) error {
	if exists(p.path(s.name+".crt")) && exists(p.path(s.name+".key")) {
		if cert, _, err := p.load(s.name); err == nil && names(cert, s) {
			return nil
		}
	}
	caCert, caKey, err := p.load(s.ca)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key for %s: %w", s.name, err)
	}
	usage := x509.ExtKeyUsageClientAuth
	if s.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: s.commonName, Organization: s.organization},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		DNSNames:              s.dnsNames,
		IPAddresses:           s.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing certificate %s: %w", s.name, err)
	}
	return p.write(s.name, der, key)
}

// names reports whether cert names every IP address and DNS name of s.
func names(cert *x509.Certificate, s certSpec) bool {
	for _, ip := range s.ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	for _, n := range s.dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	return true
}

// ensureServiceAccountKey creates the RSA key pair that signs service
// account tokens (sa.key, sa.pub).
func (p pki) ensureServiceAccountKey() error {
	if exists(p.path("sa.key")) && exists(p.path("sa.pub")) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service account public key: %w", err)
	}
	if err := writePEM(p.path("sa.key"), "PRIVATE KEY", priv, 0o600); err != nil {
		return err
	}
	return writePEM(p.path("sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func (p pki) write(name string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding key %s: %w", name, err)
	}
	if err := writePEM(p.path(name+".key"), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(p.path(name+".crt"), "CERTIFICATE", der, 0o644)
}

func (p pki) load(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(p.path(name + ".crt"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading CA %s: %w", name, err)
	}
	keyPEM, err := os.ReadFile(p.path(name + ".key"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading CA key %s: %w", name, err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("reading CA %s: not PEM", name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing CA %s: %w", name, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing CA key %s: %w", name, err)
	}
	return cert, key, nil
}

// kubeconfig renders a kubeconfig for server with the client certificate
// name, embedding every file so the kubeconfig can be copied alone.
func (p pki) kubeconfig(server, certName, user string) ([]byte, error) {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	crt, err := os.ReadFile(p.path(certName + ".crt"))
	if err != nil {
		return nil, fmt.Errorf("reading certificate %s: %w", certName, err)
	}
	key, err := os.ReadFile(p.path(certName + ".key"))
	if err != nil {
		return nil, fmt.Errorf("reading key %s: %w", certName, err)
	}
	b64 := base64.StdEncoding.EncodeToString
	return renderKubeconfig(server, ca, user, fmt.Sprintf("client-certificate-data: %s\n    client-key-data: %s", b64(crt), b64(key))), nil
}

// TokenKubeconfig renders a kubeconfig for server, trusting caPEM, whose
// user authenticates with a bearer token (test/kubeletnode's bootstrap
// token).
func TokenKubeconfig(server string, caPEM []byte, user, token string) []byte {
	return renderKubeconfig(server, caPEM, user, "token: "+token)
}

// renderKubeconfig renders a kubeconfig of one cluster, one user whose
// credentials are auth (fields of a kubeconfig user, indented for it) and
// the context of the two.
func renderKubeconfig(server string, caPEM []byte, user, auth string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: kip-local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    %s
contexts:
- name: %s@kip-local
  context:
    cluster: kip-local
    user: %s
current-context: %s@kip-local
`, server, base64.StdEncoding.EncodeToString(caPEM), user, auth, user, user, user)
}

func writePEM(path, kind string, der []byte, mode fs.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
