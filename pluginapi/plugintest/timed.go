package plugintest

import (
	"context"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// timed wraps a provider and records, for every call, when the provider
// itself returned and what deadline its context had. Served behind gRPC,
// it sees the call as the plugin does: the client gives up at its deadline
// whatever the plugin does, so only the server side shows a plugin that
// ignores its context.
type timed struct {
	p pluginapi.Provider

	mu       sync.Mutex
	calls    []*timedCall
	launched []pluginapi.Instance // what the provider's Launch answered
}

// timedCall is one call to the wrapped provider.
type timedCall struct {
	method   string
	deadline time.Time // zero without a deadline
	done     chan struct{}
	returned time.Time // set before done closes
}

var (
	_ pluginapi.Provider                 = (*timed)(nil)
	_ pluginapi.EventWatcher             = (*timed)(nil)
	_ pluginapi.RegistryAuthenticator    = (*timed)(nil)
	_ pluginapi.ConsoleOutputReader      = (*timed)(nil)
	_ pluginapi.InstanceIdentityVerifier = (*timed)(nil)
	_ pluginapi.VolumeAttacher           = (*timed)(nil)
)

// begin records the start of a call; the returned func records its end.
func (t *timed) begin(ctx context.Context, method string) func() {
	c := &timedCall{method: method, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	t.mu.Lock()
	t.calls = append(t.calls, c)
	t.mu.Unlock()
	return func() {
		c.returned = time.Now()
		close(c.done)
	}
}

// reset forgets the recorded calls.
func (t *timed) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = nil
}

// first returns the first recorded call of method since reset, or nil.
func (t *timed) first(method string) *timedCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.calls {
		if c.method == method {
			return c
		}
	}
	return nil
}

func (t *timed) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	defer t.begin(ctx, "GetInfo")()
	return t.p.GetInfo(ctx, req)
}

func (t *timed) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	defer t.begin(ctx, "Configure")()
	return t.p.Configure(ctx, req)
}

func (t *timed) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	defer t.begin(ctx, "ListInstanceTypes")()
	return t.p.ListInstanceTypes(ctx, req)
}

func (t *timed) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	defer t.begin(ctx, "Launch")()
	resp, err := t.p.Launch(ctx, req)
	if err == nil && resp != nil {
		t.mu.Lock()
		t.launched = append(t.launched, resp.Instance)
		t.mu.Unlock()
	}
	return resp, err
}

func (t *timed) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	defer t.begin(ctx, "Describe")()
	return t.p.Describe(ctx, req)
}

func (t *timed) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	defer t.begin(ctx, "List")()
	return t.p.List(ctx, req)
}

func (t *timed) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	defer t.begin(ctx, "Terminate")()
	return t.p.Terminate(ctx, req)
}

func (t *timed) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	w, ok := t.p.(pluginapi.EventWatcher)
	if !ok {
		return pluginapi.NewUnsupported("plugin does not implement WatchEvents")
	}
	defer t.begin(ctx, "WatchEvents")()
	return w.WatchEvents(ctx, req, send)
}

func (t *timed) VerifyInstanceIdentity(ctx context.Context, req *pluginapi.VerifyInstanceIdentityRequest) (*pluginapi.VerifyInstanceIdentityResponse, error) {
	v, ok := t.p.(pluginapi.InstanceIdentityVerifier)
	if !ok {
		return nil, pluginapi.NewUnsupported("plugin does not implement VerifyInstanceIdentity")
	}
	defer t.begin(ctx, "VerifyInstanceIdentity")()
	return v.VerifyInstanceIdentity(ctx, req)
}

func (t *timed) RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error) {
	a, ok := t.p.(pluginapi.RegistryAuthenticator)
	if !ok {
		return nil, pluginapi.NewUnsupported("plugin does not implement RegistryAuth")
	}
	defer t.begin(ctx, "RegistryAuth")()
	return a.RegistryAuth(ctx, req)
}

func (t *timed) ConsoleOutput(ctx context.Context, req *pluginapi.ConsoleOutputRequest) (*pluginapi.ConsoleOutputResponse, error) {
	r, ok := t.p.(pluginapi.ConsoleOutputReader)
	if !ok {
		return nil, pluginapi.NewUnsupported("plugin does not implement ConsoleOutput")
	}
	defer t.begin(ctx, "ConsoleOutput")()
	return r.ConsoleOutput(ctx, req)
}

func (t *timed) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	v, ok := t.p.(pluginapi.VolumeAttacher)
	if !ok {
		return nil, pluginapi.NewUnsupported("plugin does not implement AttachVolume")
	}
	defer t.begin(ctx, "AttachVolume")()
	return v.AttachVolume(ctx, req)
}

func (t *timed) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	v, ok := t.p.(pluginapi.VolumeAttacher)
	if !ok {
		return nil, pluginapi.NewUnsupported("plugin does not implement DetachVolume")
	}
	defer t.begin(ctx, "DetachVolume")()
	return v.DetachVolume(ctx, req)
}

func (t *timed) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	v, ok := t.p.(pluginapi.VolumeAttacher)
	if !ok {
		return nil, pluginapi.NewUnsupported("plugin does not implement DescribeVolumeAttachments")
	}
	defer t.begin(ctx, "DescribeVolumeAttachments")()
	return v.DescribeVolumeAttachments(ctx, req)
}
