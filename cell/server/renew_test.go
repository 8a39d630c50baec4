package server

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/apitest"
)

// hostClient is the host's connection to the joined agent c-1 at addr,
// with a host certificate of ca; it checks the agent's certificate.
func hostClient(t *testing.T, ca *apitest.CA, addr string) *grpc.ClientConn {
	t.Helper()
	hostPEM, hostKey := ca.Issue(t, api.HostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, err := tls.X509KeyPair(hostPEM, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := api.ClientTLSConfig(ca.PEM, hostCert, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// servedKey is the key of the certificate the agent served on a call
// over cc.
func servedKey(t *testing.T, cc *grpc.ClientConn) any {
	t.Helper()
	var p peer.Peer
	if _, err := api.NewClient(cc).ApplyPod(t.Context(), &api.PodRequest{Generation: 1}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		t.Fatal("no peer certificate")
	}
	return info.State.PeerCertificates[0].PublicKey
}

// TestRenewSwapsTheKeyAndCertificate: the host renews a joined agent over
// its connection; the agent makes a new key, serves the new certificate
// from the next handshake on while the open connection goes on, keeps
// both for an agent started again, and takes the same certificate twice.
func TestRenewSwapsTheKeyAndCertificate(t *testing.T) {
	ca := apitest.NewCA(t)
	dir := filepath.Join(t.TempDir(), "identity")
	addr, id := serveIdentity(t, ca, dir, func(context.Context) ([]byte, []byte, error) {
		return []byte("doc"), []byte("sig"), nil
	})
	ca.Join(t, addr, "c-1")
	open := hostClient(t, ca, addr)
	oldKey := servedKey(t, open)

	jc := api.NewJoinClient(open)
	offer, err := jc.Renew(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if string(offer.IdentityDocument) != "doc" || string(offer.IdentitySignature) != "sig" {
		t.Errorf("Renew = %+v, want the instance identity", offer)
	}
	csr, err := x509.ParseCertificateRequest(offer.CSR)
	if err != nil {
		t.Fatal(err)
	}
	if api.SamePublicKey(csr.PublicKey, oldKey) {
		t.Fatal("the renewal's request is for the old key")
	}
	if got := servedKey(t, hostClient(t, ca, addr)); !api.SamePublicKey(got, oldKey) {
		t.Error("the agent serves the new key before it has its certificate")
	}
	certPEM := ca.SignKey(t, csr.PublicKey, "c-1", x509.ExtKeyUsageServerAuth, "c-1")
	for range 2 { // idempotent
		if err := jc.CompleteRenew(t.Context(), certPEM); err != nil {
			t.Fatal(err)
		}
	}
	if got := servedKey(t, hostClient(t, ca, addr)); !api.SamePublicKey(got, csr.PublicKey) {
		t.Error("a new connection is not served the renewed certificate")
	}
	if got := servedKey(t, open); !api.SamePublicKey(got, oldKey) {
		t.Error("the open connection was cut or handshaken again")
	}
	if _, err := os.Stat(filepath.Join(dir, NextKeyFile)); !os.IsNotExist(err) {
		t.Errorf("%s left after the renewal: %v", NextKeyFile, err)
	}
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "spent"}
	again, err := LoadIdentity(dir, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cert, _ := again.Certificate(); !again.Joined() || !api.SamePublicKey(cert.Leaf.PublicKey, csr.PublicKey) {
		t.Error("an agent started again does not serve the renewed certificate")
	}
	if err := id.CompleteRenew(t.Context(), ca.SignKey(t, oldKey, "c-1", x509.ExtKeyUsageServerAuth, "c-1")); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("CompleteRenew with no renewal under way = %v, want FailedPrecondition", err)
	}
}

// TestRenewChecksTheCertificate: an unjoined agent renews nothing, and a
// certificate not for the new key, the cell or the CA is refused, the
// old one still served.
func TestRenewChecksTheCertificate(t *testing.T) {
	ca := apitest.NewCA(t)
	other := apitest.NewCA(t)
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "t"}
	id, err := LoadIdentity(t.TempDir(), b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := id.Renew(t.Context()); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Renew before the join = %v, want FailedPrecondition", err)
	}
	self, _ := id.Certificate()
	if err := id.CompleteJoin(t.Context(), ca.SignKey(t, self.Leaf.PublicKey, "c-1", x509.ExtKeyUsageServerAuth, "c-1")); err != nil {
		t.Fatal(err)
	}
	joined, _ := id.Certificate()
	offer, err := id.Renew(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.ParseCertificateRequest(offer.CSR)
	if err != nil {
		t.Fatal(err)
	}
	for name, cert := range map[string][]byte{
		"the old key's":   ca.SignKey(t, self.Leaf.PublicKey, "c-1", x509.ExtKeyUsageServerAuth, "c-1"),
		"another cell's":  ca.SignKey(t, csr.PublicKey, "c-2", x509.ExtKeyUsageServerAuth, "c-2"),
		"another CA's":    other.SignKey(t, csr.PublicKey, "c-1", x509.ExtKeyUsageServerAuth, "c-1"),
		"for client auth": ca.SignKey(t, csr.PublicKey, "c-1", x509.ExtKeyUsageClientAuth, "c-1"),
	} {
		if err := id.CompleteRenew(t.Context(), cert); status.Code(err) != codes.InvalidArgument {
			t.Errorf("CompleteRenew with %s certificate = %v, want InvalidArgument", name, err)
		}
	}
	if got, _ := id.Certificate(); got != joined {
		t.Error("a refused certificate replaced the one served")
	}
}

// TestLoadIdentityAfterARenewal: what an agent stopped in the middle of
// a renewal left is taken as it is: the new key once its certificate was
// saved, else the old key and certificate; and a saved certificate that
// has expired is still served, for the host to renew.
func TestLoadIdentityAfterARenewal(t *testing.T) {
	ca := apitest.NewCA(t)
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "t"}
	writeKey := func(t *testing.T, path string) any {
		t.Helper()
		key, err := newKeyFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return key.Public()
	}
	tests := []struct {
		name string
		// saved writes dir's files and returns the key whose
		// certificate should be served.
		saved func(t *testing.T, dir string) any
		now   time.Time
	}{
		{"stopped after the certificate was saved", func(t *testing.T, dir string) any {
			writeKey(t, filepath.Join(dir, KeyFile))
			next := writeKey(t, filepath.Join(dir, NextKeyFile))
			if err := writeFile(filepath.Join(dir, CertFile), ca.SignKey(t, next, "c-1", x509.ExtKeyUsageServerAuth, "c-1")); err != nil {
				t.Fatal(err)
			}
			return next
		}, time.Now()},
		{"stopped before", func(t *testing.T, dir string) any {
			old := writeKey(t, filepath.Join(dir, KeyFile))
			writeKey(t, filepath.Join(dir, NextKeyFile))
			if err := writeFile(filepath.Join(dir, CertFile), ca.SignKey(t, old, "c-1", x509.ExtKeyUsageServerAuth, "c-1")); err != nil {
				t.Fatal(err)
			}
			return old
		}, time.Now()},
		{"expired", func(t *testing.T, dir string) any {
			key := writeKey(t, filepath.Join(dir, KeyFile))
			if err := writeFile(filepath.Join(dir, CertFile), ca.SignKey(t, key, "c-1", x509.ExtKeyUsageServerAuth, "c-1")); err != nil {
				t.Fatal(err)
			}
			return key
		}, time.Now().Add(2 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			want := tt.saved(t, dir)
			id, err := LoadIdentity(dir, b, nil, nil, WithClock(func() time.Time { return tt.now }))
			if err != nil {
				t.Fatal(err)
			}
			cert, _ := id.Certificate()
			if !id.Joined() || !api.SamePublicKey(cert.Leaf.PublicKey, want) {
				t.Fatalf("joined %v, serving %v; want the certificate of the key it is for", id.Joined(), cert.Leaf.Subject)
			}
			data, err := os.ReadFile(filepath.Join(dir, KeyFile))
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(data)
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if signer, ok := key.(crypto.Signer); !ok || !api.SamePublicKey(want, signer.Public()) {
				t.Errorf("%s is not the served certificate's key", KeyFile)
			}
		})
	}
}
