package cells

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// sharedTimeout bounds one shared call (shared): it serves every cell
// waiting on it, so no one cell's context may end it.
const sharedTimeout = time.Minute

// sharedList shares the plugin's List among the cells that look
// themselves up by cell ID at the same time: before a launch (existing:
// an instance whose Launch answer was lost is taken, not launched twice)
// and after a termination (terminate: such an instance is ended too). A
// burst of N pods made that N Lists at least, each answering every
// instance of the node; now the look-ups that arrive while a List is under
// way wait and share the next one (shared says why that keeps the
// look-up's guarantee). The zero value is ready; the plugin is passed to
// each call.
type sharedList struct {
	s shared[*pluginapi.ListResponse]
}

// list returns the answer of a List of plugin that started after the
// call. The response is shared: callers only read it.
func (l *sharedList) list(ctx context.Context, plugin instanceLister) (*pluginapi.ListResponse, error) {
	return l.s.do(ctx, "", func(ctx context.Context, _ []string) (*pluginapi.ListResponse, error) {
		return plugin.List(ctx, &pluginapi.ListRequest{})
	})
}

// instanceDescriber is the part of the plugin a booting cell reads.
type instanceDescriber interface {
	Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error)
}

// sharedDescribe shares the plugin's Describe among the booting cells
// that look at their instance at the same time (waitRunning): one poll
// of the plugin's event watch reports many instances running at once,
// each waking its cell, and they make one Describe of all their IDs
// (the contract's DescribeRequest names any number) instead of one each.
type sharedDescribe struct {
	s shared[*pluginapi.DescribeResponse]
}

// describe returns id's instance from a Describe of plugin that started
// after the call, or nil when the plugin does not know it (yet).
func (d *sharedDescribe) describe(ctx context.Context, plugin instanceDescriber, id string) (*pluginapi.Instance, error) {
	resp, err := d.s.do(ctx, id, func(ctx context.Context, ids []string) (*pluginapi.DescribeResponse, error) {
		return plugin.Describe(ctx, &pluginapi.DescribeRequest{IDs: ids})
	})
	if err != nil {
		return nil, err
	}
	for i := range resp.Instances {
		if resp.Instances[i].ID == id {
			inst := resp.Instances[i]
			return &inst, nil
		}
	}
	return nil, nil
}

// shared runs a plugin call for many callers at once, in rounds: the
// callers that arrive while a call is under way join the next round,
// which starts once that call has answered, with all their keys. A caller
// is answered only by a call that started after it asked, never by one
// already under way when it came: that call may predate a Launch or a
// state the caller has seen, and the caller must see at least what a call
// of its own would. The zero value is ready.
type shared[R any] struct {
	mu sync.Mutex
	// next is the round that callers arriving now join; running says a
	// call is under way.
	next    *round[R]
	running bool
}

// round is one call and the callers it answers; done closes when it has
// answered.
type round[R any] struct {
	// ctx and call are the first caller's: ctx gives the call its values,
	// not its end.
	ctx  context.Context
	call func(ctx context.Context, keys []string) (R, error)
	keys []string
	done chan struct{}
	resp R
	err  error
}

// do joins the next round with key ("" for none) and returns its answer.
// call gets the round's distinct keys; the round makes its first
// caller's call.
func (s *shared[R]) do(ctx context.Context, key string, call func(ctx context.Context, keys []string) (R, error)) (R, error) {
	s.mu.Lock()
	r := s.next
	if r == nil {
		r = &round[R]{ctx: ctx, call: call, done: make(chan struct{})}
		s.next = r
	}
	if key != "" && !slices.Contains(r.keys, key) {
		r.keys = append(r.keys, key)
	}
	if !s.running {
		s.start()
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.resp, r.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// start runs the next round's call; s.mu is held.
func (s *shared[R]) start() {
	r := s.next
	s.next, s.running = nil, true
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), sharedTimeout)
		r.resp, r.err = r.call(cctx, r.keys)
		cancel()
		close(r.done)
		s.mu.Lock()
		s.running = false
		if s.next != nil {
			s.start()
		}
		s.mu.Unlock()
	}()
}
