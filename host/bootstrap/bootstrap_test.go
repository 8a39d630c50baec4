package bootstrap

import (
	"context"
	"crypto/x509/pkix"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const node = "kip-test"

var discard = slog.New(slog.DiscardHandler)

// identity is the bootstrap identity's configuration in the tests.
var identity = &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "bootstrap-token"}

// clients hands out api for both identities and records which asked.
type clients struct {
	api   kubernetes.Interface
	mu    sync.Mutex
	users []string // "bootstrap" or "node", in order
}

func (c *clients) newClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case cfg.BearerToken == identity.BearerToken:
		c.users = append(c.users, "bootstrap")
	case cfg.Transport != nil && cfg.BearerToken == "":
		c.users = append(c.users, "node")
	default:
		c.users = append(c.users, "unknown")
	}
	return c.api, nil
}

func (c *clients) asked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.users...)
}

func startWith(t *testing.T, cfg Config, api kubernetes.Interface) (*Manager, *clients, error) {
	t.Helper()
	c := &clients{api: api}
	m, err := start(t.Context(), cfg, node, identity, discard, deps{newClient: c.newClient, rotationCheck: 50 * time.Millisecond})
	if m != nil {
		t.Cleanup(m.Stop)
	}
	return m, c, err
}

func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Kubeconfig = "bootstrap.kubeconfig"
	cfg.CertDir = filepath.Join(t.TempDir(), "pki")
	cfg.ApprovalTimeout = 2 * time.Second
	return cfg
}

func TestStartRequestsTheNodeCertificate(t *testing.T) {
	ca := newTestCA(t)
	api := newFakeAPI(t, ca, approveAndIssue, time.Hour)
	cfg := testConfig(t)
	m, c, err := startWith(t, cfg, api)
	if err != nil {
		t.Fatal(err)
	}
	reqs := api.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d CSRs created, want 1", len(reqs))
	}
	req := reqs[0]
	if req.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("signer %q", req.Spec.SignerName)
	}
	// What the csrapproving controller recognizes for an ECDSA key.
	if diff := cmp.Diff([]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, req.Spec.Usages); diff != "" {
		t.Errorf("usages (-want +got):\n%s", diff)
	}
	if req.Spec.ExpirationSeconds == nil || *req.Spec.ExpirationSeconds != int32(cfg.CertificateLifetime/time.Second) {
		t.Errorf("expirationSeconds %v, want %d", req.Spec.ExpirationSeconds, int(cfg.CertificateLifetime/time.Second))
	}
	if !strings.HasPrefix(req.Name, "node-csr-") {
		t.Errorf("CSR name %q", req.Name)
	}
	if diff := cmp.Diff([]string{"bootstrap"}, c.asked()); diff != "" {
		t.Errorf("clients (-want +got):\n%s", diff)
	}
	cur := m.certs.Current()
	if cur == nil {
		t.Fatal("no current certificate")
	}
	if diff := cmp.Diff(pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}.String(), cur.Leaf.Subject.String()); diff != "" {
		t.Errorf("subject (-want +got):\n%s", diff)
	}
	if !m.NotAfter().Equal(cur.Leaf.NotAfter) {
		t.Errorf("NotAfter %v, want %v", m.NotAfter(), cur.Leaf.NotAfter)
	}
	if err := m.Check(t.Context()); err != nil {
		t.Errorf("Check: %v", err)
	}
	// The key and the certificate stay in certDir, readable by kip alone;
	// the pending key is gone.
	entries, err := os.ReadDir(cfg.CertDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := os.Stat(filepath.Join(cfg.CertDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %o, want 600", e.Name(), perm)
		}
		if e.Name() == pendingKeyFile {
			t.Errorf("%s left after the certificate was issued", e.Name())
		}
	}
	if _, err := os.Stat(CurrentFile(cfg.CertDir)); err != nil {
		t.Errorf("the current certificate: %v", err)
	}
	rc := m.RESTConfig()
	if rc.Transport == nil || len(rc.CertData) > 0 || len(rc.KeyData) > 0 || rc.BearerToken != "" {
		t.Errorf("RESTConfig has transport %v, cert data %d bytes, key data %d bytes, token %q; want the rotating transport alone",
			rc.Transport != nil, len(rc.CertData), len(rc.KeyData), rc.BearerToken)
	}
}

