package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// routingClient is the Supervisor's stable pluginapi.Client.
type routingClient struct {
	s *Supervisor
}

var _ pluginapi.Client = (*routingClient)(nil)

// acquire returns the current process, counted as in flight, waiting (up to
// CallWait and ctx) while there is none or while the current one is avoid.
// The caller calls p.inflight.Done.
func (s *Supervisor) acquire(ctx context.Context, avoid *proc) (*proc, error) {
	var timer *time.Timer
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, s.wrap(ErrClosed)
		}
		p := s.cur
		if p != nil && p != avoid && !p.exited() {
			p.inflight.Add(1)
			s.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return p, nil
		}
		changed := s.changed
		s.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(s.cfg.CallWait)
			defer timer.Stop()
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		select {
		case <-changed:
		case <-exited:
			// Let the supervisor notice; changed follows.
			exited = nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for plugin %s to restart: %w", s.name, ctx.Err())
		case <-timer.C:
			s.mu.Lock()
			lastErr := s.lastErr
			s.mu.Unlock()
			if lastErr == nil {
				lastErr = errors.New("plugin process lost")
			}
			return nil, s.wrap(fmt.Errorf("%w: no plugin process ready within %s: %w",
				ErrUnavailable, s.cfg.CallWait, pluginapi.NewTransient("%v", lastErr)))
		}
	}
}

// lost reports whether a call on p failed because p is gone, so that the
// call should be sent again, and which process the retry must avoid.
func (s *Supervisor) lost(ctx context.Context, p *proc, err error) (retry bool, avoid *proc) {
	if ctx.Err() != nil {
		return false, nil
	}
	// Any other error is the plugin's answer, even if the process exits
	// later.
	if !pluginapi.IsUnreachable(err) && !errors.Is(err, context.Canceled) {
		return false, nil
	}
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-p.done:
		return true, p
	case <-p.retired.Done():
		return true, p
	case <-ctx.Done():
		return false, nil
	case <-t.C:
	}
	if !pluginapi.IsUnreachable(err) {
		// A cancellation with the process alive and current is the
		// plugin's own answer.
		return false, nil
	}
	// The process lives but the connection broke: if it does not answer
	// a ping either, kill it and let the supervisor restart it.
	if perr := p.rpc.Ping(); perr != nil {
		s.log.Warn("plugin process unreachable; killing it", "pid", p.pid, "error", perr)
		go p.client.Kill()
		return true, p
	}
	return true, nil
}

// call sends f to the current process and sends it again (idempotent calls)
// when the process is lost under it.
func call[T any](ctx context.Context, s *Supervisor, method string, f func(context.Context, pluginapi.Client) (T, error)) (T, error) {
	var avoid *proc
	for try := 1; ; try++ {
		p, err := s.acquire(ctx, avoid)
		if err != nil {
			var zero T
			return zero, fmt.Errorf("calling %s: %w", method, err)
		}
		v, err := f(ctx, p.api)
		p.inflight.Done()
		if err == nil || try >= maxCallTries {
			return v, err
		}
		retry, next := s.lost(ctx, p, err)
		if !retry {
			return v, err
		}
		s.log.Info("plugin process lost during call; retrying", "method", method, "pid", p.pid, "try", try, "error", err)
		avoid = next
	}
}

func (c *routingClient) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	return call(ctx, c.s, "GetInfo", func(ctx context.Context, api pluginapi.Client) (*pluginapi.GetInfoResponse, error) {
		return api.GetInfo(ctx, req)
	})
}

func (c *routingClient) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	resp, err := call(ctx, c.s, "Configure", func(ctx context.Context, api pluginapi.Client) (*pluginapi.ConfigureResponse, error) {
		return api.Configure(ctx, req)
	})
	if err == nil {
		c.s.mu.Lock()
		c.s.configure = req
		c.s.mu.Unlock()
	}
	return resp, err
}

