package images

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions configures Push.
type PushOptions struct {
	// Registry is where the images go: host[:port][/path]. Image <n> is
	// pushed as Registry/<n>:Tag.
	Registry string
	// Tag is every image's tag.
	Tag string
	// Insecure pushes over plain HTTP. A loopback registry (localhost,
	// 127.0.0.0/8, ::1) always is.
	Insecure bool
	// Keychain gives the registry's credentials; authn.DefaultKeychain
	// (~/.docker/config.json, $DOCKER_CONFIG) when nil.
	Keychain authn.Keychain
}

// Pushed is one image pushed.
type Pushed struct {
	Name string
	// Ref is Registry/<name>:Tag.
	Ref string
	// Digest is the index's digest, "sha256:…".
	Digest string
}

// DigestRef returns Ref@Digest, the reference that names exactly what was
// pushed.
func (p Pushed) DigestRef() string { return p.Ref + "@" + p.Digest }

// Push pushes each image's index, with its manifests, configs and layers,
// to opts.Registry. A blob the registry has is not sent again.
func Push(ctx context.Context, built []Built, opts PushOptions) ([]Pushed, error) {
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	var nameOpts []name.Option
	if opts.Insecure || isLoopback(opts.Registry) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	var out []Pushed
	for _, b := range built {
		s := strings.TrimSuffix(opts.Registry, "/") + "/" + b.Name + ":" + opts.Tag
		ref, err := name.NewTag(s, nameOpts...)
		if err != nil {
			return nil, fmt.Errorf("parsing the reference %s: %w", s, err)
		}
		if err := remote.WriteIndex(ref, b.Index, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		d, err := b.Index.Digest()
		if err != nil {
			return nil, fmt.Errorf("reading the digest of %s: %w", b.Name, err)
		}
		out = append(out, Pushed{Name: b.Name, Ref: s, Digest: d.String()})
	}
	return out, nil
}

// isLoopback reports whether registry (host[:port][/path]) is on a
// loopback address.
func isLoopback(registry string) bool {
	host, _, _ := strings.Cut(registry, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
