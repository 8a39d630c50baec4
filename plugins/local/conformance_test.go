package local

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/plugintest"
)

// The conformance suite checks the contract over real gRPC: idempotent
// launches, List scoped to the cluster, Terminate twice, error kinds,
// cancelled contexts. Every provider the factory returns is a "process" of
// the same plugin, so they share the test's state directory.

func TestConformanceLoopback(t *testing.T) {
	runConformance(t, newTestEnv(t))
}

func TestConformanceNetns(t *testing.T) {
	runConformance(t, newNetnsEnv(t))
}

func runConformance(t *testing.T, e *testEnv) {
	factory := func(log *slog.Logger) pluginapi.Provider {
		p := New(log).(*provider)
		p.cgroupParent = testCgroupParent
		return p
	}
	with := func(key string, value any) []byte {
		cfg := map[string]any{}
		for k, v := range e.config {
			cfg[k] = v
		}
		if value == nil {
			delete(cfg, key)
		} else {
			cfg[key] = value
		}
		data, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	plugintest.Run(t, factory, plugintest.Config{
		Plugin: e.configJSON(),
		Invalid: []plugintest.InvalidConfig{
			{Config: with("agentCommand", nil), Key: "agentCommand"},
			{Config: with("agentCommand", []string{"/nonexistent/kip-cell"}), Key: "agentCommand"},
			{Config: with("network", "host"), Key: "network"},
			{Config: with("subnet", "8.8.8.0/24"), Key: "subnet"},
			{Config: with("loopbackSubnet", "10.0.0.0/8"), Key: "loopbackSubnet"},
			{Config: with("networks", "loopback"), Key: "networks"},
			{Config: with("instanceTypes", []map[string]any{
				{"name": "a", "milliCPU": 100, "memoryMiB": 64},
				{"name": "b", "milliCPU": 200, "memoryMiB": 64},
				{"name": "c", "milliCPU": -1, "memoryMiB": 64},
			}), Key: "instanceTypes[2].milliCPU"},
		},
		InstanceType:      "local.nano",
		ClusterID:         e.clusterID,
		ReadyTimeout:      30 * time.Second,
		UnknownInstanceID: "local-00000000dead",
		// Disks of the local cloud are files of the state directory;
		// the plugin's cells run in zone "local", and a disk may lie in
		// any zone.
		CreateVolume: func(ctx context.Context, zone string) (string, error) {
			handle := "conformance-" + randHex(8)
			return handle, CreateVolume(ctx, e.stateDir(), handle, zone, 16<<20)
		},
		DeleteVolume: func(ctx context.Context, handle string) error {
			return DeleteVolume(ctx, e.stateDir(), handle)
		},
		OtherZone: "local-elsewhere",
		// A local disk is a file behind a loop device: it has no type,
		// and every cell takes it.
		NoIncompatibleVolume: "local disks have no type: every cell takes every disk",
	})
	// Nothing is left behind: the suite terminated what it launched and
	// deleted the disks it made, whose loop devices went with their cells.
	p := e.provider()
	if records, err := readRecords(p.cfg.Load().stateDir); err != nil || len(records) != 0 {
		t.Errorf("cells left after the conformance suite: %d (%v)", len(records), err)
	}
	if vols, err := readVolumes(e.stateDir()); err != nil || len(vols) != 0 {
		t.Errorf("disks left after the conformance suite: %d (%v)", len(vols), err)
	}
	if bound, err := boundLoops(); err == nil {
		for backing, device := range bound {
			if strings.HasPrefix(backing, resolved(e.stateDir())+"/") {
				t.Errorf("loop device %s is still bound to %s after the conformance suite", device, backing)
			}
		}
	}
}
