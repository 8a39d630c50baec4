package apitest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kipcell/kip/cell/api/internal/cellv1"
)

// hostCommonName is cell/api's HostCommonName (this package cannot import
// cell/api, whose tests import it).
const hostCommonName = "kip-host"

// Join joins the agent of cellID at addr as the host does, presenting a
// host certificate of ca, and signs the agent's certificate request with
// ca without checking its token: for tests of what an agent does once
// joined, not of the join (host/pki checks requests).
func (ca *CA) Join(t testing.TB, addr, cellID string) {
	t.Helper()
	hostPEM, hostKey := ca.Issue(t, hostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, err := tls.X509KeyPair(hostPEM, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{hostCert},
		InsecureSkipVerify: true, //nolint:gosec // G402: a test host trusts the agent it started
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := cellv1.NewJoinClient(cc)
	resp, err := c.Join(ctx, &cellv1.JoinRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("asking cell %s to join: %v", cellID, err)
	}
	csr, err := x509.ParseCertificateRequest(resp.GetCsr())
	if err != nil {
		t.Fatal(err)
	}
	certPEM := ca.SignKey(t, csr.PublicKey, cellID, x509.ExtKeyUsageServerAuth, cellID)
	if _, err := c.CompleteJoin(ctx, &cellv1.CompleteJoinRequest{Certificate: certPEM}); err != nil {
		t.Fatalf("handing cell %s its certificate: %v", cellID, err)
	}
}

// SignKey returns the PEM certificate of pub for common name cn with one
// extended key usage and the given DNS names, signed by ca.
func (ca *CA) SignKey(t testing.TB, pub crypto.PublicKey, cn string, usage x509.ExtKeyUsage, dns ...string) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}, ca.Cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return encodeCert(der)
}
