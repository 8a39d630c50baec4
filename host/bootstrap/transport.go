package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// rotationCheck is how often the transport looks for a new certificate,
// as the kubelet's does.
const rotationCheck = 10 * time.Second

// exitAfter is how long kip goes on without a valid node certificate
// (it expired and its renewals failed) while the API server answers
// before the Manager gives up (Expired): the kubelet's 5 minutes
// (cmd/kubelet/app/server.go), in which the certificate manager still
// tries to get one with the bootstrap identity.
const exitAfter = 5 * time.Minute

// ErrExpired is the error Expired gives: the node's certificate expired
// and no renewal followed.
var ErrExpired = errors.New("the node's client certificate expired and was not renewed")

// currentCert gives the certificate to present now (a client-go
// certificate.Manager); nil when there is none that is valid. ServerHealthy
// says whether the API server answered its last request.
type currentCert interface {
	Current() *tls.Certificate
	ServerHealthy() bool
}

// rotatingConfig returns a copy of base, which must carry no credentials
// of its own and no transport or dialer, whose transport presents
// certs.Current() on every TLS handshake (and nothing when it is nil), and
// the dialer of every connection that transport opens, for a rotation to
// close. It is the kubelet's UpdateTransport
// (pkg/kubelet/certificate/transport.go).
func rotatingConfig(base *rest.Config, certs currentCert) (*rest.Config, *connrotation.Dialer, error) {
	cfg := rest.CopyConfig(base)
	if cfg.Transport != nil || cfg.Dial != nil {
		return nil, nil, errors.New("building the node's transport: the bootstrap configuration already has a transport or dialer")
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the node's TLS configuration: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert := certs.Current(); cert != nil {
			return cert, nil
		}
		return &tls.Certificate{}, nil
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport enforces the TLS settings now; rest.Config refuses a
	// transport beside TLS options of its own.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	return cfg, d, nil
}

// rotation watches the certificate a transport presents: it closes the
// transport's connections when the certificate changes, and gives up
// once there has been none that is valid for exitAfter while the API
// server answers. It is the kubelet's checkNewCertificateAndRotate
// (pkg/kubelet/certificate/transport.go), which exits the process where
// this returns an error.
type rotation struct {
	certs     currentCert
	closeAll  func()
	exitAfter time.Duration
	log       *slog.Logger

	last      *tls.Certificate // the certificate presented, as last seen
	lastValid time.Time        // when a valid certificate was last seen
}

func newRotation(certs currentCert, closeAll func(), exitAfter time.Duration, now time.Time, log *slog.Logger) *rotation {
	return &rotation{certs: certs, closeAll: closeAll, exitAfter: exitAfter, log: log, last: certs.Current(), lastValid: now}
}

// check looks at the certificate at now. It returns an error wrapping
// ErrExpired when the current certificate expired, or there has been
// none for exitAfter, and the API server answers (restarting helps then:
// a new process bootstraps again); while the server does not answer, it
// logs and goes on, as the kubelet does.
func (r *rotation) check(now time.Time) error {
	cur := r.certs.Current()
	var expired error
	switch {
	case cur == nil && now.After(r.lastValid.Add(r.exitAfter)):
		notAfter := "unknown"
		if r.last != nil && r.last.Leaf != nil {
			notAfter = r.last.Leaf.NotAfter.UTC().Format(time.RFC3339)
		}
		expired = fmt.Errorf("%w: no valid certificate since %s (the last expired %s)", ErrExpired, r.lastValid.UTC().Format(time.RFC3339), notAfter)
	case cur != nil && cur.Leaf != nil && now.After(cur.Leaf.NotAfter):
		expired = fmt.Errorf("%w: it expired %s", ErrExpired, cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
	case cur != nil:
		r.lastValid = now
	}
	if expired != nil {
		if r.certs.ServerHealthy() {
			return expired
		}
		r.log.Error("no valid node client certificate, but the API server does not answer: waiting for it (a restart would not bootstrap either)", "error", expired)
	}
	if cur == nil || cur == r.last {
		return nil
	}
	r.last = cur
	r.log.Info("node client certificate renewed: closing the connections that present the old one",
		"not_after", cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
	r.closeAll()
	return nil
}

// watchRotation runs r.check every period until ctx ends, or until it
// fails: then it sends the error to expired (which must have room) and
// returns.
func watchRotation(ctx context.Context, r *rotation, period time.Duration, expired chan<- error) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		if err := r.check(time.Now()); err != nil {
			expired <- err
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
