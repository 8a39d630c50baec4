package local

import (
	"encoding/json"
	"log/slog"
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
	})
	// Nothing is left behind: the suite terminated what it launched.
	p := e.provider()
	if records, err := readRecords(p.cfg.Load().stateDir); err != nil || len(records) != 0 {
		t.Errorf("cells left after the conformance suite: %d (%v)", len(records), err)
	}
}
