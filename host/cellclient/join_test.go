package cellclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes/fake"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/pki"
)

// joinAgent is a fake agent's Join service: it serves a self-signed
// certificate of key (or cert, once it has one) and answers with token and
// a request for csrKey.
type joinAgent struct {
	// Renew and CompleteRenew are Unimplemented, as in an agent older than
	// the renewal.
	cellapi.UnimplementedJoin
	cellID        string
	token         string
	key, csrKey   *ecdsa.PrivateKey
	mu            sync.Mutex
	cert          *tls.Certificate
	certPEM       []byte
	joins, served int
}

func (a *joinAgent) certificate() (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cert != nil {
		return a.cert, nil
	}
	self, err := cellapi.SelfSigned(a.key, a.cellID)
	return &self, err
}

func (a *joinAgent) Join(context.Context) (*cellapi.JoinOffer, error) {
	a.mu.Lock()
	a.joins++
	a.mu.Unlock()
	csr, err := cellapi.NewCSR(a.csrKey, a.cellID)
	if err != nil {
		return nil, err
	}
	return &cellapi.JoinOffer{Token: a.token, CSR: csr}, nil
}

func (a *joinAgent) CompleteJoin(_ context.Context, certPEM []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.served++
	a.certPEM = certPEM
	return nil
}

// serveJoin serves a on 127.0.0.1 with the agent's TLS (the host's client
// certificate required) and returns its address.
func serveJoin(t *testing.T, ca *pki.CA, a *joinAgent) string {
	t.Helper()
	cfg, err := cellapi.ServerTLSConfig(ca.CertPEM(), a.certificate)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	cellapi.RegisterJoin(srv, a)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := cellapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestJoin(t *testing.T) {
	ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca")
	if err != nil {
		t.Fatal(err)
	}
	token := func(cellID string) string {
		tok, err := ca.JoinToken(cellID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	joined := func(t *testing.T, key *ecdsa.PrivateKey) *tls.Certificate {
		certPEM, err := ca.SignCell("c-1", &key.PublicKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := cellapi.VerifyCellCertificate(certPEM, ca.CertPEM(), "c-1", key, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	tests := []struct {
		name       string
		agent      func(t *testing.T) *joinAgent
		wantJoined bool   // by this call
		wantErr    string // "" for none
		refused    bool   // the error wraps ErrJoinRefused
	}{
		{name: "an unjoined agent with its token", wantJoined: true, agent: func(t *testing.T) *joinAgent {
			key := newKey(t)
			return &joinAgent{cellID: "c-1", token: token("c-1"), key: key, csrKey: key}
		}},
		{name: "an agent that has joined", agent: func(t *testing.T) *joinAgent {
			key := newKey(t)
			return &joinAgent{cellID: "c-1", token: token("c-1"), key: key, csrKey: key, cert: joined(t, key)}
		}},
		{name: "a request for another key than the agent's", wantErr: "not for the key the agent serves", refused: true, agent: func(t *testing.T) *joinAgent {
			return &joinAgent{cellID: "c-1", token: token("c-1"), key: newKey(t), csrKey: newKey(t)}
		}},
		{name: "another cell's token", wantErr: "the join token is cell c-2's", refused: true, agent: func(t *testing.T) *joinAgent {
			key := newKey(t)
			return &joinAgent{cellID: "c-1", token: token("c-2"), key: key, csrKey: key}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.agent(t)
			addr := serveJoin(t, ca, a)
			cfg, err := ca.JoinTLSConfig("c-1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := join(t.Context(), "c-1", addr, cfg, ca.CertPEM(), func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error) {
				return ca.Join(ctx, "c-1", req, nil)
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, cellapi.ErrJoinRefused) != tt.refused {
					t.Fatalf("join = %v, want an error saying %q (a refusal: %t)", err, tt.wantErr, tt.refused)
				}
				if a.served != 0 {
					t.Error("the agent was handed a certificate")
				}
				return
			}
			if err != nil || got.Now != tt.wantJoined {
				t.Fatalf("join = %+v, %v; want joined now: %t", got, err, tt.wantJoined)
			}
			if !cellapi.SamePublicKey(got.Key, a.key.Public()) {
				t.Error("join did not report the agent's key")
			}
			if !tt.wantJoined {
				if a.served != 0 {
					t.Error("a joined agent was handed a certificate")
				}
				return
			}
			if _, err := cellapi.VerifyCellCertificate(a.certPEM, ca.CertPEM(), "c-1", a.key, time.Now()); err != nil {
				t.Errorf("the agent got no certificate for its key: %v", err)
			}
		})
	}
}

// TestJoinOfNoAgent: an address where no agent listens is not a refusal:
// the caller tries again.
func TestJoinOfNoAgent(t *testing.T) {
	ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	cfg, err := ca.JoinTLSConfig("c-1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = join(t.Context(), "c-1", addr, cfg, ca.CertPEM(), func(context.Context, cellapi.JoinRequest) ([]byte, error) {
		t.Error("sign was asked without a request")
		return nil, errors.New("no")
	})
	if err == nil || errors.Is(err, cellapi.ErrJoinRefused) {
		t.Errorf("join = %v, want an error that is no refusal", err)
	}
}

// TestHandshakeFailed: a call to an unjoined agent over the host's strict
// TLS fails its handshake, which says to try Join; one to no agent does
// not.
func TestHandshakeFailed(t *testing.T) {
	ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca")
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	unjoined := serveJoin(t, ca, &joinAgent{cellID: "c-1", key: key, csrKey: key})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := lis.Addr().String()
	lis.Close()
	for _, tt := range []struct {
		name, target string
		want         bool
	}{
		{"an unjoined agent", unjoined, true},
		{"no agent", nobody, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ca.ClientTLSConfig("c-1")
			if err != nil {
				t.Fatal(err)
			}
			a, err := dial("c-1", tt.target, credentials.NewTLS(cfg), DefaultKeepalive)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			_, err = a.Apply(t.Context(), &cellapi.PodRequest{})
			if err == nil || HandshakeFailed(err) != tt.want {
				t.Errorf("Apply = %v: HandshakeFailed %t, want %t", err, HandshakeFailed(err), tt.want)
			}
		})
	}
}
