package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// currentPair is a certificate manager's Current and ServerHealthy that
// the test sets.
type currentPair struct {
	p         atomic.Pointer[tls.Certificate]
	unhealthy atomic.Bool
}

func (c *currentPair) Current() *tls.Certificate { return c.p.Load() }
func (c *currentPair) ServerHealthy() bool       { return !c.unhealthy.Load() }

// mtlsServer answers each request with the serial number of the client
// certificate presented on its connection, and counts closed connections.
type mtlsServer struct {
	*httptest.Server
	mu     sync.Mutex
	closed int
}

func newMTLSServer(t *testing.T, ca *testCA) *mtlsServer {
	s := &mtlsServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].SerialNumber.String())
	}))
	s.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool(), MinVersion: tls.VersionTLS12}
	s.EnableHTTP2 = true
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			s.mu.Lock()
			s.closed++
			s.mu.Unlock()
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *mtlsServer) closedConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// serial asks s through client which certificate the connection presents.
func serial(t *testing.T, client *http.Client, s *mtlsServer) string {
	t.Helper()
	resp, err := client.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestRotatingTransportPresentsTheCurrentCertificate(t *testing.T) {
	ca := newTestCA(t)
	servers := []*mtlsServer{newMTLSServer(t, ca), newMTLSServer(t, ca)}
	subject := pkix.Name{CommonName: "system:node:" + node, Organization: []string{NodesGroup}}
	_, _, a := ca.keyPair(t, subject, time.Hour)
	_, _, b := ca.keyPair(t, subject, time.Hour)
	var cur currentPair
	cur.p.Store(a)

	clients := make([]*http.Client, len(servers))
	var dialers []func()
	for i, s := range servers {
		serverCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
		cfg, d, err := rotatingConfig(&rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: serverCA}}, &cur)
		if err != nil {
			t.Fatal(err)
		}
		if clients[i], err = rest.HTTPClientFor(cfg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		dialers = append(dialers, func() { cancel(); <-done })
		go func() {
			defer close(done)
			watchRotation(ctx, newRotation(&cur, d.CloseAll, time.Hour, time.Now(), discard), 20*time.Millisecond, make(chan error, 1))
		}()
	}
	defer func() {
		for _, stop := range dialers {
			stop()
		}
	}()

	for i, s := range servers {
		if got := serial(t, clients[i], s); got != a.Leaf.SerialNumber.String() {
			t.Fatalf("server %d saw certificate %s, want the first, %s", i, got, a.Leaf.SerialNumber)
		}
	}
	cur.p.Store(b)
	// Once the watch has seen the new certificate, every connection that
	// presented the old one is closed and the next request handshakes
	// with the new one.
	for i, s := range servers {
		deadline := time.Now().Add(20 * time.Second)
		for s.closedConns() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("server %d: the connection presenting the old certificate was never closed", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := serial(t, clients[i], s); got != b.Leaf.SerialNumber.String() {
			t.Errorf("server %d saw certificate %s after the rotation, want the new one, %s", i, got, b.Leaf.SerialNumber)
		}
	}
}

func TestRotatingConfigRefusesATransport(t *testing.T) {
	if _, _, err := rotatingConfig(&rest.Config{Host: "https://x", Transport: http.DefaultTransport}, &currentPair{}); err == nil {
		t.Error("rotatingConfig accepted a configuration with a transport")
	}
}

// TestRotationCheck follows the certificate through a rotation's checks
// at given times (no clock runs): a new certificate closes the
// connections; none that is valid for exitAfter, or one past its
// NotAfter, is ErrExpired while the API server answers, and only logged
// while it does not.
func TestRotationCheck(t *testing.T) {
	ca := newTestCA(t)
	subject := pkix.Name{CommonName: "system:node:" + node, Organization: []string{NodesGroup}}
	_, _, a := ca.keyPair(t, subject, time.Hour)
	_, _, b := ca.keyPair(t, subject, 2*time.Hour)
	start := time.Now()
	type step struct {
		after     time.Duration // since start
		cert      *tls.Certificate
		unhealthy bool
		closed    int  // CloseAll calls so far
		expired   bool // check returns ErrExpired
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "unchanged", steps: []step{{after: time.Minute, cert: a}, {after: 50 * time.Minute, cert: a}}},
		{name: "renewed", steps: []step{{after: time.Minute, cert: a}, {after: 40 * time.Minute, cert: b, closed: 1}, {after: 41 * time.Minute, cert: b, closed: 1}}},
		{name: "expired, renewed within exitAfter", steps: []step{
			{after: 59 * time.Minute, cert: a},
			{after: 61 * time.Minute},
			{after: 63 * time.Minute, cert: b, closed: 1},
			{after: 70 * time.Minute, cert: b, closed: 1},
		}},
		{name: "expired, not renewed", steps: []step{
			{after: 59 * time.Minute, cert: a},
			{after: 61 * time.Minute},
			{after: 63 * time.Minute},
			{after: 64*time.Minute + time.Second, expired: true},
		}},
		{name: "expired, the server not answering", steps: []step{
			{after: 59 * time.Minute, cert: a},
			{after: 65 * time.Minute, unhealthy: true},
			{after: 90 * time.Minute, unhealthy: true},
			{after: 91 * time.Minute, expired: true},
		}},
		{name: "past NotAfter, still current", steps: []step{
			{after: 59 * time.Minute, cert: a},
			{after: 61 * time.Minute, cert: a, expired: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cur currentPair
			cur.p.Store(a)
			closed := 0
			r := newRotation(&cur, func() { closed++ }, exitAfter, start, discard)
			for _, s := range tt.steps {
				cur.p.Store(s.cert)
				cur.unhealthy.Store(s.unhealthy)
				err := r.check(start.Add(s.after))
				if got := errors.Is(err, ErrExpired); got != s.expired || (err != nil && !got) {
					t.Errorf("after %s: check = %v, want expired %v", s.after, err, s.expired)
				}
				if closed != s.closed {
					t.Errorf("after %s: %d CloseAll, want %d", s.after, closed, s.closed)
				}
			}
		})
	}
}
