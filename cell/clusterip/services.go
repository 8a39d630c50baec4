package clusterip

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Service is what the cell programs of one Kubernetes Service.
type Service struct {
	Namespace string
	Name      string
	// ClusterIPs are the Service's IPv4 cluster IPs.
	ClusterIPs []string
	Ports      []Port
	// AffinitySeconds is sessionAffinity ClientIP's timeout; zero means
	// sessionAffinity None.
	AffinitySeconds int32
}

// Key is the Service's namespace/name.
func (s *Service) Key() string { return s.Namespace + "/" + s.Name }

// Port is one port of a Service with its ready endpoints.
type Port struct {
	// Name is the Service port's name, empty for a single unnamed port.
	Name string
	// Protocol is "TCP" or "UDP".
	Protocol  string
	Port      int32
	Endpoints []Endpoint
}

// Endpoint is a ready endpoint and its target port.
type Endpoint struct {
	IP   string
	Port int32
}

// Update is one ApplyServices request.
type Update struct {
	// Table identifies the host's table; Revision is what the cell has
	// once the update is applied.
	Table    string
	Revision uint64
	// Base is zero for a whole table; otherwise the revision of Table the
	// Proxy must have for this delta.
	Base     uint64
	Services []Service
	// Removed are keys (namespace/name) of services to drop.
	Removed []string
}

// Programmer makes the cell's network serve services, the whole set each
// time, sorted by key.
type Programmer interface {
	Program(ctx context.Context, services []Service) error
}

// ErrBaseMismatch is Apply's answer to a delta whose base is not what the
// Proxy has: the host sends the whole table instead.
var ErrBaseMismatch = errors.New("the delta's base is not the table this cell has")

// Proxy is the cell's table of services and what programs it.
type Proxy struct {
	prog Programmer

	mu       sync.Mutex
	table    string
	revision uint64
	services map[string]Service
}

// New returns an empty Proxy that programs through prog. With a nil prog
// it keeps the table without programming it, until SetProgrammer says
// where: the agent knows the pod's network namespace only once it has
// the pod, and the host may send the table before.
func New(prog Programmer) *Proxy {
	return &Proxy{prog: prog, services: map[string]Service{}}
}

// SetProgrammer makes prog what programs the table from now on, and
// programs the table the Proxy has through it, whole.
func (p *Proxy) SetProgrammer(ctx context.Context, prog Programmer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prog = prog
	if err := prog.Program(ctx, sortedServices(p.services)); err != nil {
		return fmt.Errorf("programming %d services: %w", len(p.services), err)
	}
	return nil
}

// Revision is the table and revision the cell's network now reflects.
func (p *Proxy) Revision() (table string, revision uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.table, p.revision
}

// Apply applies u and programs the result. An update of the table the
// Proxy has at a revision it already has (or an older one) changes
// nothing: the Proxy converges to the highest revision it has seen. A
// delta against another table or revision is ErrBaseMismatch. If
// programming fails, the Proxy keeps its table. It returns the table and
// revision the network now reflects (or, before SetProgrammer, the one
// the Proxy holds for it).
func (p *Proxy) Apply(ctx context.Context, u Update) (table string, revision uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u.Table == p.table && u.Revision <= p.revision {
		return p.table, p.revision, nil
	}
	var next map[string]Service
	if u.Base == 0 {
		next = make(map[string]Service, len(u.Services))
	} else {
		if u.Table != p.table || u.Base != p.revision {
			return p.table, p.revision, fmt.Errorf("%w: have %q revision %d, delta is against %q revision %d",
				ErrBaseMismatch, p.table, p.revision, u.Table, u.Base)
		}
		next = maps.Clone(p.services)
		for _, k := range u.Removed {
			delete(next, k)
		}
	}
	for _, s := range u.Services {
		next[s.Key()] = s
	}
	if p.prog != nil {
		sorted := sortedServices(next)
		if err := p.prog.Program(ctx, sorted); err != nil {
			return p.table, p.revision, fmt.Errorf("programming %d services: %w", len(sorted), err)
		}
	}
	p.table, p.revision, p.services = u.Table, u.Revision, next
	return p.table, p.revision, nil
}

// sortedServices returns the services of m in the order of their keys.
func sortedServices(m map[string]Service) []Service {
	sorted := make([]Service, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		sorted = append(sorted, m[k])
	}
	return sorted
}
