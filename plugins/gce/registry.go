package gce

import (
	"context"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// registryUser is the user name Artifact Registry and Container Registry
// take with an OAuth access token as the password
// (https://cloud.google.com/artifact-registry/docs/docker/authentication).
const registryUser = "oauth2accesstoken"

// RegistryAuth returns pull credentials for an image in Artifact Registry
// (<location>-docker.pkg.dev) or Container Registry (gcr.io and its
// regional hosts): the plugin's own credentials' OAuth access token, valid
// until the token expires (about an hour; the credentials cache and renew
// it). The token acts with kip's identity, so kip's service account needs
// read access to the repositories (artifactregistry.reader). An image in
// any other registry is NotFound.
func (p *provider) RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	host := registryHost(req.Image)
	if !googleRegistry(host) {
		return nil, pluginapi.NewNotFound("image %q is not in Artifact Registry or Container Registry", req.Image)
	}
	if cfg.creds == nil {
		return nil, pluginapi.NewInvalidConfig("withoutAuthentication", "the plugin has no Google credentials to give registry %s", host)
	}
	tok, err := cfg.creds.Token(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, pluginapi.NewTransient("getting an access token for %s: %v", host, err)
	}
	return &pluginapi.RegistryAuthResponse{Server: host, Username: registryUser, Password: tok.Value, ExpiresAt: tok.Expiry}, nil
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

// googleRegistry reports whether host is Artifact Registry's or Container
// Registry's.
func googleRegistry(host string) bool {
	return strings.HasSuffix(host, ".pkg.dev") || host == "gcr.io" || strings.HasSuffix(host, ".gcr.io")
}
