package cells

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/cellv1"
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

// cloudCredentials adds, for every image of the pod whose registry the
// pod's imagePullSecrets do not cover, the credentials the cloud plugin
// gives for its own registry (ECR, Artifact Registry, ACR), when the plugin
// offers them. A registry the plugin does not know is left alone; an error
// is logged and the pull then fails with the registry's own message.
func (m *Manager) cloudCredentials(ctx context.Context, pod *corev1.Pod, have []*cellv1.RegistryCredential) []*cellv1.RegistryCredential {
	if !m.hasCapability(ctx, pluginapi.CapabilityRegistryAuth) {
		return have
	}
	covered := map[string]bool{}
	for _, c := range have {
		covered[c.GetServer()] = true
	}
	for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		host := registryHost(ctr.Image)
		if host == "" || covered[host] {
			continue
		}
		covered[host] = true
		cred, err := m.registryAuth(ctx, ctr.Image, host)
		if err != nil {
			if !pluginapi.IsNotFound(err) {
				m.log.Warn("getting the cloud's registry credentials", "image", ctr.Image, "error", err)
			}
			continue
		}
		have = append(have, cred)
	}
	return have
}

// registryAuth asks the plugin for credentials, reusing them per registry
// until five minutes before they expire.
func (m *Manager) registryAuth(ctx context.Context, image, host string) (*cellv1.RegistryCredential, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	if c, ok := m.registryCreds[host]; ok && now.Before(c.renewAt) {
		m.mu.Unlock()
		if c.cred == nil {
			return nil, pluginapi.NewNotFound("registry %s is not the cloud's", host)
		}
		return c.cred, nil
	}
	m.mu.Unlock()
	resp, err := m.plugin.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image})
	if pluginapi.IsNotFound(err) {
		// Not the cloud's registry: ask again in an hour, not every Apply.
		m.mu.Lock()
		m.registryCreds[host] = cachedCred{renewAt: now.Add(time.Hour)}
		m.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	cred := &cellv1.RegistryCredential{Server: cmpOr(resp.Server, host), Username: resp.Username, Password: resp.Password}
	renew := now.Add(time.Hour)
	if !resp.ExpiresAt.IsZero() {
		renew = resp.ExpiresAt.Add(-5 * time.Minute)
	}
	m.mu.Lock()
	m.registryCreds[host] = cachedCred{cred: cred, renewAt: renew}
	m.mu.Unlock()
	return cred, nil
}

// cachedCred is a registry's credentials until renewAt; nil cred means
// the plugin said the registry is not the cloud's.
type cachedCred struct {
	cred    *cellv1.RegistryCredential
	renewAt time.Time
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hasCapability reports whether the plugin offers c. The plugin's
// capabilities are read with its catalog (catalog) and refreshed with it,
// so that an Apply costs no GetInfo call; a plugin swapped on SIGHUP is
// seen at once (RefreshCatalog).
func (m *Manager) hasCapability(ctx context.Context, c pluginapi.Capability) bool {
	if _, err := m.catalog(ctx); err != nil {
		return false
	}
	m.catMu.Lock()
	defer m.catMu.Unlock()
	return slices.Contains(m.caps, c)
}
