package match

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Unavailable is a set of offerings that recently failed to launch for lack
// of capacity, each forgotten after a TTL. The host marks an offering after
// InsufficientCapacity and passes Contains to Rank. Safe for concurrent
// use; Contains takes no lock (the set is copied on Mark, which is rare).
type Unavailable struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex                        // serialises Mark
	marks atomic.Pointer[map[string][]mark] // type name → its marks; never mutated once stored
}

type mark struct {
	zone    string // empty for every zone
	ct      pluginapi.CapacityType
	expires time.Time
}

// NewUnavailable returns an empty set whose marks last ttl (zero means
// DefaultUnavailableTTL), reading the time from now (nil means time.Now).
func NewUnavailable(ttl time.Duration, now func() time.Time) *Unavailable {
	if ttl <= 0 {
		ttl = DefaultUnavailableTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Unavailable{ttl: ttl, now: now}
}

// Mark makes the offering unavailable for the TTL from now. An empty zone
// marks the type and capacity type in every zone (for a launch that failed
// without saying where). Marking again extends the mark. Mark also drops
// expired marks.
func (u *Unavailable) Mark(typ, zone string, ct pluginapi.CapacityType) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	next := make(map[string][]mark)
	if old := u.marks.Load(); old != nil {
		for t, ms := range *old {
			var keep []mark
			for _, m := range ms {
				if now.Before(m.expires) && (t != typ || m.zone != zone || m.ct != ct) {
					keep = append(keep, m)
				}
			}
			if len(keep) > 0 {
				next[t] = keep
			}
		}
	}
	next[typ] = append(next[typ], mark{zone: zone, ct: ct, expires: now.Add(u.ttl)})
	u.marks.Store(&next)
}

// Contains reports whether the offering is marked, in its zone or in every
// zone. Its signature is Rank's unavailable; the clock is read only when
// the type has a mark.
func (u *Unavailable) Contains(typ, zone string, ct pluginapi.CapacityType) bool {
	p := u.marks.Load()
	if p == nil {
		return false
	}
	ms := (*p)[typ]
	if len(ms) == 0 {
		return false
	}
	var now time.Time
	for _, m := range ms {
		if m.ct != ct || (m.zone != "" && m.zone != zone) {
			continue
		}
		if now.IsZero() {
			now = u.now()
		}
		if now.Before(m.expires) {
			return true
		}
	}
	return false
}

// Len is the number of marks that have not expired.
func (u *Unavailable) Len() int {
	p := u.marks.Load()
	if p == nil {
		return 0
	}
	now, n := u.now(), 0
	for _, ms := range *p {
		for _, m := range ms {
			if now.Before(m.expires) {
				n++
			}
		}
	}
	return n
}
