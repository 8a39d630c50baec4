package cells

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// cellSet is the Manager's cells, by pod UID and by namespace/name. Once
// stopAll has run (Run ended), a cell added is stopped at once, as every
// other cell was.
type cellSet struct {
	mu      sync.Mutex
	byUID   map[types.UID]*cell
	byName  map[string]types.UID
	stopped bool
}

func newCellSet() *cellSet {
	return &cellSet{byUID: map[types.UID]*cell{}, byName: map[string]types.UID{}}
}

// add records c unless its pod already has a cell, which it returns
// instead; nil means c was added and its caller starts it.
func (s *cellSet) add(c *cell) (existing *cell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.byUID[c.uid]; ok {
		return have
	}
	s.byUID[c.uid] = c
	s.byName[c.key] = c.uid
	if s.stopped {
		c.stop()
	}
	return nil
}

// get returns the cell of pod UID uid, or nil.
func (s *cellSet) get(uid types.UID) *cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byUID[uid]
}

// byKey returns the cell of pod namespace/name, or nil.
func (s *cellSet) byKey(namespace, name string) *cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.byName[key(namespace, name)]
	if !ok {
		return nil
	}
	return s.byUID[uid]
}

// all returns every cell.
func (s *cellSet) all() []*cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*cell, 0, len(s.byUID))
	for _, c := range s.byUID {
		out = append(out, c)
	}
	return out
}

// ids returns the cell ID of every cell.
func (s *cellSet) ids() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.byUID))
	for _, c := range s.byUID {
		out[c.cellID()] = true
	}
	return out
}

// find returns the cell of a plugin event: its cell ID is derived from
// the pod UID (cellOf), so the UID is derived, not searched for (an event
// about an earlier cell of the pod, one that never booted, finds none); an
// event with no cell ID is matched by instance ID.
func (s *cellSet) find(cellID, instanceID string) *cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid, _, ok := cellOf(cellID); ok {
		if c := s.byUID[uid]; c != nil && c.cellID() == cellID {
			return c
		}
		return nil
	}
	if instanceID == "" {
		return nil
	}
	for _, c := range s.byUID {
		if c.instanceID() == instanceID {
			return c
		}
	}
	return nil
}

// remove forgets c (not a newer cell of the same pod name).
func (s *cellSet) remove(c *cell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUID[c.uid] == c {
		delete(s.byUID, c.uid)
	}
	if s.byName[c.key] == c.uid {
		delete(s.byName, c.key)
	}
}

// stopAll stops every cell's goroutine, now and as cells are added: the
// Manager's Run has ended. A cell being terminated finishes that.
func (s *cellSet) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, c := range s.byUID {
		c.stop()
	}
}
