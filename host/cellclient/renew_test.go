package cellclient

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"k8s.io/client-go/kubernetes/fake"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/cell/server"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/test/fakeclock"
)

type applyOnly struct{ cellv1.UnimplementedCellServer }

func (applyOnly) ApplyPod(_ context.Context, req *cellv1.ApplyPodRequest) (*cellv1.ApplyPodResponse, error) {
	return &cellv1.ApplyPodResponse{Generation: req.GetGeneration()}, nil
}

// serveAgent serves a real agent's identity (cell/server) for cell c-1,
// bootstrapped by ca and reading clock, and returns its address.
func serveAgent(t *testing.T, ca *pki.CA, clock func() time.Time) string {
	t.Helper()
	b, err := ca.Bootstrap("c-1", "test", "kip", "u", 0)
	if err != nil {
		t.Fatal(err)
	}
	id, err := server.LoadIdentity(filepath.Join(t.TempDir(), "identity"), b, nil, nil, server.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, lis, id, applyOnly{}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// joinAt joins the agent at addr with ca, as the host does.
func joinAt(t *testing.T, ca *pki.CA, addr string) Joined {
	t.Helper()
	cfg, err := ca.JoinTLSConfig("c-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := join(t.Context(), "c-1", addr, cfg, ca.CertPEM(), func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error) {
		return ca.Join(ctx, "c-1", req, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// dialAt dials the joined agent at addr with ca's strict configuration.
func dialAt(t *testing.T, ca *pki.CA, addr string) *Agent {
	t.Helper()
	cfg, err := ca.ClientTLSConfig("c-1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := dial("c-1", addr, credentials.NewTLS(cfg), DefaultKeepalive)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// served is the certificate the agent served on a call over a.
func served(t *testing.T, a *Agent) (*x509.Certificate, error) {
	t.Helper()
	var p peer.Peer
	_, err := a.c.ApplyPod(t.Context(), &cellv1.ApplyPodRequest{Generation: 1}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	info, _ := p.AuthInfo.(credentials.TLSInfo)
	return info.State.PeerCertificates[0], nil
}

// TestRenewKeepsTheCellReachable: a joined agent renewed over the host's
// connection before its certificate expires is reached by a new
// connection after the old certificate's end; one that was not is not.
func TestRenewKeepsTheCellReachable(t *testing.T) {
	clock := fakeclock.New(time.Now())
	// Two clusters, one cell c-1 each.
	var cas [2]*pki.CA
	var addrs [2]string
	for i := range cas {
		ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca", pki.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		cas[i], addrs[i] = ca, serveAgent(t, ca, clock.Now)
		if got := joinAt(t, ca, addrs[i]); !got.Now {
			t.Fatalf("join = %+v, want joined now", got)
		}
	}
	ca, renewed := cas[0], addrs[0]
	a := dialAt(t, ca, renewed)
	old, err := served(t, a)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(20 * 24 * time.Hour)
	got, err := a.Renew(t.Context(), func(ctx context.Context, req cellapi.RenewRequest) ([]byte, error) {
		return ca.Renew(ctx, "c-1", req, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().Add(pki.DefaultCellValidity); !got.Certificate.NotAfter.Equal(want.Truncate(time.Second)) {
		t.Errorf("renewed until %s, want %s", got.Certificate.NotAfter, want)
	}
	clock.Advance(old.NotAfter.Sub(clock.Now()) + time.Hour) // the old certificate's end
	if cert, err := served(t, dialAt(t, ca, renewed)); err != nil || !cert.Equal(got.Certificate) {
		t.Errorf("a new connection after the old certificate's end: %v; want the renewed certificate served", err)
	}
	if _, err := served(t, dialAt(t, cas[1], addrs[1])); !HandshakeFailed(err) {
		t.Errorf("a new connection to the agent not renewed = %v, want its expired certificate refused", err)
	}
}

// TestRejoinRenewsAnExpiredCertificate: the host's join finds an agent
// serving its expired certificate (Joined.Expired) and renews it over a
// connection of its own; the CA refuses it once past the grace.
func TestRejoinRenewsAnExpiredCertificate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		late    time.Duration // after the certificate's end
		refused bool
	}{
		{"within the grace", 10 * 24 * time.Hour, false},
		{"past the grace", pki.ExpiredRenewalGrace + time.Hour, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := fakeclock.New(time.Now())
			ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca", pki.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			addr := serveAgent(t, ca, clock.Now)
			joinAt(t, ca, addr)
			clock.Advance(pki.DefaultCellValidity + tt.late)
			got := joinAt(t, ca, addr)
			if !got.Expired || got.Now || got.NotAfter.IsZero() {
				t.Fatalf("join = %+v, want the expired certificate found", got)
			}
			cfg, err := ca.JoinTLSConfig("c-1")
			if err != nil {
				t.Fatal(err)
			}
			checked := false
			_, err = rejoin(t.Context(), "c-1", addr, cfg, func(ctx context.Context, req cellapi.RenewRequest) ([]byte, error) {
				return ca.Renew(ctx, "c-1", req, func(context.Context) error { checked = true; return nil })
			})
			if tt.refused {
				if !errors.Is(err, cellapi.ErrJoinRefused) {
					t.Fatalf("rejoin = %v, want refused", err)
				}
				return
			}
			if err != nil || !checked {
				t.Fatalf("rejoin = %v (identity checked: %t), want renewed after the check", err, checked)
			}
			if _, err := served(t, dialAt(t, ca, addr)); err != nil {
				t.Errorf("the rejoined cell: %v", err)
			}
			if got := joinAt(t, ca, addr); got.Expired || got.Now {
				t.Errorf("join after the rejoin = %+v, want joined before", got)
			}
		})
	}
}

// TestRenewOfAnOlderAgent: an agent without the renewal (UNIMPLEMENTED)
// is told apart, for the host to report it.
func TestRenewOfAnOlderAgent(t *testing.T) {
	ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca")
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	certPEM, err := ca.SignCell("c-1", key.Public(), 0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := cellapi.VerifyCellCertificate(certPEM, ca.CertPEM(), "c-1", key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveJoin(t, ca, &joinAgent{cellID: "c-1", key: key, csrKey: key, cert: cert})
	a := dialAt(t, ca, addr)
	_, err = a.Renew(t.Context(), func(context.Context, cellapi.RenewRequest) ([]byte, error) {
		t.Error("sign was asked without a request")
		return nil, errors.New("no")
	})
	if !errors.Is(err, ErrRenewalUnsupported) {
		t.Errorf("Renew = %v, want ErrRenewalUnsupported", err)
	}
}
