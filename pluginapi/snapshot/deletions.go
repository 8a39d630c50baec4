package snapshot

import (
	"sync"
	"time"
)

// DeletionMemory is how long Deletions remembers a deletion.
const DeletionMemory = time.Hour

// Deletions remembers the instances this plugin process asked to delete,
// so that its event watch does not take an instance it deleted itself for
// one the cloud reclaimed (a Spot preemption or eviction). It is a hint,
// kept in memory and pruned after DeletionMemory: a restarted plugin
// starts with none. It is safe for concurrent use.
type Deletions struct {
	now func() time.Time
	mu  sync.Mutex
	at  map[string]time.Time
}

// NewDeletions returns an empty memory on the clock now.
func NewDeletions(now func() time.Time) *Deletions {
	return &Deletions{now: now, at: map[string]time.Time{}}
}

// Add remembers that the instance id is being deleted by this process,
// and forgets the deletions older than DeletionMemory.
func (d *Deletions) Add(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for k, t := range d.at {
		if now.Sub(t) > DeletionMemory {
			delete(d.at, k)
		}
	}
	d.at[id] = now
}

// Has reports whether this process asked to delete the instance id.
func (d *Deletions) Has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.at[id]
	return ok
}
