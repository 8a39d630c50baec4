package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

func TestCgroupLimitsMatchTheType(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("writing cgroup limits needs root; TestLaunchWithoutCgroups covers the unprivileged case")
	}
	e := newTestEnv(t)
	p := e.provider()
	req := e.launchRequest("cell-cg")
	req.InstanceType = "local.small"
	resp, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Instance.StateReason != "" {
		t.Errorf("state reason %q, want none when limits are enforced", resp.Instance.StateReason)
	}
	r, err := readRecord(e.stateDir(), "cell-cg")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if _, err := os.Stat(filepath.Join(defaultCgroupRoot, "cgroup.controllers")); err == nil {
		want = map[string]string{
			filepath.Join(defaultCgroupRoot, testCgroupParent, "cell-cg", "cpu.max"):    "50000 100000",
			filepath.Join(defaultCgroupRoot, testCgroupParent, "cell-cg", "memory.max"): strconv.Itoa(512 << 20),
		}
	} else {
		want = map[string]string{
			filepath.Join(defaultCgroupRoot, "cpu", testCgroupParent, "cell-cg", "cpu.cfs_period_us"):        "100000",
			filepath.Join(defaultCgroupRoot, "cpu", testCgroupParent, "cell-cg", "cpu.cfs_quota_us"):         "50000",
			filepath.Join(defaultCgroupRoot, "memory", testCgroupParent, "cell-cg", "memory.limit_in_bytes"): strconv.Itoa(512 << 20),
		}
	}
	for path, value := range want {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if got := strings.TrimSpace(string(data)); got != value {
			t.Errorf("%s = %q, want %q", path, got, value)
		}
	}
	if len(r.Cgroups) == 0 {
		t.Fatal("record lists no cgroups")
	}
	for _, dir := range r.Cgroups {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains("\n"+string(data), "\n"+strconv.Itoa(r.PID)+"\n") {
			t.Errorf("agent %d is not in %s (procs %q)", r.PID, dir, data)
		}
	}
}

func TestLaunchWithoutCgroups(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	// A cgroup root that is a file: nothing can be created below it, as on
	// a machine where the plugin does not run as root.
	p.cgroupRoot = filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p.cgroupRoot, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	inst := e.launch(p, "cell-nolimits")
	if inst.State != pluginapi.StateRunning || !strings.HasPrefix(inst.StateReason, "limits not enforced: ") {
		t.Errorf("instance %s (%q), want running with limits not enforced", inst.State, inst.StateReason)
	}
}
