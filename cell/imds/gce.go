package imds

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Compute Engine's metadata server
// (https://cloud.google.com/compute/docs/metadata/overview): every request
// carries Metadata-Flavor: Google, and so does every answer.
const (
	// DefaultGCEEndpoint is Compute Engine's metadata server.
	DefaultGCEEndpoint = "http://metadata.google.internal"
	gceHost            = "metadata.google.internal"
	flavorHeader       = "Metadata-Flavor"
	flavorGoogle       = "Google"
	// identityPath is the identity token of the instance's default
	// service account.
	identityPath = "/computeMetadata/v1/instance/service-accounts/default/identity"
)

// GCEClient reads a Compute Engine instance's metadata server. It is safe
// for concurrent use.
type GCEClient struct {
	base string
	hc   *http.Client
}

// NewGCE returns a client of the metadata server at endpoint:
// http://host[:port] (Compute Engine: DefaultGCEEndpoint) or
// unix:///path/to/socket (the Compute Engine simulator's, per instance).
func NewGCE(endpoint string) (*GCEClient, error) {
	base, hc, err := dial(endpoint, gceHost)
	if err != nil {
		return nil, err
	}
	return &GCEClient{base: base, hc: hc}, nil
}

// IdentityToken reads the instance's identity token for audience in the
// full format: a JWT that Google signs (RS256) for the instance's default
// service account, whose claims name the instance (google.compute_engine:
// project, zone, instance name and ID). An instance without a service
// account has none: ErrNotFound.
func (c *GCEClient) IdentityToken(ctx context.Context, audience string) ([]byte, error) {
	q := url.Values{"audience": {audience}, "format": {"full"}}
	a, err := do(ctx, c.hc, http.MethodGet, c.base+identityPath+"?"+q.Encode(), map[string]string{flavorHeader: flavorGoogle})
	if err != nil {
		return nil, fmt.Errorf("reading the identity token from the metadata server: %w", err)
	}
	switch {
	case a.status == http.StatusNotFound:
		return nil, fmt.Errorf("reading the identity token from the metadata server (the instance has no service account?): %w", ErrNotFound)
	case a.status != http.StatusOK:
		return nil, &StatusError{Path: identityPath, Status: a.status}
	case a.header.Get(flavorHeader) != flavorGoogle:
		// Not the metadata server: something else answered its name.
		return nil, fmt.Errorf("reading the identity token: the answer of %s lacks %s: %s", c.base, flavorHeader, flavorGoogle)
	}
	return bytes.TrimSpace(a.body), nil
}