func (c *routingClient) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	return call(ctx, c.s, "ListInstanceTypes", func(ctx context.Context, api pluginapi.Client) (*pluginapi.ListInstanceTypesResponse, error) {
		return api.ListInstanceTypes(ctx, req)
	})
}

func (c *routingClient) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	return call(ctx, c.s, "Launch", func(ctx context.Context, api pluginapi.Client) (*pluginapi.LaunchResponse, error) {
		return api.Launch(ctx, req)
	})
}

func (c *routingClient) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	return call(ctx, c.s, "Describe", func(ctx context.Context, api pluginapi.Client) (*pluginapi.DescribeResponse, error) {
		return api.Describe(ctx, req)
	})
}

func (c *routingClient) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	return call(ctx, c.s, "List", func(ctx context.Context, api pluginapi.Client) (*pluginapi.ListResponse, error) {
		return api.List(ctx, req)
	})
}

func (c *routingClient) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	return call(ctx, c.s, "Terminate", func(ctx context.Context, api pluginapi.Client) (*pluginapi.TerminateResponse, error) {
		return api.Terminate(ctx, req)
	})
}

func (c *routingClient) RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error) {
	return call(ctx, c.s, "RegistryAuth", func(ctx context.Context, api pluginapi.Client) (*pluginapi.RegistryAuthResponse, error) {
		return api.RegistryAuth(ctx, req)
	})
}

func (c *routingClient) ConsoleOutput(ctx context.Context, req *pluginapi.ConsoleOutputRequest) (*pluginapi.ConsoleOutputResponse, error) {
	return call(ctx, c.s, "ConsoleOutput", func(ctx context.Context, api pluginapi.Client) (*pluginapi.ConsoleOutputResponse, error) {
		return api.ConsoleOutput(ctx, req)
	})
}

func (c *routingClient) VerifyInstanceIdentity(ctx context.Context, req *pluginapi.VerifyInstanceIdentityRequest) (*pluginapi.VerifyInstanceIdentityResponse, error) {
	return call(ctx, c.s, "VerifyInstanceIdentity", func(ctx context.Context, api pluginapi.Client) (*pluginapi.VerifyInstanceIdentityResponse, error) {
		return api.VerifyInstanceIdentity(ctx, req)
	})
}

func (c *routingClient) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	return call(ctx, c.s, "AttachVolume", func(ctx context.Context, api pluginapi.Client) (*pluginapi.AttachVolumeResponse, error) {
		return api.AttachVolume(ctx, req)
	})
}

func (c *routingClient) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	return call(ctx, c.s, "DetachVolume", func(ctx context.Context, api pluginapi.Client) (*pluginapi.DetachVolumeResponse, error) {
		return api.DetachVolume(ctx, req)
	})
}

func (c *routingClient) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	return call(ctx, c.s, "DescribeVolumeAttachments", func(ctx context.Context, api pluginapi.Client) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
		return api.DescribeVolumeAttachments(ctx, req)
	})
}

// WatchEvents streams the plugin's events and subscribes again on the new
// process after a restart or Reload; events in between are lost, which the
// contract allows (events are hints). It returns when ctx ends, when send
// fails, or with the plugin's own error.
func (c *routingClient) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	s := c.s
	var avoid *proc
	for {
		p, err := s.acquire(ctx, avoid)
		if err != nil {
			return fmt.Errorf("calling WatchEvents: %w", err)
		}
		// A stream is not a call in flight: Reload does not wait for it.
		p.inflight.Done()
		sctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(p.retired, cancel)
		err = p.api.WatchEvents(sctx, req, send)
		stop()
		cancel()
		if ctx.Err() != nil {
			return err
		}
		retry, next := s.lost(ctx, p, err)
		if !retry {
			return err
		}
		s.log.Info("plugin process changed; subscribing to events again", "old_pid", p.pid, "error", err)
		avoid = next
	}
}
