package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"

	"github.com/kipcell/kip/pluginapi"
)

// ecrHost matches an ECR registry host:
// <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn].
var ecrHost = regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr(-fips)?\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

// tokenMargin is how long before its expiry a cached ECR token is renewed
// (tokens last 12 hours; a pull must not start with one about to expire).
const tokenMargin = 30 * time.Minute

// RegistryAuth returns pull credentials for an image in ECR, from
// GetAuthorizationToken in the registry's region (cached until shortly
// before they expire). The token is valid for every registry the plugin's
// credentials may read, so images of another account work when its
// repository policy allows. An image in any other registry is NotFound.
func (p *provider) RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	host := registryHost(req.Image)
	m := ecrHost.FindStringSubmatch(host)
	if m == nil {
		return nil, pluginapi.NewNotFound("image %q is not in an ECR registry", req.Image)
	}
	resp, err := cfg.registry.auth(ctx, m[2], host)
	if err != nil {
		return nil, fmt.Errorf("getting ECR credentials for %s: %w", host, err)
	}
	return resp, nil
}

// registryHost returns the registry host of an image reference, or "" for
// Docker Hub's short forms ("nginx", "library/nginx").
func registryHost(image string) string {
	host, _, ok := strings.Cut(image, "/")
	if !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return ""
	}
	return host
}

// registry holds one ECR client per region and the tokens they gave.
type registry struct {
	client func(region string) ecrAPI
	now    func() time.Time

	mu      sync.Mutex
	clients map[string]ecrAPI
	tokens  map[string]*pluginapi.RegistryAuthResponse // by host
}

func newRegistry(client func(region string) ecrAPI, now func() time.Time) *registry {
	return &registry{client: client, now: now, clients: map[string]ecrAPI{}, tokens: map[string]*pluginapi.RegistryAuthResponse{}}
}

func (r *registry) auth(ctx context.Context, region, host string) (*pluginapi.RegistryAuthResponse, error) {
	r.mu.Lock()
	if t, ok := r.tokens[host]; ok && r.now().Before(t.ExpiresAt.Add(-tokenMargin)) {
		r.mu.Unlock()
		c := *t
		return &c, nil
	}
	client, ok := r.clients[region]
	if !ok {
		client = r.client(region)
		r.clients[region] = client
	}
	r.mu.Unlock()

	out, err := client.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return nil, mapError("GetAuthorizationToken", err)
	}
	if len(out.AuthorizationData) == 0 {
		return nil, fmt.Errorf("GetAuthorizationToken answered no authorization data")
	}
	data := out.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(data.AuthorizationToken))
	if err != nil {
		return nil, fmt.Errorf("GetAuthorizationToken answered a token that is not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, fmt.Errorf("GetAuthorizationToken answered a token that is not user:password")
	}
	resp := &pluginapi.RegistryAuthResponse{Server: host, Username: user, Password: pass, ExpiresAt: aws.ToTime(data.ExpiresAt)}
	r.mu.Lock()
	r.tokens[host] = resp
	r.mu.Unlock()
	c := *resp
	return &c, nil
}
