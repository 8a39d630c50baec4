package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kipcell/kip/test/registry"
)

const (
	// Repo is the repository prefix of the pushed images.
	Repo = "kip-e2e"
	// Tag is the tag of the pushed images.
	Tag = "v1"
)

// Image is one pushed image.
type Image struct {
	// Name is the short name: busybox, hello, crash, logger, nfsserver or
	// coredns.
	Name string
	// Ref is registry.Host()/kip-e2e/<name>:<tag>, the tag v1 for the
	// images of PushAll.
	Ref string
	// Digest is the manifest digest, "sha256:…".
	Digest string
}

// DigestRef returns the reference by digest, registry.Host()/kip-e2e/<name>@sha256:….
func (i Image) DigestRef() string {
	repo := i.Ref
	if colon := strings.LastIndexByte(repo, ':'); colon > strings.LastIndexByte(repo, '/') {
		repo = repo[:colon] // the tag, not a registry's port
	}
	return repo + "@" + i.Digest
}

// Set is the images PushAll pushed.
type Set struct {
	Busybox, Hello, Crash, Logger, NFSServer Image
}

// All returns the images of s in a fixed order: busybox, hello, crash,
// logger, nfsserver.
func (s Set) All() []Image {
	return []Image{s.Busybox, s.Hello, s.Crash, s.Logger, s.NFSServer}
}

var built struct {
	once sync.Once
	imgs map[string]v1.Image
	err  error
}

// Build returns the images PushAll pushes, by name (busybox and each of
// Programs). They are built once per process; a failure is returned to
// every caller.
func Build() (map[string]v1.Image, error) {
	built.once.Do(func() {
		built.imgs, built.err = buildAll()
	})
	return built.imgs, built.err
}

func buildAll() (map[string]v1.Image, error) {
	bb, err := Busybox()
	if err != nil {
		return nil, err
	}
	imgs := map[string]v1.Image{"busybox": bb}
	errs := make([]error, len(Programs))
	got := make([]v1.Image, len(Programs))
	dir := moduleDir()
	var wg sync.WaitGroup
	for i, p := range Programs {
		wg.Go(func() {
			got[i], errs[i] = GoProgram(ProgramsPkg+"/"+p, GoOptions{Dir: dir, Base: bb})
		})
	}
	wg.Wait()
	for i, p := range Programs {
		if errs[i] != nil {
			return nil, fmt.Errorf("building test image %s: %w", p, errs[i])
		}
		imgs[p] = got[i]
	}
	return imgs, nil
}

// moduleDir returns the directory of this source file when it exists (a
// build without -trimpath), so the programs build whatever the current
// directory; otherwise the current directory.
func moduleDir() string {
	_, src, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(src) {
		if _, err := os.Stat(src); err == nil {
			return filepath.Dir(src)
		}
	}
	return ""
}

// PushAll builds the test images (once per process) and pushes them to reg
// as kip-e2e/<name>:v1 over plain HTTP, with reg's credentials when it
// requires them. It pushes through reg.LocalHost and reports references
// under reg.Host. Pushing the same images again is cheap: the registry
// already has the blobs.
func PushAll(ctx context.Context, reg *registry.Registry) (Set, error) {
	imgs, err := Build()
	if err != nil {
		return Set{}, err
	}
	var s Set
	for _, p := range []struct {
		name string
		dst  *Image
	}{
		{"busybox", &s.Busybox},
		{"hello", &s.Hello},
		{"crash", &s.Crash},
		{"logger", &s.Logger},
		{"nfsserver", &s.NFSServer},
	} {
		if *p.dst, err = push(ctx, reg, p.name, Tag, imgs[p.name]); err != nil {
			return Set{}, err
		}
	}
	return s, nil
}

// push pushes img to reg as kip-e2e/<n>:<tag> over plain HTTP, with reg's
// credentials when it requires them, through reg.LocalHost, and reports it
// under reg.Host.
func push(ctx context.Context, reg *registry.Registry, n, tag string, img v1.Image) (Image, error) {
	auth := authn.Anonymous
	if reg.AuthRequired() {
		u, p := reg.Credentials()
		auth = &authn.Basic{Username: u, Password: p}
	}
	repo := Repo + "/" + n
	ref, err := name.ParseReference(reg.LocalHost()+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return Image{}, err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(auth)); err != nil {
		return Image{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Image{}, fmt.Errorf("digest of %s: %w", n, err)
	}
	return Image{Name: n, Ref: reg.Ref(repo, tag), Digest: d.String()}, nil
}
