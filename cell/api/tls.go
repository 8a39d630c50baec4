package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// HostCommonName is the common name of the host's client certificate.
const HostCommonName = "kip-host"

// ServerTLSConfig is the agent's side: it presents the certificate
// getCertificate returns at each handshake (the cell's, once joined; a
// self-signed one of its key until then, see join.go) and accepts only
// client certificates signed by the cluster CA in caPEM for the host
// (common name HostCommonName, client-auth usage), joined or not: only
// the host may join a cell. A cell's own certificate, which is for server
// auth, cannot act as the host.
func ServerTLSConfig(caPEM []byte, getCertificate func() (*tls.Certificate, error)) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("loading cluster CA: no certificate in PEM")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return getCertificate()
		},
		ClientCAs:  pool,
		ClientAuth: tls.RequireAndVerifyClientCert,
		// VerifyConnection runs on every connection, resumed sessions
		// included (VerifyPeerCertificate does not run on resumption).
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
				return errors.New("no verified client certificate")
			}
			if cn := cs.VerifiedChains[0][0].Subject.CommonName; cn != HostCommonName {
				return fmt.Errorf("client certificate %q is not the kip host's", cn)
			}
			return nil
		},
	}, nil
}

// ClientTLSConfig is the host's side for one cell: it presents the host
// certificate and accepts the agent only if its certificate, signed by the
// cluster CA, names cellID. Build one per connection target.
func ClientTLSConfig(caPEM []byte, hostCert tls.Certificate, cellID string) (*tls.Config, error) {
	if !ValidCellID(cellID) {
		return nil, fmt.Errorf("cell ID %q is not a DNS label", cellID)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("loading cluster CA: no certificate in PEM")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{hostCert},
		RootCAs:      pool,
		// Standard verification against ServerName checks the cell ID.
		ServerName: cellID,
	}, nil
}

// JoinClientTLSConfig is the host's side for joining one cell: it presents
// the host certificate, as ClientTLSConfig does, but accepts whatever
// certificate the agent serves (an unjoined agent's is self-signed). It
// proves only that the peer holds that certificate's key: the caller must
// pin it, taking the peer's chain from the call (grpc.Peer) and joining
// only a request for the same key (SamePublicKey), and must treat a peer
// that VerifiedAs the cell as joined already.
func JoinClientTLSConfig(hostCert tls.Certificate, cellID string) (*tls.Config, error) {
	if !ValidCellID(cellID) {
		return nil, fmt.Errorf("cell ID %q is not a DNS label", cellID)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{hostCert},
		ServerName:   cellID,
		// The agent's certificate is pinned by the caller (above).
		InsecureSkipVerify: true, //nolint:gosec // G402: the join pins the peer's key to its certificate request
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the agent presented no certificate")
			}
			return nil
		},
	}, nil
}
