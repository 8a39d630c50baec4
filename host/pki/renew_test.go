package pki

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/cell/api"
)

// cellChain is the chain an agent of cellID serves with the certificate
// ca signs for key now.
func cellChain(t *testing.T, ca *CA, cellID string, key *ecdsa.PrivateKey) []*x509.Certificate {
	t.Helper()
	certPEM, err := ca.SignCell(cellID, key.Public(), 0)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{cert}
}

func newTestKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := api.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestRenew: the CA renews a cell that serves a current certificate of
// its own for the cell, and one whose certificate expired within
// ExpiredRenewalGrace once the identity check passes; it refuses any
// other evidence and any request for more than the cell.
func TestRenew(t *testing.T) {
	const day = 24 * time.Hour
	refused := errors.New("instance i-2's identity is not instance i-1's")
	tests := []struct {
		name string
		// later is how long after the served certificate was issued the
		// renewal comes.
		later time.Duration
		// peer is what the agent serves, from ca and another CA.
		peer func(t *testing.T, ca, other *CA) []*x509.Certificate
		// csr is the request for the new key.
		csr       func(t *testing.T, key *ecdsa.PrivateKey) []byte
		check     error
		wantCheck bool
		want      string // "" for a certificate
	}{
		{name: "a current certificate", later: 20 * day},
		{name: "one about to expire", later: DefaultCellValidity - time.Minute},
		{name: "one that expired, within the grace", later: DefaultCellValidity + ExpiredRenewalGrace - time.Hour, wantCheck: true},
		{name: "one that expired, the identity refused", later: DefaultCellValidity + day, check: refused, wantCheck: true, want: "is not instance i-1's"},
		{name: "one that expired past the grace", later: DefaultCellValidity + ExpiredRenewalGrace + time.Hour, want: "more than 720h0m0s ago"},
		{name: "no certificate", peer: func(*testing.T, *CA, *CA) []*x509.Certificate { return nil },
			want: "does not serve a certificate of this CA for the cell"},
		{name: "another CA's certificate", peer: func(t *testing.T, _, other *CA) []*x509.Certificate {
			return cellChain(t, other, "c-1", newTestKey(t))
		}, want: "does not serve a certificate of this CA for the cell"},
		{name: "another cell's certificate", peer: func(t *testing.T, ca, _ *CA) []*x509.Certificate {
			return cellChain(t, ca, "c-2", newTestKey(t))
		}, want: "does not serve a certificate of this CA for the cell"},
		{name: "a request for another cell", csr: func(t *testing.T, key *ecdsa.PrivateKey) []byte {
			csr, err := api.NewCSR(key, "c-2")
			if err != nil {
				t.Fatal(err)
			}
			return csr
		}, want: `names "c-2", not the cell`},
		{name: "a request with an address", csr: func(t *testing.T, key *ecdsa.PrivateKey) []byte {
			return csrWith(t, key, &x509.CertificateRequest{DNSNames: []string{"c-1"}, EmailAddresses: []string{"a@b.c"}})
		}, want: "names addresses"},
		{name: "garbage", csr: func(*testing.T, *ecdsa.PrivateKey) []byte { return []byte("csr") }, want: "parsing certificate request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			ca := mustLoad(t, WithClock(clock.Now))
			other := mustLoad(t, WithClock(clock.Now))
			peer := cellChain(t, ca, "c-1", newTestKey(t))
			if tt.peer != nil {
				peer = tt.peer(t, ca, other)
			}
			key := newTestKey(t)
			csr, err := api.NewCSR(key, "c-1")
			if err != nil {
				t.Fatal(err)
			}
			if tt.csr != nil {
				csr = tt.csr(t, key)
			}
			clock.Advance(tt.later)
			checked := false
			certPEM, err := ca.Renew(t.Context(), "c-1", api.RenewRequest{CSR: csr, Peer: peer}, func(context.Context) error {
				checked = true
				return tt.check
			})
			if checked != tt.wantCheck {
				t.Errorf("identity checked: %v, want %v", checked, tt.wantCheck)
			}
			if tt.want != "" {
				if !errors.Is(err, api.ErrJoinRefused) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Renew = %v, want a refusal saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cert, err := api.VerifyCellCertificate(certPEM, ca.CertPEM(), "c-1", key, clock.Now())
			if err != nil {
				t.Fatalf("the renewed certificate: %v", err)
			}
			if got, want := cert.Leaf.NotAfter, clock.Now().Add(DefaultCellValidity); !got.Equal(want) {
				t.Errorf("renewed until %s, want %s", got, want)
			}
		})
	}
}

// TestRenewedKeyIsTheCells: once a cell is renewed to a new key, a join
// token issued before goes to no other key (as after a join).
func TestRenewedKeyIsTheCells(t *testing.T) {
	clock := newFakeClock()
	ca := mustLoad(t, WithClock(clock.Now))
	tok, err := ca.JoinToken("c-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	key := newTestKey(t)
	csr, err := api.NewCSR(key, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Renew(t.Context(), "c-1", api.RenewRequest{CSR: csr, Peer: cellChain(t, ca, "c-1", newTestKey(t))}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = ca.Join(t.Context(), "c-1", joinRequest(t, "c-1", tok, newTestKey(t)), nil)
	if !errors.Is(err, api.ErrJoinRefused) || !strings.Contains(err.Error(), "joined with another key") {
		t.Errorf("Join with a token issued before the renewal = %v, want refused", err)
	}
}
