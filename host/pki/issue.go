package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"time"

	"github.com/kipcell/kip/cell/api"
)

// errExpired is returned when the CA itself has expired since Load.
var errExpired = errors.New("cluster CA has expired")

// CertPEM returns the CA certificate (PEM), which cells and anything else
// that talks to them trust.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// SignCell returns a server certificate (PEM) for pub as the cell
// cellID: its only DNS name is cellID and its only extended key usage is
// server auth, so it cannot pass for the host. A zero validity means
// DefaultCellValidity. The key is the cell's own: the host never holds it
// (Join).
func (ca *CA) SignCell(cellID string, pub crypto.PublicKey, validity time.Duration) ([]byte, error) {
	if !api.ValidCellID(cellID) {
		return nil, fmt.Errorf("signing certificate for cell %q: cell ID is not a DNS label", cellID)
	}
	if validity == 0 {
		validity = DefaultCellValidity
	}
	der, _, err := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cellID},
		DNSNames:    []string{cellID},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, pub, validity)
	if err != nil {
		return nil, fmt.Errorf("signing certificate for cell %s: %w", cellID, err)
	}
	return encodeCert(der), nil
}

// HostCertificate returns the host's client certificate (common name
// api.HostCommonName, extended key usage client auth only). It is issued
// on first use and kept; once two thirds of its lifetime have passed the
// next call issues a fresh one, so connections made with ClientTLSConfig
// never present an expired certificate. validity applies when a
// certificate is issued; zero means DefaultHostValidity.
func (ca *CA) HostCertificate(validity time.Duration) (tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	now := ca.now()
	if ca.host != nil && now.Before(ca.hostRenewAt) {
		return *ca.host, nil
	}
	if validity == 0 {
		validity = DefaultHostValidity
	}
	der, key, leaf, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: api.HostCommonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issuing host certificate: %w", err)
	}
	ca.host = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	ca.hostRenewAt = now.Add(leaf.NotAfter.Sub(now) * 2 / 3)
	return *ca.host, nil
}

// Bootstrap returns the bootstrap document for a new cell: the CA it
// trusts and a join token for cellID that expires after tokenTTL (zero:
// DefaultJoinTokenTTL). It holds no key: the agent makes its own and the
// host signs its certificate when it joins it (Join).
func (ca *CA) Bootstrap(cellID, clusterID, nodeName, podUID string, tokenTTL time.Duration) (*api.Bootstrap, error) {
	token, err := ca.JoinToken(cellID, tokenTTL)
	if err != nil {
		return nil, fmt.Errorf("building bootstrap: %w", err)
	}
	b := &api.Bootstrap{
		Version:   api.BootstrapVersion,
		CellID:    cellID,
		ClusterID: clusterID,
		NodeName:  nodeName,
		PodUID:    podUID,
		CACert:    string(ca.certPEM),
		JoinToken: token,
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("building bootstrap for cell %s: %w", cellID, err)
	}
	return b, nil
}

// ClientTLSConfig returns the host's TLS configuration for connecting to
// the cell cellID: api.ClientTLSConfig, so the handshake fails unless the
// peer's certificate is signed by this CA and names cellID. The host
// certificate is fetched from HostCertificate at each handshake rather
// than fixed, so a long-lived gRPC connection that reconnects presents a
// current one.
func (ca *CA) ClientTLSConfig(cellID string) (*tls.Config, error) {
	return ca.hostTLSConfig(cellID, func(cert tls.Certificate) (*tls.Config, error) {
		return api.ClientTLSConfig(ca.certPEM, cert, cellID)
	})
}

// JoinTLSConfig returns the host's TLS configuration for joining the cell
// cellID (api.JoinClientTLSConfig): it presents the host certificate as
// ClientTLSConfig does and accepts the agent's self-signed certificate,
// which the join pins (Join's JoinRequest.PeerKey).
func (ca *CA) JoinTLSConfig(cellID string) (*tls.Config, error) {
	return ca.hostTLSConfig(cellID, func(cert tls.Certificate) (*tls.Config, error) {
		return api.JoinClientTLSConfig(cert, cellID)
	})
}

// hostTLSConfig builds a configuration with build and makes it fetch the
// host certificate at each handshake.
func (ca *CA) hostTLSConfig(cellID string, build func(tls.Certificate) (*tls.Config, error)) (*tls.Config, error) {
	cert, err := ca.HostCertificate(0)
	if err != nil {
		return nil, fmt.Errorf("building TLS config for cell %s: %w", cellID, err)
	}
	cfg, err := build(cert)
	if err != nil {
		return nil, fmt.Errorf("building TLS config for cell %s: %w", cellID, err)
	}
	cfg.Certificates = nil
	cfg.Time = ca.now // the CA's clock judges the cells' certificates too
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cert, err := ca.HostCertificate(0)
		if err != nil {
			return nil, err
		}
		return &cert, nil
	}
	return cfg, nil
}

// issue signs tmpl, completed with a new P-256 key, a serial number and a
// validity that starts slightly in the past and ends no later than the CA.
func (ca *CA) issue(tmpl *x509.Certificate, validity time.Duration) ([]byte, *ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating key: %w", err)
	}
	der, leaf, err := ca.sign(tmpl, &key.PublicKey, validity)
	return der, key, leaf, err
}

// sign signs tmpl for pub, completed with a serial number and a validity
// that starts slightly in the past and ends no later than the CA.
func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey, validity time.Duration) ([]byte, *x509.Certificate, error) {
	if validity < 0 {
		return nil, nil, fmt.Errorf("negative validity %s", validity)
	}
	now := ca.now()
	if !now.Before(ca.cert.NotAfter) {
		return nil, nil, fmt.Errorf("%w at %s", errExpired, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing issued certificate: %w", err)
	}
	return der, leaf, nil
}
