package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/pluginapi"
)

const (
	pinA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	pinB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// fakeSwapper records Reloads and answers them with err.
type fakeSwapper struct {
	mu      sync.Mutex
	reloads []plugin.ReloadConfig
	err     error
}

func (f *fakeSwapper) Reload(_ context.Context, rc plugin.ReloadConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads = append(f.reloads, rc)
	return f.err
}

func (f *fakeSwapper) Path() string { return "/opt/kip/kip-plugin-local" }

func (f *fakeSwapper) calls() []plugin.ReloadConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]plugin.ReloadConfig(nil), f.reloads...)
}

// testConfig is a validated configuration pinned to pinA.
func testConfig(t *testing.T, set map[string]any) *config.Config {
	t.Helper()
	flags := map[string]any{
		"clusterID": "prod", "nodeName": "kip", "plugin.name": "local", "plugin.dir": "/opt/kip",
		"plugin.sha256": pinA, "plugin.config": map[string]any{"network": "netns"},
	}
	for k, v := range set {
		flags[k] = v
	}
	cfg, err := config.Load("", nil, flags)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func bufLogger() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

func TestPluginReload(t *testing.T) {
	loadErr := errors.New("reading config file /etc/kip/kip.yaml: yaml: line 3: mapping values are not allowed in this context")
	tests := []struct {
		name string
		// next is the configuration read on SIGHUP (the flags that
		// differ from the running one); loadErr fails the read.
		next    map[string]any
		loadErr error
		// swapErr is the Supervisor's answer.
		swapErr error
		// wantSwap is the Reload expected; nil: none.
		wantSwap *plugin.ReloadConfig
		wantErr  string
		wantWarn string
	}{
		{
			name:     "new pin",
			next:     map[string]any{"plugin.sha256": pinB},
			wantSwap: &plugin.ReloadConfig{SHA256: pinB, Configure: &pluginapi.ConfigureRequest{ClusterID: "prod", NodeName: "kip", Config: []byte(`{"network":"netns"}`)}},
		},
		{
			name:     "new plugin config and no pin",
			next:     map[string]any{"plugin.sha256": "", "plugin.config": map[string]any{"network": "loopback"}},
			wantSwap: &plugin.ReloadConfig{Configure: &pluginapi.ConfigureRequest{ClusterID: "prod", NodeName: "kip", Config: []byte(`{"network":"loopback"}`)}},
		},
		{
			name:     "nothing changed: the binary on disk is swapped in",
			wantSwap: &plugin.ReloadConfig{SHA256: pinA, Configure: &pluginapi.ConfigureRequest{ClusterID: "prod", NodeName: "kip", Config: []byte(`{"network":"netns"}`)}},
		},
		{
			name:     "other sections wait for a restart",
			next:     map[string]any{"plugin.sha256": pinB, "cells.unavailableTTL": "10s", "log.level": "debug"},
			wantSwap: &plugin.ReloadConfig{SHA256: pinB, Configure: &pluginapi.ConfigureRequest{ClusterID: "prod", NodeName: "kip", Config: []byte(`{"network":"netns"}`)}},
			wantWarn: `keys="[cells.unavailableTTL log.level]"`,
		},
		{
			name:    "another plugin",
			next:    map[string]any{"plugin.name": "aws", "plugin.sha256": pinB},
			wantErr: `plugin local (/opt/kip/kip-plugin-local): reloading: the configuration changes plugin.name from "local" to "aws", which a plugin swap cannot: restart kip to apply it`,
		},
		{
			name:    "another directory and path",
			next:    map[string]any{"plugin.dir": "/usr/lib/kip", "plugin.path": "/usr/lib/kip/kip-plugin-local"},
			wantErr: `the configuration changes plugin.dir from "/opt/kip" to "/usr/lib/kip", plugin.path from "" to "/usr/lib/kip/kip-plugin-local", which a plugin swap cannot: restart kip to apply it`,
		},
		{
			name:    "another cluster",
			next:    map[string]any{"clusterID": "staging"},
			wantErr: `the configuration changes clusterID from "prod" to "staging", which a plugin swap cannot: restart kip to apply it`,
		},
		{
			name:    "another node",
			next:    map[string]any{"nodeName": "kip2"},
			wantErr: `nodeName from "kip" to "kip2"`,
		},
		{
			name:    "the file no longer loads",
			loadErr: loadErr,
			wantErr: "plugin local (/opt/kip/kip-plugin-local): reloading: re-reading the configuration: " + loadErr.Error() + " (fix it and send SIGHUP again)",
		},
		{
			name:     "the new plugin fails its checks",
			next:     map[string]any{"plugin.sha256": pinB},
			swapErr:  &plugin.Error{Plugin: "local", Path: "/opt/kip/kip-plugin-local", Err: errors.New("reloading: checksum mismatch: pinned sha256 bbbb, file has cccc")},
			wantSwap: &plugin.ReloadConfig{SHA256: pinB, Configure: &pluginapi.ConfigureRequest{ClusterID: "prod", NodeName: "kip", Config: []byte(`{"network":"netns"}`)}},
			wantErr:  "plugin local (/opt/kip/kip-plugin-local): reloading: checksum mismatch: pinned sha256 bbbb, file has cccc",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			running := testConfig(t, nil)
			next := testConfig(t, tt.next)
			sup := &fakeSwapper{err: tt.swapErr}
			log, logs := bufLogger()
			var refreshed int
			r := newPluginReloader(sup, func() (*config.Config, error) {
				if tt.loadErr != nil {
					return nil, tt.loadErr
				}
				return next, nil
			}, running, func() { refreshed++ }, log)

			err := r.reload(t.Context())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("reload = %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("reload = %v\nwant an error containing %q", err, tt.wantErr)
			}
			var want []plugin.ReloadConfig
			if tt.wantSwap != nil {
				want = append(want, *tt.wantSwap)
			}
			if diff := cmp.Diff(want, sup.calls()); diff != "" {
				t.Errorf("Reloads (-want +got):\n%s", diff)
			}
			// The plugin section kip runs with is the new one only after
			// a swap; a later crash-restart and the next SIGHUP compare
			// against it.
			wantPlugin := running.Plugin
			if err == nil {
				wantPlugin = next.Plugin
			}
			if diff := cmp.Diff(wantPlugin, r.running.Plugin); diff != "" {
				t.Errorf("running plugin section (-want +got):\n%s", diff)
			}
			// The cells fetch the new process's catalog and capabilities
			// after a swap, and only then.
			wantRefreshed := 0
			if err == nil && len(sup.calls()) == 1 {
				wantRefreshed = 1
			}
			if refreshed != wantRefreshed {
				t.Errorf("catalog refreshed %d times, want %d", refreshed, wantRefreshed)
			}
			if tt.wantWarn != "" && !strings.Contains(logs.String(), tt.wantWarn) {
				t.Errorf("log lacks %s:\n%s", tt.wantWarn, logs)
			}
		})
	}
}

