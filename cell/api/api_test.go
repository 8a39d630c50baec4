package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kipcell/kip/cell/api/apitest"
	"github.com/kipcell/kip/cell/api/internal/cellv1"
)

type applyServer struct{ cellv1.UnimplementedCellServer }

func (applyServer) ApplyPod(_ context.Context, req *cellv1.ApplyPodRequest) (*cellv1.ApplyPodResponse, error) {
	return &cellv1.ApplyPodResponse{Generation: req.GetGeneration()}, nil
}

func TestMutualTLS(t *testing.T) {
	ca := apitest.NewCA(t)
	cellPEM, cellKey := ca.Issue(t, "c-abc", x509.ExtKeyUsageServerAuth, "c-abc")
	cellCert, err := tls.X509KeyPair(cellPEM, cellKey)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := ServerTLSConfig(ca.PEM, func() (*tls.Certificate, error) { return &cellCert, nil })
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)))
	cellv1.RegisterCellServer(srv, applyServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	hostPEM, hostKey := ca.Issue(t, HostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, _ := tls.X509KeyPair(hostPEM, hostKey)
	otherCA := apitest.NewCA(t)
	strangerPEM, strangerKey := otherCA.Issue(t, HostCommonName, x509.ExtKeyUsageClientAuth)
	strangerCert, _ := tls.X509KeyPair(strangerPEM, strangerKey)
	impostorPEM, impostorKey := ca.Issue(t, "c-other", x509.ExtKeyUsageClientAuth)
	impostorCert, _ := tls.X509KeyPair(impostorPEM, impostorKey)

	tests := []struct {
		name    string
		cert    tls.Certificate
		cellID  string
		wantErr string
	}{
		{name: "host reaches the cell it means", cert: hostCert, cellID: "c-abc"},
		{name: "host expecting another cell refuses", cert: hostCert, cellID: "c-xyz", wantErr: "c-xyz"},
		{name: "client from another CA is refused", cert: strangerCert, cellID: "c-abc", wantErr: "*"},
		{name: "a certificate that is not the host's is refused", cert: impostorCert, cellID: "c-abc", wantErr: "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientTLS, err := ClientTLSConfig(ca.PEM, tt.cert, tt.cellID)
			if err != nil {
				t.Fatal(err)
			}
			apitest.CheckApplyPod(t, lis.Addr().String(), clientTLS, tt.wantErr)
		})
	}
}

func TestBootstrap(t *testing.T) {
	good := Bootstrap{Version: BootstrapVersion, CellID: "c-1", PodUID: "u", CACert: "ca", JoinToken: "t",
		InsecureRegistries: []string{"10.213.0.1:5000"}}
	data, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBootstrap(data)
	if err != nil || !reflect.DeepEqual(*got, good) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	tests := []struct {
		name   string
		mutate func(*Bootstrap)
		want   string
	}{
		{"wrong version", func(b *Bootstrap) { b.Version = 9 }, "version 9"},
		{"cell ID not a DNS label", func(b *Bootstrap) { b.CellID = "Cell_1" }, `cellID "Cell_1"`},
		{"no join token", func(b *Bootstrap) { b.JoinToken = "" }, "joinToken is empty"},
		{"version 1, which carried the key", func(b *Bootstrap) { b.Version = 1 }, "version 1 carries the cell's private key"},
		{"no CA", func(b *Bootstrap) { b.CACert = "" }, "caCert is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := good
			b.InsecureRegistries = nil
			tt.mutate(&b)
			data, _ := b.Marshal()
			if _, err := ParseBootstrap(data); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseBootstrap = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := ParseBootstrap([]byte("{")); err == nil {
		t.Error("ParseBootstrap accepted broken JSON")
	}
	// A standby cell of a warm pool names no pod: its first ApplyPod
	// binds it.
	standby := good
	standby.PodUID = ""
	if data, _ := standby.Marshal(); true {
		if _, err := ParseBootstrap(data); err != nil {
			t.Errorf("ParseBootstrap of a standby's bootstrap (no pod UID) = %v, want nil", err)
		}
	}
}
