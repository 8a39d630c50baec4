//go:build e2e

package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/test/e2e/framework"
)

// KipNode is kip as a real process (framework.StartKip, with the node's
// own identity system:node:<name>), every cell a light cell
// (KipOptions.LightCells: one kip-light-cells process hosts them all) on
// loopback addresses, behind Plugin: the local plugin, or the aws plugin
// against the EC2 simulator with no boot delay. Run measures the kip
// process alone (its PID), not its plugin, the light cells or the
// simulator (which runs in the test's process); Counters adds the plugin
// process's CPU time, and PluginPeakRSS its peak memory.
type KipNode struct {
	// Plugin is framework.PluginLocal or framework.PluginAWS.
	Plugin   string
	NodeName string
	Cells    *framework.Cells
	BinDir   string
	Log      io.Writer
	// ProfileDir, if set, turns on kip's admin.profiling and receives its
	// heap and goroutine profiles (SaveProfiles).
	ProfileDir string
	// Env is more of kip's environment (GOMEMLIMIT=…).
	Env []string

	k *framework.Kip

	mu            sync.Mutex
	pluginPeakRSS uint64
}

// Name is the node's name.
func (n *KipNode) Name() string { return n.NodeName }

// User is the node's identity.
func (n *KipNode) User() string { return "system:node:" + n.NodeName }

// Start starts kip and returns once its Node is Ready; behind the EC2
// simulator it sets the instances' boot delay to zero.
func (n *KipNode) Start(ctx context.Context) error {
	k, err := f.StartKip(ctx, n.Cells, framework.KipOptions{
		NodeName: n.NodeName, Plugin: n.Plugin, BinDir: n.BinDir, Log: n.Log, ClusterID: "scale-" + n.NodeName,
		LightCells: true, CellNetwork: "loopback",
		// kip's default, not the e2e runs' 2 s: every Running pod's
		// projected kube-root-ca.crt is read again at this interval.
		VolumeRefreshInterval: time.Minute,
		// kip's own keep-alive: pings are the largest idle cost.
		AgentKeepalive: 30 * time.Second, AgentKeepaliveTimeout: 15 * time.Second,
		Profiling: n.ProfileDir != "",
		Env:       n.Env,
	})
	if err != nil {
		return fmt.Errorf("starting kip: %w", err)
	}
	n.k = k
	if sim := k.Sim(); sim != nil {
		sim.SetBootDelay(0)
	}
	return nil
}

// PID is the kip process's.
func (n *KipNode) PID() int { return n.k.PID() }

// Exited is closed when kip has exited.
func (n *KipNode) Exited() <-chan struct{} { return n.k.Exited() }

// Stop stops kip, its plugin, its light cells and the simulator.
func (n *KipNode) Stop() error {
	if n.k != nil {
		n.k.Stop()
	}
	return nil
}

// LogTail is the last lines of kip's log.
func (n *KipNode) LogTail(lines int) string {
	if n.k == nil {
		return ""
	}
	return n.k.LogTail(lines)
}

// pluginCPU is the counter of the plugin process's CPU seconds.
const pluginCPU = "plugin process CPU seconds"

// Counters reads kip's admin /metrics: kip_plugin_calls_total (in all
// and by method) and kip_api_requests_total; behind the simulator, the
// cloud API calls it served (CloudCalls, in all and by action); and the
// plugin process's CPU seconds.
func (n *KipNode) Counters(ctx context.Context) (map[string]float64, error) {
	resp, err := n.k.AdminGet(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading kip's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading kip's metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading kip's metrics: %s", resp.Status)
	}
	out, err := CounterSums(string(body), map[string]string{PluginCalls: "method", "kip_api_requests_total": ""})
	if err != nil {
		return nil, err
	}
	if sim := n.k.Sim(); sim != nil {
		out[CloudCalls] = 0
		for action, calls := range sim.Calls() {
			out[CloudCalls] += float64(calls)
			out[CloudCalls+"{action="+action+"}"] = float64(calls)
		}
	}
	if pid := pluginPID(n.k.PID()); pid != 0 {
		if u, err := ReadUsage(pid); err == nil {
			out[pluginCPU] = u.CPU.Seconds()
			n.mu.Lock()
			n.pluginPeakRSS = max(n.pluginPeakRSS, u.PeakRSS)
			n.mu.Unlock()
		}
	}
	return out, nil
}

// PluginPeakRSS is the plugin process's peak RSS (VmHWM) at the last
// Counters.
func (n *KipNode) PluginPeakRSS() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pluginPeakRSS
}

// pluginPID is kip's child process kip-plugin-*, or 0. A task's children
// file lists the children that thread started: every thread of kip is
// read.
func pluginPID(kip int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", kip))
	var children []string
	for _, task := range tasks {
		if data, err := os.ReadFile(task); err == nil {
			children = append(children, strings.Fields(string(data))...)
		}
	}
	for _, field := range children {
		pid, err := strconv.Atoi(field)
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.HasPrefix(string(comm), "kip-plugin") {
			return pid
		}
	}
	return 0
}

// SaveProfiles writes kip's heap profile (heap-<phase>.pb.gz, for go tool
// pprof, after a garbage collection), its goroutines
// (goroutines-<phase>.txt) and its metrics (metrics-<phase>.txt: the Go
// runtime's memory by class, stacks included) into ProfileDir; nothing
// without one.
func (n *KipNode) SaveProfiles(ctx context.Context, phase string) error {
	if n.ProfileDir == "" {
		return nil
	}
	if err := os.MkdirAll(n.ProfileDir, 0o755); err != nil {
		return fmt.Errorf("saving kip's profiles: %w", err)
	}
	for file, path := range map[string]string{
		"heap-" + phase + ".pb.gz":     "/debug/pprof/heap?gc=1",
		"goroutines-" + phase + ".txt": "/debug/pprof/goroutine?debug=1",
		"metrics-" + phase + ".txt":    "/metrics", // the Go runtime's memory by class (go_memstats_*)
	} {
		if err := n.saveProfile(ctx, path, filepath.Join(n.ProfileDir, file)); err != nil {
			return fmt.Errorf("saving kip's profiles: %w", err)
		}
	}
	return nil
}

// SaveCPUProfile writes kip's CPU profile over the next d
// (cpu-<phase>.pb.gz) into ProfileDir; without one it only waits d.
func (n *KipNode) SaveCPUProfile(ctx context.Context, d time.Duration, phase string) error {
	if n.ProfileDir == "" {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := os.MkdirAll(n.ProfileDir, 0o755); err != nil {
		return fmt.Errorf("saving kip's CPU profile: %w", err)
	}
	path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds()))
	if err := n.saveProfile(ctx, path, filepath.Join(n.ProfileDir, "cpu-"+phase+".pb.gz")); err != nil {
		return fmt.Errorf("saving kip's CPU profile: %w", err)
	}
	return nil
}

func (n *KipNode) saveProfile(ctx context.Context, path, file string) error {
	resp, err := n.k.AdminGet(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}
