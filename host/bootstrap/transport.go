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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// rotationCheck is how often the transport looks for a new certificate,
// as the kubelet's does.
const rotationCheck = 10 * time.Second

// currentCert gives the certificate to present now (a client-go
// certificate.Manager); nil when there is none that is valid.
type currentCert interface {
	Current() *tls.Certificate
}

// rotatingConfig returns a copy of base, which must carry no credentials
// of its own and no transport or dialer, whose transport presents
// certs.Current() on every TLS handshake (and nothing when it is nil), and
// the dialer of every connection that transport opens, for
// watchRotation to close. It is the kubelet's UpdateTransport
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

// watchRotation closes every connection d opened each time certs.Current()
// changes to another certificate, so that the next requests handshake
// again with it; it looks every period until ctx ends.
func watchRotation(ctx context.Context, certs currentCert, d *connrotation.Dialer, period time.Duration, log *slog.Logger) {
	last := certs.Current()
	wait.UntilWithContext(ctx, func(context.Context) {
		cur := certs.Current()
		if cur == nil || cur == last {
			return
		}
		last = cur
		log.Info("node client certificate renewed: closing the connections that present the old one",
			"not_after", cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
		d.CloseAll()
	}, period)
}
