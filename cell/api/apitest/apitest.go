// Package apitest issues throwaway certificates for tests: a CA, cell
// server certificates and host client certificates, valid for an hour, and
// any certificate a test needs wrong on purpose (expired, not a CA, in a
// group) through a Template, and joins a test's agent as the host would
// (CA.Join). Production certificates come from host/pki.
//
// It imports the standard library, gRPC and cell/api/internal/cellv1 only (not
// cell/api, whose tests import it), so that every test may use it: cell's,
// host's (host imports cell/api) and test/'s.
package apitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// Template changes a certificate's template before it is signed.
type Template func(*x509.Certificate)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
	// KeyPEM is the CA's private key, PEM-encoded, for code under test
	// that loads a CA.
	KeyPEM []byte
	key    *ecdsa.PrivateKey
}

// NewCA returns a fresh self-signed CA, its template changed by mods
// (unchanged: a valid CA that may sign certificates).
func NewCA(t testing.TB, mods ...Template) *CA {
	t.Helper()
	// The CA outlives every certificate it signs (an hour each): a leaf
	// whose NotAfter rounded up to the second past the CA's could not be
	// verified at its own NotAfter, which is how an expired certificate
	// is recognised as the cell's (TestLoadIdentityAfterARenewal flaked).
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	for _, mod := range mods {
		mod(tmpl)
	}
	key := newKey(t)
	der := sign(t, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: encodeCert(der), KeyPEM: encodeKey(t, key)}
}

// Issue returns the PEM certificate and key of a leaf for common name cn
// with one extended key usage and the given DNS names.
func (ca *CA) Issue(t testing.TB, cn string, usage x509.ExtKeyUsage, dns ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.IssueWith(t, cn, usage, func(c *x509.Certificate) { c.DNSNames = dns })
}

// IssueWith returns the PEM certificate and key of a leaf for common name
// cn with one extended key usage, its template changed by mods.
func (ca *CA) IssueWith(t testing.TB, cn string, usage x509.ExtKeyUsage, mods ...Template) (cert, key []byte) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	for _, mod := range mods {
		mod(tmpl)
	}
	leafKey := newKey(t)
	return encodeCert(sign(t, tmpl, ca.Cert, leafKey, ca.key)), encodeKey(t, leafKey)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// sign returns the DER certificate of tmpl and key, signed by parent's
// signer.
func sign(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
