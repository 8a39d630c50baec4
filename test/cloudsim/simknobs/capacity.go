package simknobs

import "sync"

// Shortages are capacity shortages by instance type and zone, each with
// a value saying how the cloud words it; an empty type or zone matches
// any. The zero value is ready; it is safe for concurrent use.
type Shortages[V any] struct {
	mu  sync.Mutex
	set map[capacityKey]V
}

// capacityKey names an instance type in a zone; empty fields match any.
type capacityKey struct{ instanceType, zone string }

// Inject adds (or replaces) the shortage of instanceType in zone.
func (s *Shortages[V]) Inject(instanceType, zone string, v V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[capacityKey]V{}
	}
	s.set[capacityKey{instanceType, zone}] = v
}

// Clear removes the shortage Inject added with the same arguments.
func (s *Shortages[V]) Clear(instanceType, zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, capacityKey{instanceType, zone})
}

// ClearAll removes every shortage.
func (s *Shortages[V]) ClearAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = nil
}

// Short returns the shortage that instanceType in zone meets, the most
// specific first (type and zone, zone, type, any).
func (s *Shortages[V]) Short(instanceType, zone string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []capacityKey{{instanceType, zone}, {"", zone}, {instanceType, ""}, {"", ""}} {
		if v, ok := s.set[k]; ok {
			return v, true
		}
	}
	var zero V
	return zero, false
}
