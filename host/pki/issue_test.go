package pki

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/apitest"
)

func parseCertPEM(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (ca *CA) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.certPEM)
	return pool
}

// newKey returns a fresh cell key.
func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := api.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestSignCellRejectsBadInput(t *testing.T) {
	ca := mustLoad(t)
	tests := []struct {
		name     string
		cellID   string
		validity time.Duration
		want     string
	}{
		{name: "empty", cellID: "", want: `cell ""`},
		{name: "upper case and underscore", cellID: "Cell_1", want: `cell "Cell_1"`},
		{name: "leading hyphen", cellID: "-c1", want: `cell "-c1"`},
		{name: "dotted", cellID: "c1.example", want: `cell "c1.example"`},
		{name: "longer than a label", cellID: strings.Repeat("c", 64), want: "not a DNS label"},
		{name: "negative validity", cellID: "c1", validity: -time.Hour, want: "negative validity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, err := ca.SignCell(tt.cellID, &newKey(t).PublicKey, tt.validity)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SignCell error = %v, want one containing %q", err, tt.want)
			}
			if certPEM != nil {
				t.Error("SignCell returned a certificate with its error")
			}
		})
	}
}

func TestSignCell(t *testing.T) {
	ca := mustLoad(t)
	tests := []struct {
		name     string
		cellID   string
		validity time.Duration
		wantLife time.Duration
	}{
		{name: "default validity", cellID: "c-abc", wantLife: DefaultCellValidity},
		{name: "given validity", cellID: "c-1", validity: time.Hour, wantLife: time.Hour},
		{name: "no later than the CA", cellID: "c-2", validity: 2 * CAValidity, wantLife: CAValidity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := newKey(t)
			certPEM, err := ca.SignCell(tt.cellID, &key.PublicKey, tt.validity)
			if err != nil {
				t.Fatal(err)
			}
			cert := parseCertPEM(t, certPEM)
			if !key.PublicKey.Equal(cert.PublicKey) {
				t.Error("the certificate is not for the cell's key")
			}
			if diff := cmp.Diff([]string{tt.cellID}, cert.DNSNames); diff != "" {
				t.Errorf("DNS names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, cert.ExtKeyUsage); diff != "" {
				t.Errorf("extended key usage (-want +got):\n%s", diff)
			}
			if cert.IsCA {
				t.Error("cell certificate is a CA")
			}
			if life := time.Until(cert.NotAfter); life < tt.wantLife-time.Minute || life > tt.wantLife {
				t.Errorf("certificate valid for %s more, want about %s", life, tt.wantLife)
			}
			if cert.NotAfter.After(ca.cert.NotAfter) {
				t.Errorf("certificate outlives the CA: %s > %s", cert.NotAfter, ca.cert.NotAfter)
			}

			verify := []struct {
				name    string
				opts    x509.VerifyOptions
				wantErr bool
			}{
				{name: "server auth for the cell", opts: x509.VerifyOptions{DNSName: tt.cellID, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}},
				{name: "server auth for another cell", opts: x509.VerifyOptions{DNSName: "c-other", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, wantErr: true},
				{name: "client auth", opts: x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, wantErr: true},
			}
			for _, v := range verify {
				v.opts.Roots = ca.pool()
				if _, err := cert.Verify(v.opts); (err != nil) != v.wantErr {
					t.Errorf("%s: Verify error = %v, want error %t", v.name, err, v.wantErr)
				}
			}
		})
	}
}

func TestIssueAfterCAExpired(t *testing.T) {
	clock := newFakeClock()
	ca := mustLoad(t, WithClock(clock.Now))
	clock.Advance(CAValidity + time.Hour)
	if _, err := ca.SignCell("c1", &newKey(t).PublicKey, 0); !errors.Is(err, errExpired) {
		t.Errorf("SignCell error = %v, want %v", err, errExpired)
	}
	if _, err := ca.HostCertificate(0); !errors.Is(err, errExpired) {
		t.Errorf("HostCertificate error = %v, want %v", err, errExpired)
	}
}

func TestBootstrap(t *testing.T) {
	ca := mustLoad(t)
	b, err := ca.Bootstrap("c-abc", "cluster-1", "kip", "pod-uid", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := api.Bootstrap{
		Version: api.BootstrapVersion, CellID: "c-abc", ClusterID: "cluster-1",
		NodeName: "kip", PodUID: "pod-uid", CACert: string(ca.CertPEM()),
	}
	got := *b
	got.JoinToken = ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bootstrap (-want +got):\n%s", diff)
	}
	if _, err := ca.checkToken("c-abc", b.JoinToken); err != nil {
		t.Errorf("the bootstrap's join token does not check out: %v", err)
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.ParseBootstrap(data); err != nil {
		t.Errorf("the cell would refuse its bootstrap: %v", err)
	}

	// A standby cell of the warm pool has no pod yet: its first ApplyPod
	// binds it.
	standby, err := ca.Bootstrap("kip-warm-0123456789abcdef", "cluster-1", "kip", "", 0)
	if err != nil {
		t.Errorf("a standby cell's bootstrap (no pod UID): %v", err)
	} else if standby.PodUID != "" {
		t.Errorf("a standby cell's bootstrap has pod UID %q, want none", standby.PodUID)
	}

	for _, tt := range []struct{ name, cellID, clusterID, want string }{
		{name: "bad cell ID", cellID: "Cell_1", clusterID: "cluster-1", want: `cell "Cell_1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ca.Bootstrap(tt.cellID, tt.clusterID, "kip", "u", 0); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Bootstrap error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// applyServer is a cell agent that answers ApplyPod (with the request's
// generation) and nothing else: enough to see a call get through the
// mutual TLS.
type applyServer struct{}

var errUnimplemented = status.Error(codes.Unimplemented, "not implemented by this test's agent")

func (applyServer) ApplyPod(_ context.Context, req *api.PodRequest) (int64, error) {
	return req.Generation, nil
}

func (applyServer) WatchStatus(context.Context, func(*api.StatusUpdate) error) error {
	return errUnimplemented
}

func (applyServer) Logs(context.Context, api.LogsOptions, io.Writer) error { return errUnimplemented }
func (applyServer) Exec(context.Context, api.ExecStream) error             { return errUnimplemented }
func (applyServer) Attach(context.Context, api.ExecStream) error           { return errUnimplemented }

func (applyServer) PortForward(context.Context, api.PortForwardStream) error {
	return errUnimplemented
}

func (applyServer) Stats(context.Context, bool) (*api.Stats, error) { return nil, errUnimplemented }

func (applyServer) DeletePod(context.Context, time.Duration) error { return errUnimplemented }

func (applyServer) ApplyServices(context.Context, *api.ServicesUpdate) (api.ServicesApplied, error) {
	return api.ServicesApplied{}, errUnimplemented
}

// serveCell runs a cell agent's gRPC server for the cell cellID, with a
// certificate ca signed, on 127.0.0.1 and returns its address.
func serveCell(t *testing.T, ca *CA, cellID string) string {
	t.Helper()
	key := newKey(t)
	certPEM, err := ca.SignCell(cellID, &key.PublicKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := api.VerifyCellCertificate(certPEM, ca.CertPEM(), cellID, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := api.ServerTLSConfig(ca.CertPEM(), func() (*tls.Certificate, error) { return cert, nil })
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)))
	api.RegisterCell(srv, applyServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestMutualTLS(t *testing.T) {
	ca := mustLoad(t, WithClusterID("cluster-1"))
	addr := serveCell(t, ca, "c-abc")
	otherCA := mustLoad(t, WithClusterID("cluster-2"))

	tests := []struct {
		name    string
		ca      *CA
		cellID  string
		wantErr string // "" for success, "*" for any refusal
	}{
		{name: "host reaches the cell it means", ca: ca, cellID: "c-abc"},
		{name: "host expecting another cell refuses", ca: ca, cellID: "c-xyz", wantErr: "c-xyz"},
		{name: "host of another cluster is refused", ca: otherCA, cellID: "c-abc", wantErr: "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientTLS, err := tt.ca.ClientTLSConfig(tt.cellID)
			if err != nil {
				t.Fatal(err)
			}
			apitest.CheckApplyPod(t, addr, clientTLS, tt.wantErr)
		})
	}

	if _, err := ca.ClientTLSConfig("Not_A_Cell"); err == nil {
		t.Error("ClientTLSConfig accepted an invalid cell ID")
	}
}

func TestHostCertificateRenewal(t *testing.T) {
	const validity = 3 * time.Hour
	clock := newFakeClock()
	ca := mustLoad(t, WithClock(clock.Now))
	first, err := ca.HostCertificate(validity)
	if err != nil {
		t.Fatal(err)
	}

	leaf := first.Leaf
	if leaf.Subject.CommonName != api.HostCommonName {
		t.Errorf("host certificate common name = %q, want %q", leaf.Subject.CommonName, api.HostCommonName)
	}
	if diff := cmp.Diff([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, leaf.ExtKeyUsage); diff != "" {
		t.Errorf("extended key usage (-want +got):\n%s", diff)
	}
	at := clock.Now()
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.pool(), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("host certificate does not verify for client auth: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.pool(), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("host certificate verifies for server auth")
	}
	if got := leaf.NotAfter.Sub(at); got != validity {
		t.Errorf("host certificate valid for %s, want %s", got, validity)
	}

	// The certificate is renewed once 2h (2/3 of 3h) have passed since it
	// was issued; steps are cumulative.
	steps := []struct {
		name        string
		advance     time.Duration
		wantRenewed bool
	}{
		{name: "fresh", advance: 0},
		{name: "half way", advance: 90 * time.Minute},
		{name: "just before two thirds", advance: 30*time.Minute - time.Second},
		{name: "at two thirds", advance: time.Second, wantRenewed: true},
		{name: "right after renewal", advance: time.Minute},
		{name: "two thirds of the new one", advance: 2*time.Hour - time.Minute, wantRenewed: true},
	}
	prev := first
	for _, s := range steps {
		clock.Advance(s.advance)
		cur, err := ca.HostCertificate(validity)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if renewed := cur.Leaf.SerialNumber.Cmp(prev.Leaf.SerialNumber) != 0; renewed != s.wantRenewed {
			t.Errorf("%s: renewed = %t, want %t", s.name, renewed, s.wantRenewed)
		}
		if s.wantRenewed && !cur.Leaf.NotAfter.Equal(clock.Now().Add(validity)) {
			t.Errorf("%s: renewed certificate expires %s, want %s", s.name, cur.Leaf.NotAfter, clock.Now().Add(validity))
		}
		prev = cur
	}

	// Connections pick up the renewed certificate at their next handshake.
	cfg, err := ca.ClientTLSConfig("c-abc")
	if err != nil {
		t.Fatal(err)
	}
	before, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(validity)
	after, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Leaf.SerialNumber.Cmp(before.Leaf.SerialNumber) == 0 {
		t.Error("the TLS config kept presenting a host certificate past its renewal time")
	}
}

func TestHostCertificateConcurrent(t *testing.T) {
	ca := mustLoad(t)
	const n = 16
	serials := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cert, err := ca.HostCertificate(0)
			if err != nil {
				t.Error(err)
				return
			}
			serials[i] = cert.Leaf.SerialNumber.String()
		})
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if serials[i] != serials[0] {
			t.Fatalf("concurrent callers got different host certificates: %v", serials)
		}
	}
}
