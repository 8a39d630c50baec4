package keptlogs

import "sync"

// Changes tells a waiting listing (Server.Changes) that the kept logs
// changed: host/cells calls Notify when it keeps, removes or prunes a
// pod's logs, so that a standby's long poll answers at once instead of at
// the next rescan.
type Changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewChanges returns Changes with nobody waiting.
func NewChanges() *Changes { return &Changes{ch: make(chan struct{})} }

// Notify wakes everyone waiting on the channel Changed returned before.
func (c *Changes) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
}

// Changed returns a channel closed at the next Notify.
func (c *Changes) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}
