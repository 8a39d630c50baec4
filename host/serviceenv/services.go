package serviceenv

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Change is one Service added, updated or deleted.
type Change struct {
	Namespace, Name string
	// Service is the Service as it now is; nil when it was deleted.
	Service *corev1.Service
}

// Informer watches every Service of the cluster once and serves them from
// its cache. Build it with New, run it with Run.
type Informer struct {
	log      *slog.Logger
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corev1listers.ServiceLister

	mu       sync.Mutex
	next     int
	handlers map[int]func(Change)
}

// New returns an Informer over the Services of factory (every namespace
// when the factory is not limited to one). Nothing is watched until Run,
// which starts factory, and with it every informer taken from it before:
// other components share the Services informer through the factory
// (factory.Core().V1().Services() is the same one). Build factory without
// resync: a Service changes only when the API server says so.
func New(factory informers.SharedInformerFactory, log *slog.Logger) *Informer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	svc := factory.Core().V1().Services()
	i := &Informer{log: log, factory: factory, informer: svc.Informer(), lister: svc.Lister(), handlers: map[int]func(Change){}}
	_, err := i.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { i.notify(obj, false) },
		UpdateFunc: func(_, obj any) { i.notify(obj, false) },
		DeleteFunc: func(obj any) { i.notify(obj, true) },
	})
	if err != nil {
		// Only an informer that has stopped refuses a handler.
		log.Error("adding the Services informer's handler", "error", err)
	}
	return i
}

// Run starts the factory and watches the Services until ctx ends.
func (i *Informer) Run(ctx context.Context) error {
	i.factory.Start(ctx.Done())
	<-ctx.Done()
	i.factory.Shutdown()
	return nil
}

// WaitForSync returns once the first list of Services is in the cache, or
// ctx's error if it ends first.
func (i *Informer) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), i.informer.HasSynced) {
		return fmt.Errorf("waiting for the Services cache: %w", context.Cause(ctx))
	}
	return nil
}

// HasSynced reports whether the first list of Services is in the cache.
func (i *Informer) HasSynced() bool { return i.informer.HasSynced() }

// Informer is the shared informer underneath, for what List, Get and
// OnChange do not offer (a watch error handler before Run, an indexer).
// Its handlers see the cache's own objects: never modify them.
func (i *Informer) Informer() cache.SharedIndexInformer { return i.informer }

// List returns the Services of namespace (every namespace when it is
// empty), sorted by namespace and name. The Services are the cache's own:
// never modify them.
func (i *Informer) List(namespace string) ([]*corev1.Service, error) {
	var (
		out []*corev1.Service
		err error
	)
	if namespace == "" {
		out, err = i.lister.List(labels.Everything())
	} else {
		out, err = i.lister.Services(namespace).List(labels.Everything())
	}
	if err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// Get returns one Service from the cache, or an error that
// apierrors.IsNotFound recognizes. Never modify the Service.
func (i *Informer) Get(namespace, name string) (*corev1.Service, error) {
	svc, err := i.lister.Services(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Service %s/%s: %w", namespace, name, err)
	}
	return svc, err
}

// OnChange calls handler with every later change of a Service, one at a
// time on the informer's goroutine, and returns the function that stops
// the calls. handler must return quickly and must not modify the Service.
func (i *Informer) OnChange(handler func(Change)) (stop func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	id := i.next
	i.next++
	i.handlers[id] = handler
	return func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		delete(i.handlers, id)
	}
}

func (i *Informer) notify(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		i.log.Warn("the Services informer delivered something else", "type", fmt.Sprintf("%T", obj))
		return
	}
	c := Change{Namespace: svc.Namespace, Name: svc.Name, Service: svc}
	if deleted {
		c.Service = nil
	}
	i.mu.Lock()
	ids := make([]int, 0, len(i.handlers))
	for id := range i.handlers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	hs := make([]func(Change), 0, len(ids))
	for _, id := range ids {
		hs = append(hs, i.handlers[id])
	}
	i.mu.Unlock()
	for _, h := range hs {
		h(c)
	}
}
