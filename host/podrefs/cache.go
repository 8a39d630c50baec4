package podrefs

import (
	"context"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

// Cache keeps the ConfigMaps and Secrets a Source read, for the pods'
// refreshes: the kubelet's Cache strategy for configMap and secret volumes
// (pkg/kubelet/util/manager's cache-based manager). A pod's first
// resolution reads through it (Fresh: the objects as the API has them
// now, as the kubelet reads again the objects a newly registered pod
// references), and so do the refreshes of a cell whose pod changed; the
// unchanged pods' periodic refreshes (Cached) take what any resolution
// read within the TTL. So N running pods that mount the same object (every
// pod's projected kube-root-ca.crt of its namespace) read it about once
// a TTL instead of N times a refresh interval; a change of the object
// reaches the pods within the TTL plus the refresh interval, as the
// kubelet documents for its own cache. Service account tokens are never
// cached here (Tokens keeps each pod's own). Only successful reads are
// kept; an error is read again the next time.
type Cache struct {
	src Source
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	objects   map[cacheKey]cached
	lastSweep time.Time
}

type cacheKey struct{ kind, namespace, name string }

type cached struct {
	obj any // *corev1.ConfigMap or *corev1.Secret; never modified
	at  time.Time
}

// NewCache returns a Cache over src whose entries serve Cached for ttl
// after their read; now is the clock (time.Now when nil).
func NewCache(src Source, ttl time.Duration, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{src: src, ttl: ttl, now: now, objects: map[cacheKey]cached{}}
}

// Fresh reads every object from the Source and keeps what it read.
func (c *Cache) Fresh() Source { return cacheSource{c: c, fresh: true} }

// Cached answers from an entry younger than the TTL, else reads as Fresh.
func (c *Cache) Cached() Source { return cacheSource{c: c} }

type cacheSource struct {
	c     *Cache
	fresh bool
}

func (s cacheSource) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return get(ctx, s, cacheKey{"ConfigMap", namespace, name}, s.c.src.ConfigMap)
}

func (s cacheSource) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return get(ctx, s, cacheKey{"Secret", namespace, name}, s.c.src.Secret)
}

func (s cacheSource) ServiceAccountToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return s.c.src.ServiceAccountToken(ctx, namespace, serviceAccount, req)
}

// get is key's object: kept, when s is not fresh and the entry is within
// the TTL, else read with read and kept. Callers only read the object
// (Resolve copies what it takes).
func get[T any](ctx context.Context, s cacheSource, key cacheKey, read func(ctx context.Context, namespace, name string) (*T, error)) (*T, error) {
	c := s.c
	if !s.fresh {
		c.mu.Lock()
		e, ok := c.objects[key]
		now := c.now()
		c.mu.Unlock()
		if ok && now.Sub(e.at) < c.ttl {
			return e.obj.(*T), nil
		}
	}
	at := c.now() // the entry is as old as the read's start
	obj, err := read(ctx, key.namespace, key.name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.objects[key]; !ok || !e.at.After(at) { // never replace a newer read
		c.objects[key] = cached{obj: obj, at: at}
	}
	c.sweep()
	return obj, nil
}

// sweep drops the entries past their TTL, at most once a TTL, so that the
// objects no pod reads any longer are not kept; c.mu is held.
func (c *Cache) sweep() {
	now := c.now()
	if now.Sub(c.lastSweep) < c.ttl {
		return
	}
	c.lastSweep = now
	for k, e := range c.objects {
		if now.Sub(e.at) >= c.ttl {
			delete(c.objects, k)
		}
	}
}

// Len is the number of objects kept (tests, metrics).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.objects)
}
