package fakeclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only by Advance. Its zero value stands at
// the zero time; New starts one.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
