package cellclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes/fake"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/pki"
)

// The renewal against a real agent (its identity, cell/server: a
// certificate renewed before its end, an expired one rejoined) is tested
// in test/lightcell, which may import the agent (host/ does not).

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
