package kit

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/kipcell/kip/pluginapi"
)

// Configured holds a plugin's configuration, T: nil until Configure
// stores one, then swapped whole by each Configure, so that a call under
// way keeps the configuration it started with. Make it with
// NewConfigured; it is safe for concurrent use.
type Configured[T any] struct {
	cur atomic.Pointer[T]
	err error
}

// NewConfigured returns an empty Configured of the plugin named plugin,
// whose calls before Configure fail with a NotConfigured error that
// names it.
func NewConfigured[T any](plugin string) *Configured[T] {
	return &Configured[T]{err: pluginapi.NewNotConfigured("%s", fmt.Sprintf("the %s plugin is not configured: Configure must come first", plugin))}
}

// Get returns the configuration, or ErrNotConfigured before the first
// Store: a call the host never makes before Configure (and pluginapi's
// server refuses before it reaches the plugin).
func (c *Configured[T]) Get() (*T, error) {
	cfg := c.cur.Load()
	if cfg == nil {
		return nil, c.err
	}
	return cfg, nil
}

// Ready returns the configuration of a call that may start: Get's, or
// ctx's error when ctx has ended already.
func (c *Configured[T]) Ready(ctx context.Context) (*T, error) {
	cfg, err := c.Get()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Load returns the configuration, nil before the first Store.
func (c *Configured[T]) Load() *T { return c.cur.Load() }

// Store makes cfg the configuration of the calls that start from now on.
func (c *Configured[T]) Store(cfg *T) { c.cur.Store(cfg) }

// ErrNotConfigured is the error Get returns before the first Store, the
// same error every time (errors.Is finds it).
func (c *Configured[T]) ErrNotConfigured() error { return c.err }
