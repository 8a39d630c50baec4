package pki

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kipcell/kip/cell/api"
)

// joinRequest is what an agent of cellID with key sends, with token.
func joinRequest(t *testing.T, cellID, token string, key *ecdsa.PrivateKey) api.JoinRequest {
	t.Helper()
	csr, err := api.NewCSR(key, cellID)
	if err != nil {
		t.Fatal(err)
	}
	return api.JoinRequest{Token: token, CSR: csr, PeerKey: key.Public()}
}

// csrWith returns a certificate request of key from tmpl.
func csrWith(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestJoinChecksTheRequest(t *testing.T) {
	clock := newFakeClock()
	ca := mustLoad(t, WithClock(clock.Now))
	other := mustLoad(t)
	token := func(t *testing.T, ca *CA, cellID string, ttl time.Duration) string {
		t.Helper()
		tok, err := ca.JoinToken(cellID, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tests := []struct {
		name string
		// req builds the request; key is the agent's.
		req  func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest
		want string // "" for a certificate
	}{
		{name: "the cell's own request", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			return joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
		}},
		{name: "an empty token", want: "not a join token", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			return joinRequest(t, "c-1", "", key)
		}},
		{name: "garbage", want: "not a join token", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			return joinRequest(t, "c-1", "kipjoin1.!!!.???", key)
		}},
		{name: "a token with a changed MAC", want: "not this cluster's", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			tok := token(t, ca, "c-1", 0)
			return joinRequest(t, "c-1", tok[:len(tok)-2]+"AA", key)
		}},
		{name: "another cluster's token", want: "not this cluster's", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			return joinRequest(t, "c-1", token(t, other, "c-1", 0), key)
		}},
		{name: "another cell's token", want: "the join token is cell c-2's", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			return joinRequest(t, "c-1", token(t, ca, "c-2", 0), key)
		}},
		{name: "an expired token", want: "the join token expired", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", time.Minute), key)
			clock.Advance(time.Minute)
			return r
		}},
		{name: "a request for another key than the agent serves", want: "not for the key the agent serves", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			r.PeerKey = newKey(t).Public()
			return r
		}},
		{name: "a request for another cell", want: "not the cell", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			r.CSR = csrWith(t, key, &x509.CertificateRequest{DNSNames: []string{"c-2"}})
			return r
		}},
		{name: "a common name of another cell", want: `names "c-2"`, req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			r.CSR = csrWith(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "c-2"}, DNSNames: []string{"c-1"}})
			return r
		}},
		{name: "an extra DNS name", want: "not the cell alone", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			r.CSR = csrWith(t, key, &x509.CertificateRequest{DNSNames: []string{"c-1", "kip-host"}})
			return r
		}},
		{name: "an IP address", want: "names addresses", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			r.CSR = csrWith(t, key, &x509.CertificateRequest{DNSNames: []string{"c-1"}, IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}})
			return r
		}},
		{name: "an extension asking for client auth", want: "asks for extension 2.5.29.37", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 2}})
			if err != nil {
				t.Fatal(err)
			}
			r.CSR = csrWith(t, key, &x509.CertificateRequest{DNSNames: []string{"c-1"},
				ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Value: eku}}})
			return r
		}},
		{name: "not a certificate request", want: "parsing certificate request", req: func(t *testing.T, key *ecdsa.PrivateKey) api.JoinRequest {
			r := joinRequest(t, "c-1", token(t, ca, "c-1", 0), key)
			r.CSR = []byte("garbage")
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := newKey(t)
			certPEM, err := ca.Join(t.Context(), "c-1", tt.req(t, key), nil)
			if tt.want != "" {
				if !errors.Is(err, api.ErrJoinRefused) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Join = %v, want a refusal saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := api.VerifyCellCertificate(certPEM, ca.CertPEM(), "c-1", key, time.Now()); err != nil {
				t.Errorf("the signed certificate is not the cell's: %v", err)
			}
			cert := parseCertPEM(t, certPEM)
			if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
				t.Errorf("extended key usage %v, want server auth alone", cert.ExtKeyUsage)
			}
		})
	}
}

