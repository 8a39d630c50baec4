package api

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// The join (cell.proto's Join service): the agent's key never leaves the
// cell. The helpers below are what both ends agree on: the agent's key
// (NewKey), the self-signed certificate it serves until it has joined
// (SelfSigned), the request it sends (NewCSR), and the checks of what it
// gets back (VerifyCellCertificate).

// ErrJoinRefused is wrapped by every refusal of a join request (a bad,
// foreign, expired or spent token, a certificate request for another
// cell, key or purpose, a failed identity check): asking again with the
// same request gets the same answer.
var ErrJoinRefused = errors.New("join refused")

// MaxJoinTokenTTL bounds the lifetime of a join token (the host's
// cells.joinTokenTTL): a token is for one boot, not for keeps.
const MaxJoinTokenTTL = 24 * time.Hour

// JoinRequest is what an agent sent to join (cell.proto's JoinResponse),
// with the key the host saw it hold; the host's CA checks it.
type JoinRequest struct {
	// Token is the join token from the cell's bootstrap.
	Token string
	// CSR is the agent's certificate request (DER).
	CSR []byte
	// PeerKey is the public key of the TLS peer that sent the request:
	// the CSR must be for it, so that the certificate goes to the agent
	// the host talks to.
	PeerKey crypto.PublicKey
	// IdentityDocument and IdentitySignature are the cloud's signed
	// instance identity, when the agent has one.
	IdentityDocument, IdentitySignature []byte
}

// NewKey returns a new cell key (ECDSA P-256).
func NewKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating cell key: %w", err)
	}
	return key, nil
}

// NewCSR returns the certificate request (DER) of key for the cell
// cellID: common name and only DNS name cellID, no other name, no
// extension. The host signs nothing else (host/pki).
func NewCSR(key crypto.Signer, cellID string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: cellID},
		DNSNames: []string{cellID},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("creating certificate request for cell %s: %w", cellID, err)
	}
	return der, nil
}

// SelfSigned returns the certificate an unjoined agent serves: key's own,
// self-signed, naming cellID. Nobody trusts it; the host pins it for the
// join (the request must be for the same key) and nothing else.
func SelfSigned(key crypto.Signer, cellID string) (tls.Certificate, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: cellID + " (not joined)"},
		DNSNames:     []string{cellID},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signing the join certificate of cell %s: %w", cellID, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing the join certificate of cell %s: %w", cellID, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// VerifyCellCertificate checks that certPEM (the cell's certificate,
// possibly followed by intermediates) is for key, signed by the CA in
// caPEM, valid at now, for server auth, and names cellID; it returns it
// ready to serve. ExpiredCellCertificate tells apart an error for a
// certificate that is all that but expired.
func VerifyCellCertificate(certPEM, caPEM []byte, cellID string, key crypto.Signer, now time.Time) (*tls.Certificate, error) {
	var chain [][]byte
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			chain = append(chain, block.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, errors.New("no certificate in PEM")
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("parsing cell certificate: %w", err)
		}
		certs[i] = c
	}
	if !SamePublicKey(certs[0].PublicKey, key.Public()) {
		return nil, errors.New("the certificate is not for this cell's key")
	}
	if err := verifyCell(certs, caPEM, cellID, now); err != nil {
		if verifyCell(certs, caPEM, cellID, certs[0].NotAfter) == nil {
			err = &ExpiredError{NotAfter: certs[0].NotAfter, err: err}
		}
		return nil, fmt.Errorf("verifying cell certificate: %w", err)
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: certs[0]}, nil
}

// ExpiredError is VerifyCellCertificate's error for a certificate that is
// the cell's in every way but its validity: it expired at NotAfter (or
// is not valid yet).
type ExpiredError struct {
	NotAfter time.Time
	err      error
}

func (e *ExpiredError) Error() string { return e.err.Error() }
func (e *ExpiredError) Unwrap() error { return e.err }

// verifyCell checks that chain's leaf is signed by the CA in caPEM (through
// the rest of chain), valid at now, for server auth, naming cellID.
func verifyCell(chain []*x509.Certificate, caPEM []byte, cellID string, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("loading cluster CA: no certificate in PEM")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		DNSName: cellID, Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		CurrentTime: now,
	})
	return err
}

// SamePublicKey reports whether a and b are the same public key.
func SamePublicKey(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}

// JoinMethodPrefix is the full-method prefix of the Join service's calls,
// the only ones an unjoined agent answers.
const JoinMethodPrefix = "/kip.cell.v1.Join/"

// VerifiedAs reports whether a peer's certificate chain (as TLS received
// it) is the joined cell cellID's: signed by the CA in caPEM, valid at
// now, for server auth, naming cellID. The host asks it of an agent
// before joining it.
func VerifiedAs(peer []*x509.Certificate, caPEM []byte, cellID string, now time.Time) bool {
	return verifyCell(peer, caPEM, cellID, now) == nil
}

// CertifiedAs reports whether a peer's certificate chain is the cell
// cellID's as VerifiedAs checks it, at any time within its validity: a
// certificate the CA issued to the cell, expired or not. Its leaf's
// NotAfter says which.
func CertifiedAs(peer []*x509.Certificate, caPEM []byte, cellID string) bool {
	return len(peer) > 0 && verifyCell(peer, caPEM, cellID, peer[0].NotAfter) == nil
}

// RenewRequest is what a joined agent sent to renew its certificate
// (cell.proto's RenewResponse), with the certificate chain the host saw
// it serve on the same connection: the key the agent proved it holds,
// which the CA certified for the cell (host/pki's CA.Renew checks it).
type RenewRequest struct {
	// CSR is the agent's certificate request for its new key (DER).
	CSR []byte
	// Peer is the TLS peer's certificate chain, leaf first.
	Peer []*x509.Certificate
	// IdentityDocument and IdentitySignature are the cloud's signed
	// instance identity, when the agent has one.
	IdentityDocument, IdentitySignature []byte
}
