package clusterip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	cellapi "github.com/kipcell/kip/cell/api"
)

// ReasonSCTPNotSupported is the warning event on a Service with an SCTP
// port, which cells do not program.
const ReasonSCTPNotSupported = "SCTPNotSupported"

// maxTombstones is how many removed Services the table remembers for
// deltas before it forgets them all (cells behind then get the whole
// table).
const maxTombstones = 4096

// Config is what a Table needs beyond its informers.
type Config struct {
	// NodeName is the virtual node's: the node of every cell, for
	// internalTrafficPolicy Local.
	NodeName string
	// Recorder posts the SCTP warning on Services; nil posts nothing.
	Recorder record.EventRecorder
	Log      *slog.Logger
}

// Table is the node's table of ClusterIP Services as cells program them,
// kept from the Service and EndpointSlice informers (see the package
// comment).
type Table struct {
	id       string
	cfg      Config
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	ready    chan struct{} // closed by Run once the informers' first lists are in

	mu      sync.Mutex
	rev     uint64
	floor   uint64 // deltas from a revision below it cannot be told: the whole table is sent
	entries map[string]entry
	dead    int                // tombstones among entries
	changed chan struct{}      // closed at the next revision
	warned  map[types.UID]bool // Services whose SCTP ports were reported
}

// entry is one Service's part of the table at revision rev; svc is nil
// for a Service removed (a tombstone, kept for deltas).
type entry struct {
	svc *cellapi.Service
	rev uint64
}

// New returns a Table fed by the informers' events; the caller starts
// their factory, and Run waits for them.
func New(cfg Config, services coreinformers.ServiceInformer, slices discoveryinformers.EndpointSliceInformer) (*Table, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	t := &Table{
		id: hex.EncodeToString(id), cfg: cfg,
		services: services.Lister(), slices: slices.Lister(), ready: make(chan struct{}),
		entries: map[string]entry{}, changed: make(chan struct{}), warned: map[types.UID]bool{},
	}
	svcReg, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.serviceChanged(obj) },
		UpdateFunc: func(_, obj any) { t.serviceChanged(obj) },
		DeleteFunc: func(obj any) { t.serviceDeleted(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching Services: %w", err)
	}
	sliceReg, err := slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { t.sliceChanged(obj) },
		UpdateFunc: func(old, obj any) {
			t.sliceChanged(old) // the slice may have moved to another Service
			t.sliceChanged(obj)
		},
		DeleteFunc: func(obj any) { t.sliceChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching EndpointSlices: %w", err)
	}
	t.synced = []cache.InformerSynced{svcReg.HasSynced, sliceReg.HasSynced}
	return t, nil
}

// ID is the table's ID, new with every Table.
func (t *Table) ID() string { return t.id }

// Run marks the table ready once the informers' first lists have reached
// it, then returns; cells' Sync waits for that. It returns early when ctx
// ends.
func (t *Table) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), t.synced...) {
		return fmt.Errorf("waiting for the Services and EndpointSlices caches: %w", ctx.Err())
	}
	t.mu.Lock()
	n := len(t.entries)
	rev := t.rev
	t.mu.Unlock()
	t.cfg.Log.InfoContext(ctx, "ClusterIP services table ready", "services", n, "revision", rev, "table", t.id)
	close(t.ready)
	return nil
}

// Ready is closed once the table holds the informers' first lists.
func (t *Table) Ready() <-chan struct{} { return t.ready }

// Revision is the current revision and a channel closed at the next.
func (t *Table) Revision() (uint64, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rev, t.changed
}

// Request is the ApplyServices update that takes a cell from revision
// have of this table to the current one: the whole table when full is
// set, when have is zero, or when have is older than the tombstones
// remembered; else the delta.
func (t *Table) Request(have uint64, full bool) *cellapi.ServicesUpdate {
	t.mu.Lock()
	defer t.mu.Unlock()
	req := &cellapi.ServicesUpdate{Table: t.id, Revision: t.rev}
	if full || have == 0 || have < t.floor {
		for _, k := range slices.Sorted(maps.Keys(t.entries)) {
			if e := t.entries[k]; e.svc != nil {
				req.Services = append(req.Services, *e.svc)
			}
		}
		return req
	}
	req.BaseRevision = have
	for _, k := range slices.Sorted(maps.Keys(t.entries)) {
		switch e := t.entries[k]; {
		case e.rev <= have:
		case e.svc == nil:
			req.Removed = append(req.Removed, k)
		default:
			req.Services = append(req.Services, *e.svc)
		}
	}
	return req
}

func (t *Table) serviceChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok {
		t.update(svc.Namespace, svc.Name)
	}
}

func (t *Table) serviceDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok {
		t.mu.Lock()
		delete(t.warned, svc.UID)
		t.mu.Unlock()
		t.update(svc.Namespace, svc.Name)
	}
}

func (t *Table) sliceChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			t.update(s.Namespace, name)
		}
	}
}

// update computes the Service's entry again from the caches and, if it
// changed, makes a new revision.
func (t *Table) update(namespace, name string) {
	key := namespace + "/" + name
	var next *cellapi.Service
	svc, err := t.services.Services(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.cfg.Log.Warn("reading a Service from the cache", "service", key, "error", err)
		return
	default:
		eps, err := t.slices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
		if err != nil {
			t.cfg.Log.Warn("reading a Service's EndpointSlices from the cache", "service", key, "error", err)
			return
		}
		var sctp []string
		next, sctp = entryOf(svc, eps, t.cfg.NodeName)
		t.warnSCTP(svc, sctp)
	}
	t.set(key, next)
}

// set makes svc the entry of key at a new revision, unless it is what
// the table has.
func (t *Table) set(key string, svc *cellapi.Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.entries[key]
	if (svc == nil && (!had || old.svc == nil)) || (svc != nil && old.svc != nil && svc.Equal(old.svc)) {
		return
	}
	t.rev++
	switch {
	case svc != nil && had && old.svc == nil:
		t.dead--
	case svc == nil:
		t.dead++
	}
	t.entries[key] = entry{svc: svc, rev: t.rev}
	if t.dead > maxTombstones {
		for k, e := range t.entries {
			if e.svc == nil {
				delete(t.entries, k)
			}
		}
		t.dead, t.floor = 0, t.rev
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// warnSCTP posts one warning event on a Service whose SCTP ports cells
// leave out, and forgets it once it has none.
func (t *Table) warnSCTP(svc *corev1.Service, sctp []string) {
	t.mu.Lock()
	warned := t.warned[svc.UID]
	if len(sctp) == 0 {
		delete(t.warned, svc.UID)
	} else {
		t.warned[svc.UID] = true
	}
	t.mu.Unlock()
	if len(sctp) == 0 || warned || t.cfg.Recorder == nil {
		return
	}
	t.cfg.Recorder.Eventf(svc, corev1.EventTypeWarning, ReasonSCTPNotSupported,
		"kip's cells do not program SCTP: port %s of this Service is not reachable from pods on node %s",
		strings.Join(sctp, ", "), t.cfg.NodeName)
}
