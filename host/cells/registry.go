package cells

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/pluginapi"
)

// registryHost is the registry part of an image reference, or "" for an
// image of the default registry (Docker Hub).
func registryHost(image string) string {
	host, rest, ok := strings.Cut(image, "/")
	if !ok || rest == "" || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return ""
	}
	return host
}

// registryAuthenticator is the part of the plugin registryCreds asks.
type registryAuthenticator interface {
	RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error)
}

// registryCreds are the credentials the cloud plugin gives for its own
// registry (ECR, Artifact Registry, ACR), cached per registry host, for
// the images a pod's imagePullSecrets do not cover.
type registryCreds struct {
	plugin  registryAuthenticator
	catalog *catalogCache // says whether the plugin offers registry-auth
	now     func() time.Time
	log     *slog.Logger

	mu     sync.Mutex
	byHost map[string]cachedCred
}

// cachedCred is a registry's credentials until renewAt; nil cred means
// the plugin said the registry is not the cloud's.
type cachedCred struct {
	cred    *cellapi.RegistryCredential
	renewAt time.Time
}

// add adds, for every image of the pod whose registry the pod's
// imagePullSecrets do not cover, the credentials the cloud plugin gives
// for its own registry, when the plugin offers them. A registry the plugin
// does not know is left alone; an error is logged and the pull then fails
// with the registry's own message.
func (r *registryCreds) add(ctx context.Context, pod *corev1.Pod, have []cellapi.RegistryCredential) []cellapi.RegistryCredential {
	if !r.catalog.hasCapability(ctx, pluginapi.CapabilityRegistryAuth) {
		return have
	}
	covered := map[string]bool{}
	for _, c := range have {
		covered[c.Server] = true
	}
	for _, ctr := range allContainers(pod) {
		host := registryHost(ctr.Image)
		if host == "" || covered[host] {
			continue
		}
		covered[host] = true
		cred, err := r.auth(ctx, ctr.Image, host)
		if err != nil {
			if !pluginapi.IsNotFound(err) {
				r.log.Warn("getting the cloud's registry credentials", "image", ctr.Image, "error", err)
			}
			continue
		}
		have = append(have, *cred)
	}
	return have
}

// auth asks the plugin for credentials, reusing them per registry until
// five minutes before they expire.
func (r *registryCreds) auth(ctx context.Context, image, host string) (*cellapi.RegistryCredential, error) {
	now := r.now()
	r.mu.Lock()
	if c, ok := r.byHost[host]; ok && now.Before(c.renewAt) {
		r.mu.Unlock()
		if c.cred == nil {
			return nil, pluginapi.NewNotFound("registry %s is not the cloud's", host)
		}
		return c.cred, nil
	}
	r.mu.Unlock()
	resp, err := r.plugin.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image})
	if pluginapi.IsNotFound(err) {
		// Not the cloud's registry: ask again in an hour, not every Apply.
		r.mu.Lock()
		r.byHost[host] = cachedCred{renewAt: now.Add(time.Hour)}
		r.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	cred := &cellapi.RegistryCredential{Server: cmpOr(resp.Server, host), Username: resp.Username, Password: resp.Password}
	renew := now.Add(time.Hour)
	if !resp.ExpiresAt.IsZero() {
		renew = resp.ExpiresAt.Add(-5 * time.Minute)
	}
	r.mu.Lock()
	r.byHost[host] = cachedCred{cred: cred, renewAt: renew}
	r.mu.Unlock()
	return cred, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
