package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/pem"
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

// currentPair is a certificate manager's Current that the test sets.
type currentPair struct {
	p atomic.Pointer[tls.Certificate]
}

func (c *currentPair) Current() *tls.Certificate { return c.p.Load() }

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
			watchRotation(ctx, &cur, d, 20*time.Millisecond, discard)
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
