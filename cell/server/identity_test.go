package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/apitest"
)

// applyOnly is a Cell that answers ApplyPod with the request's generation;
// the tests call nothing else (the nil api.Cell would panic).
type applyOnly struct{ api.Cell }

func (applyOnly) ApplyPod(_ context.Context, req *api.PodRequest) (int64, error) {
	return req.Generation, nil
}

// serveIdentity serves an agent of cell c-1 that keeps its identity in
// dir, and returns its address and identity.
func serveIdentity(t *testing.T, ca *apitest.CA, dir string, identity InstanceIdentity) (string, *Identity) {
	t.Helper()
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "the-token"}
	id, err := LoadIdentity(dir, b, identity, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, id, applyOnly{}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String(), id
}

// joinClient is a client of the agent at addr with the host certificate
// of ca that accepts any server certificate (the host's join connection).
func joinClient(t *testing.T, ca *apitest.CA, addr string) *grpc.ClientConn {
	t.Helper()
	hostPEM, hostKey := ca.Issue(t, api.HostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, err := tls.X509KeyPair(hostPEM, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := api.JoinClientTLSConfig(hostCert, "c-1")
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

func TestUnjoinedAgentAnswersOnlyJoin(t *testing.T) {
	ca := apitest.NewCA(t)
	dir := filepath.Join(t.TempDir(), "identity")
	addr, id := serveIdentity(t, ca, dir, func(context.Context) ([]byte, []byte, error) {
		return []byte(`{"instanceId":"i-1"}`), []byte("sig"), nil
	})
	if id.Joined() {
		t.Fatal("a new agent has joined")
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, KeyFile): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}

	cc := joinClient(t, ca, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := api.NewClient(cc).ApplyPod(ctx, &api.PodRequest{Generation: 1})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "has not joined") {
		t.Errorf("ApplyPod before the join = %v, want FailedPrecondition: not joined", err)
	}
	offer, err := api.NewJoinClient(cc).Join(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if offer.Token != "the-token" || string(offer.IdentityDocument) != `{"instanceId":"i-1"}` || string(offer.IdentitySignature) != "sig" {
		t.Errorf("Join = %+v, want the bootstrap's token and the instance identity", offer)
	}
	csr, err := x509.ParseCertificateRequest(offer.CSR)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := id.Certificate()
	if !api.SamePublicKey(csr.PublicKey, self.Leaf.PublicKey) {
		t.Error("the certificate request is not for the key the agent serves")
	}

	// A client without the host's certificate (another CA's) gets nothing,
	// Join included.
	other := apitest.NewCA(t)
	_, err = api.NewJoinClient(joinClient(t, other, addr)).Join(ctx)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Join with another CA's host certificate = %v, want the handshake refused (Unavailable)", err)
	}
}

func TestJoinedAgentServesItsCertificate(t *testing.T) {
	ca := apitest.NewCA(t)
	dir := filepath.Join(t.TempDir(), "identity")
	addr, id := serveIdentity(t, ca, dir, nil)
	ca.Join(t, addr, "c-1")
	if !id.Joined() {
		t.Fatal("the agent has not joined")
	}
	hostPEM, hostKey := ca.Issue(t, api.HostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, err := tls.X509KeyPair(hostPEM, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := api.ClientTLSConfig(ca.PEM, hostCert, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	apitest.CheckApplyPod(t, addr, strict, "")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := api.NewJoinClient(joinClient(t, ca, addr)).Join(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Join once joined = %v, want FailedPrecondition", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, CertFile)); err != nil || fi.Mode() != 0o600 {
		t.Errorf("saved certificate: %v, %v; want mode 0600", fi, err)
	}

	// An agent started again on the directory serves at once, with the
	// same key.
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "spent"}
	again, err := LoadIdentity(dir, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Joined() {
		t.Error("the restarted agent has not joined")
	}
	before, _ := id.Certificate()
	after, _ := again.Certificate()
	if !api.SamePublicKey(before.Leaf.PublicKey, after.Leaf.PublicKey) {
		t.Error("the restarted agent has another key")
	}
}

// TestJoinWithoutAnIdentity: an identity that cannot be read is left out
// of the request rather than failing it.
func TestJoinWithoutAnIdentity(t *testing.T) {
	ca := apitest.NewCA(t)
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "t"}
	id, err := LoadIdentity(t.TempDir(), b, func(context.Context) ([]byte, []byte, error) {
		return nil, nil, errors.New("no metadata service")
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	offer, err := id.Join(t.Context())
	if err != nil || offer.Token != "t" || len(offer.IdentityDocument) != 0 {
		t.Errorf("Join = %+v, %v; want the token and no identity", offer, err)
	}
}

func TestCompleteJoinRefusesOtherCertificates(t *testing.T) {
	ca := apitest.NewCA(t)
	other := apitest.NewCA(t)
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: string(ca.PEM), JoinToken: "t"}
	id, err := LoadIdentity(t.TempDir(), b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	otherKeyCert, _ := ca.Issue(t, "c-1", x509.ExtKeyUsageServerAuth, "c-1")
	self, _ := id.Certificate()
	pub := self.Leaf.PublicKey
	for _, tt := range []struct {
		name string
		cert []byte
		want string
	}{
		{"not PEM", []byte("garbage"), "no certificate"},
		{"for another key", otherKeyCert, "not for this cell's key"},
		{"for another cell", ca.SignKey(t, pub, "c-2", x509.ExtKeyUsageServerAuth, "c-2"), "c-2"},
		{"by another CA", other.SignKey(t, pub, "c-1", x509.ExtKeyUsageServerAuth, "c-1"), "unknown authority"},
		{"for client auth", ca.SignKey(t, pub, "c-1", x509.ExtKeyUsageClientAuth, "c-1"), "key usage"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := id.CompleteJoin(t.Context(), tt.cert)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CompleteJoin = %v, want InvalidArgument saying %q", err, tt.want)
			}
			if id.Joined() {
				t.Error("the agent took it")
			}
		})
	}
}