func TestJoinTokenIsSingleUse(t *testing.T) {
	clock := newFakeClock()
	ca := mustLoad(t, WithClock(clock.Now))
	token, err := ca.JoinToken("c-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, key), nil); err != nil {
		t.Fatal(err)
	}
	// An agent that crashed before it saved its certificate asks again
	// with the same key: it gets one.
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, key), nil); err != nil {
		t.Errorf("the same request again = %v, want a certificate", err)
	}
	// Anybody else with the token (it is in the user data) is refused.
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, newKey(t)), nil); !errors.Is(err, api.ErrJoinRefused) ||
		!strings.Contains(err.Error(), "spent already") {
		t.Errorf("the token with another key = %v, want a refusal: spent", err)
	}
	// Once expired, not even the same key gets a certificate.
	clock.Advance(time.Hour)
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, key), nil); !errors.Is(err, api.ErrJoinRefused) ||
		!strings.Contains(err.Error(), "expired") {
		t.Errorf("the expired token = %v, want a refusal: expired", err)
	}
	// A token of a cell is not spent by another cell's join.
	other, err := ca.JoinToken("c-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Join(t.Context(), "c-2", joinRequest(t, "c-2", other, newKey(t)), nil); err != nil {
		t.Errorf("another cell's join = %v", err)
	}
}

func TestJoinAsksTheCheckLast(t *testing.T) {
	ca := mustLoad(t)
	token, err := ca.JoinToken("c-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("the instance identity is another instance's")
	asked := 0
	check := func(context.Context) error { asked++; return refused }
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", "bad", newKey(t)), check); asked != 0 || !errors.Is(err, api.ErrJoinRefused) {
		t.Errorf("a bad token: Join = %v after %d checks, want a refusal before any", err, asked)
	}
	key := newKey(t)
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, key), check); !errors.Is(err, refused) || !errors.Is(err, api.ErrJoinRefused) {
		t.Errorf("Join = %v, want the check's refusal", err)
	}
	// A refused check spends nothing: the cell's own agent, whose
	// identity checks out, still joins.
	if _, err := ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, newKey(t)), nil); err != nil {
		t.Errorf("Join after a refused check = %v, want a certificate", err)
	}
}

func TestJoinTokenRejectsBadInput(t *testing.T) {
	ca := mustLoad(t)
	for _, tt := range []struct {
		name, cellID string
		ttl          time.Duration
		want         string
	}{
		{"not a DNS label", "Cell_1", 0, "not a DNS label"},
		{"negative lifetime", "c-1", -time.Second, "negative lifetime"},
		{"longer than a day", "c-1", api.MaxJoinTokenTTL + time.Second, "longer than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ca.JoinToken(tt.cellID, tt.ttl); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("JoinToken = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestJoinTokenOutlivesTheHost: a host that restarts (or another replica)
// loads the same CA from its Secret and accepts the tokens issued before.
func TestJoinTokenOutlivesTheHost(t *testing.T) {
	client := fake.NewClientset()
	first, err := Load(t.Context(), client, testNS, testName)
	if err != nil {
		t.Fatal(err)
	}
	token, err := first.JoinToken("c-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Load(t.Context(), client, testNS, testName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, newKey(t)), nil); err != nil {
		t.Errorf("the next host's Join = %v, want a certificate", err)
	}
}

// TestJoinedCellRefusesOlderTokens: a host that restarted has forgotten
// which tokens were spent, but learns which cells joined with which key
// as it looks at them (SawJoined): a token issued before that is refused
// to any other key, while a token issued after (the cell launched again)
// is not, nor the same key (an agent that lost only its certificate).
func TestJoinedCellRefusesOlderTokens(t *testing.T) {
	clock := newFakeClock()
	client := fake.NewClientset()
	first, err := Load(t.Context(), client, testNS, testName, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	token, err := first.JoinToken("c-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	if _, err := first.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, key), nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	next, err := Load(t.Context(), client, testNS, testName, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	next.SawJoined("c-1", key.Public())
	if _, err := next.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, newKey(t)), nil); !errors.Is(err, api.ErrJoinRefused) ||
		!strings.Contains(err.Error(), "has joined with another key") {
		t.Errorf("the old token with another key = %v, want a refusal: joined", err)
	}
	if _, err := next.Join(t.Context(), "c-1", joinRequest(t, "c-1", token, key), nil); err != nil {
		t.Errorf("the old token with the cell's key = %v, want a certificate", err)
	}
	clock.Advance(time.Millisecond)
	fresh, err := next.JoinToken("c-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Join(t.Context(), "c-1", joinRequest(t, "c-1", fresh, newKey(t)), nil); err != nil {
		t.Errorf("a token issued after the cell was seen, with a new key = %v, want a certificate", err)
	}
}
