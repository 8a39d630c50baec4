package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// HostCommonName is the common name of the host's client certificate.
const HostCommonName = "kip-host"

// ServerTLSConfig is the agent's side: it presents the cell certificate and
// accepts only client certificates signed by the cluster CA for the host
// (common name HostCommonName, client-auth usage). A cell's own
// certificate, which is for server auth, cannot act as the host.
func ServerTLSConfig(b *Bootstrap) (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(b.Cert), []byte(b.Key))
	if err != nil {
		return nil, fmt.Errorf("loading cell certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(b.CACert)) {
		return nil, errors.New("loading cluster CA: no certificate in PEM")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
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
