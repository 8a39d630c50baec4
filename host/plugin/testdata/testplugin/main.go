// Command testplugin is the plugin binary the host/plugin tests run: the
// recording fake provider served by pluginapi.Serve.
//
// Environment:
//
//	KIP_FAKE_STATE            state file of the fake cloud (shared across restarts)
//	KIP_TESTPLUGIN_PROTOCOL   serve only this go-plugin protocol version
//	KIP_TESTPLUGIN_SLOW       a duration every call but GetInfo and Configure sleeps first
//	KIP_TESTPLUGIN_NAME       the name GetInfo reports (default "fake")
//	KIP_TESTPLUGIN_CONFIGURED a file to which every successful Configure appends
//	                          "<pid> <config JSON>" as one line
//
// Build with -ldflags "-X main.version=1.2.3" to set the reported version.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
)

var version = "1.0.0"

func main() {
	newProvider := func(*slog.Logger) pluginapi.Provider {
		opts := []fake.Option{fake.WithStateFile(os.Getenv("KIP_FAKE_STATE")), fake.WithVersion(version)}
		if name := os.Getenv("KIP_TESTPLUGIN_NAME"); name != "" {
			opts = append(opts, fake.WithName(name))
		}
		p := &slow{Provider: fake.New(opts...), configured: os.Getenv("KIP_TESTPLUGIN_CONFIGURED")}
		if d, err := time.ParseDuration(os.Getenv("KIP_TESTPLUGIN_SLOW")); err == nil && d > 0 {
			p.delay = d
		}
		return p
	}
	if v := os.Getenv("KIP_TESTPLUGIN_PROTOCOL"); v != "" && len(os.Args) == 1 {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(err)
		}
		handshake := pluginapi.Handshake
		handshake.ProtocolVersion = uint(n)
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  handshake,
			VersionedPlugins: map[int]plugin.PluginSet{n: pluginapi.PluginSets(newProvider(nil))[pluginapi.ProtocolVersion]},
			GRPCServer:       plugin.DefaultGRPCServer,
		})
		return
	}
	pluginapi.Serve(newProvider)
}

// slow delays every call but GetInfo and Configure by delay, so a test can
// kill the process while calls are in flight, and records every successful
// Configure in the file configured, so a test can see which configuration
// a process got.
type slow struct {
	*fake.Provider
	delay      time.Duration
	configured string
}

func (s *slow) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	resp, err := s.Provider.Configure(ctx, req)
	if err != nil || s.configured == "" {
		return resp, err
	}
	f, err := os.OpenFile(s.configured, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%d %s\n", os.Getpid(), req.Config); err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *slow) wait(ctx context.Context) error {
	if s.delay <= 0 {
		return nil
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slow) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Provider.ListInstanceTypes(ctx, req)
}

func (s *slow) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Provider.Launch(ctx, req)
}

func (s *slow) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Provider.Describe(ctx, req)
}

func (s *slow) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Provider.List(ctx, req)
}

func (s *slow) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Provider.Terminate(ctx, req)
}