// A SIGHUP's refusal is one error line naming the plugin, its path and
// why, and kip goes on serving SIGHUPs.
func TestPluginReloaderRun(t *testing.T) {
	running := testConfig(t, nil)
	sup := &fakeSwapper{}
	log, logs := bufLogger()
	// The first SIGHUP reads another cluster ID, the later ones a new pin.
	reads := []*config.Config{
		testConfig(t, map[string]any{"clusterID": "staging"}),
		testConfig(t, map[string]any{"plugin.sha256": pinB}),
	}
	var n int
	r := newPluginReloader(sup, func() (*config.Config, error) {
		c := reads[min(n, len(reads)-1)]
		n++
		return c, nil
	}, running, nil, log)
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, hup) }()

	// Each send waits for the loop, so for the reload before it.
	for range 3 {
		hup <- syscall.SIGHUP
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return when ctx ended")
	}

	var errLines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], `plugin local (/opt/kip/kip-plugin-local): reloading: the configuration changes clusterID from \"prod\" to \"staging\"`) {
		t.Errorf("error lines = %q; want one naming the plugin, its path and the change", errLines)
	}
	if calls := sup.calls(); len(calls) != 2 || calls[0].SHA256 != pinB || calls[1].SHA256 != pinB {
		t.Errorf("Reloads = %+v; want those of the second and third SIGHUP, pinned to %s", calls, pinB)
	}
}

// changes compares the keys of kip.yaml only: the fields the daemon wires
// (koanf:"-") are never a change.
func TestChangesComparesKeysOnly(t *testing.T) {
	a, b := testConfig(t, nil), testConfig(t, map[string]any{"cells.catalogTTL": "1h", "match.agentReserveCPU": "250m"})
	b.Cells.Backoff = func(int) time.Duration { return time.Second }
	b.Cells.BootTimeout = time.Hour
	b.Node.Version = "v9"
	b.Plugin.LogLevel = "debug"
	var got []string
	for _, c := range changes(*a, *b) {
		got = append(got, c.key)
	}
	if diff := cmp.Diff([]string{"cells.catalogTTL", "match.agentReserveCPU"}, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}
