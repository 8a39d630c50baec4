package boottime

import (
	"slices"
	"sync"
	"time"
)

// Memory is how many boots Times keeps: enough to ride out one slow
// boot, few enough to follow a change of instance types.
const Memory = 16

// Times are the last boot times a watcher saw (late by up to a poll).
// The zero value is empty and ready; it is safe for concurrent use.
type Times struct {
	mu   sync.Mutex
	last []time.Duration // oldest first, at most Memory
}

// Add records a boot that took d.
func (b *Times) Add(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = append(b.last, d)
	if len(b.last) > Memory {
		b.last = b.last[1:]
	}
}

// Quickest returns the shortest boot remembered, if any.
func (b *Times) Quickest() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.last) == 0 {
		return 0, false
	}
	return slices.Min(b.last), true
}
