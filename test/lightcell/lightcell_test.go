package lightcell

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/apitest"
	"github.com/kipcell/kip/cell/api/cellv1"
)

// TestLightCellTakesServices: a light cell serves the real protocol over
// mutual TLS and keeps the host's services table, whole and in deltas.
func TestLightCellTakesServices(t *testing.T) {
	ca := apitest.NewCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	b := &cellapi.Bootstrap{Version: cellapi.BootstrapVersion, CellID: "cell-1", PodUID: "u", ListenAddress: addr,
		CACert: string(ca.PEM), JoinToken: "token"}
	listening := make(chan struct{})
	done := make(chan error, 1)
	light := New()
	go func() { done <- light.Serve(t.Context(), b, t.TempDir(), func() { close(listening) }) }()
	select {
	case <-listening:
	case err := <-done:
		t.Fatal(err)
	}
	ca.Join(t, addr, "cell-1")

	hostPEM, hostKey := ca.Issue(t, cellapi.HostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, err := tls.X509KeyPair(hostPEM, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := cellapi.ClientTLSConfig(ca.PEM, hostCert, "cell-1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := cellv1.NewCellClient(cc)
	svc := func(name string) *cellv1.Service { return &cellv1.Service{Namespace: "default", Name: name} }
	for _, req := range []*cellv1.ApplyServicesRequest{
		{Table: "t", Revision: 2, Services: []*cellv1.Service{svc("a"), svc("b")}},
		{Table: "t", Revision: 3, BaseRevision: 2, Services: []*cellv1.Service{svc("c")}, Removed: []string{"default/a"}},
	} {
		resp, err := c.ApplyServices(t.Context(), req)
		if err != nil || resp.GetRevision() != req.GetRevision() {
			t.Fatalf("ApplyServices revision %d: %v, %v", req.GetRevision(), resp, err)
		}
	}
	if _, err := c.ApplyPod(t.Context(), &cellv1.ApplyPodRequest{Generation: 1}); err != nil {
		t.Errorf("ApplyPod: %v", err)
	}
	if _, err := c.Stats(t.Context(), &cellv1.StatsRequest{}); err == nil {
		t.Error("Stats on a light cell succeeded")
	}
	if syncs, services := light.Programmed(); syncs != 2 || services != 2 {
		t.Errorf("programmed %d tables, the last of %d services; want 2 tables, the last of 2 (b and c)", syncs, services)
	}
}