func TestStartReusesAValidCertificate(t *testing.T) {
	ca := newTestCA(t)
	tests := []struct {
		name    string
		subject pkix.Name
		life    time.Duration
		request bool
	}{
		{name: "valid", subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, life: time.Hour},
		{name: "expired", subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, life: -time.Minute, request: true},
		{name: "another node", subject: pkix.Name{CommonName: "system:node:other", Organization: []string{"system:nodes"}}, life: time.Hour, request: true},
		{name: "not a node", subject: pkix.Name{CommonName: "system:node:" + node}, life: time.Hour, request: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
				t.Fatal(err)
			}
			store, err := NewStore(cfg.CertDir)
			if err != nil {
				t.Fatal(err)
			}
			certPEM, keyPEM, _ := ca.keyPair(t, tt.subject, tt.life)
			seeded, err := store.Update(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			api := newFakeAPI(t, ca, approveAndIssue, time.Hour)
			m, _, err := startWith(t, cfg, api)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(api.requests()); got != map[bool]int{false: 0, true: 1}[tt.request] {
				t.Errorf("%d CSRs created; want a request: %v", got, tt.request)
			}
			reused := m.certs.Current().Leaf.SerialNumber.Cmp(seeded.Leaf.SerialNumber) == 0
			if reused == tt.request {
				t.Errorf("certificate reused: %v; want %v", reused, !tt.request)
			}
		})
	}
}

func TestStartExplainsACertificateNotIssued(t *testing.T) {
	tests := []struct {
		how  approver
		want []string
	}{
		{how: ignore, want: []string{"not approved within 2s", "system:serviceaccount:kip-system:kip",
			"ClusterRole system:certificates.k8s.io:certificatesigningrequests:nodeclient", RBACFile, "kubectl certificate approve node-csr-"}},
		{how: deny, want: []string{"was denied (Nope: denied by a test)"}},
		{how: approveOnly, want: []string{"approved but not issued within 2s", "--cluster-signing-cert-file"}},
		{how: forbid, want: []string{"may not create CertificateSigningRequests", "ClusterRole system:node-bootstrapper", RBACFile}},
	}
	for _, tt := range tests {
		t.Run(strings.Fields(tt.want[0])[0], func(t *testing.T) {
			cfg := testConfig(t)
			_, _, err := startWith(t, cfg, newFakeAPI(t, newTestCA(t), tt.how, time.Hour))
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// The pending key stays for the next attempt, which asks with it.
			if tt.how != forbid {
				if _, err := os.Stat(filepath.Join(cfg.CertDir, pendingKeyFile)); err != nil {
					t.Errorf("pending key: %v", err)
				}
			}
		})
	}
}

func TestStartAsksAgainWithTheSameKey(t *testing.T) {
	cfg := testConfig(t)
	ca := newTestCA(t)
	first := newFakeAPI(t, ca, ignore, time.Hour)
	if _, _, err := startWith(t, cfg, first); err == nil {
		t.Fatal("Start succeeded without approval")
	}
	second := newFakeAPI(t, ca, approveAndIssue, time.Hour)
	if _, _, err := startWith(t, cfg, second); err != nil {
		t.Fatal(err)
	}
	if a, b := first.requests()[0].Name, second.requests()[0].Name; a != b {
		t.Errorf("second request %s, want the first's name %s (same key, same request)", b, a)
	}
}

// TestRenewal runs client-go's certificate manager against a signer that
// issues certificates living 4 s: it renews before expiry, as the node
// itself, and the transport takes the new certificate.
func TestRenewal(t *testing.T) {
	ca := newTestCA(t)
	api := newFakeAPI(t, ca, approveAndIssue, 4*time.Second)
	m, c, err := startWith(t, testConfig(t), api)
	if err != nil {
		t.Fatal(err)
	}
	first := m.certs.Current().Leaf
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		if cur := m.certs.Current(); cur != nil && cur.Leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
			if !cur.Leaf.NotAfter.After(first.NotAfter) {
				t.Errorf("renewed certificate expires %v, not after the first's %v", cur.Leaf.NotAfter, first.NotAfter)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no renewal before %v; clients asked: %v", first.NotAfter, c.asked())
		case <-time.After(50 * time.Millisecond):
		}
	}
	asked := c.asked()
	if len(asked) < 2 || asked[0] != "bootstrap" || asked[1] != "node" {
		t.Errorf("clients asked %v; want the bootstrap identity first, then the node itself", asked)
	}
	if len(api.requests()) < 2 {
		t.Errorf("%d CSRs, want a renewal's", len(api.requests()))
	}
}
