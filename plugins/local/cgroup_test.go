package local

import (
	"maps"
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
	if want := "/" + testCgroupParent + "/cell-cg"; r.CgroupPath != want {
		t.Errorf("record's cgroup path %q, want %q", r.CgroupPath, want)
	}
	// The agent makes its pod's group inside the cell's, beside its own,
	// and the containers' groups in it.
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.PID), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	if want := EnvCellCgroupParent + "=/" + testCgroupParent + "/cell-cg/pod"; !strings.Contains("\x00"+string(env)+"\x00", "\x00"+want+"\x00") {
		t.Errorf("the agent's environment lacks %s", want)
	}
	for _, dir := range r.Cgroups {
		dir = filepath.Join(dir, agentCgroup)
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains("\n"+string(data), "\n"+strconv.Itoa(r.PID)+"\n") {
			t.Errorf("agent %d is not in %s (procs %q)", r.PID, dir, data)
		}
	}
}

// TestCgroupLayout: on a fake cgroup root of each version, the cell's
// group gets the type's limits and an agent group inside it, which the
// agent joins; the pod's group beside it is the agent's to make
// (kip-cell's --cgroup-parent, cell/runtime.PlanPodCgroup).
func TestCgroupLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v2   bool
		want map[string]string // file under the root: its content
	}{
		{"v1", false, map[string]string{
			"cpu/kip/cell-l/cpu.cfs_period_us":        "100000",
			"cpu/kip/cell-l/cpu.cfs_quota_us":         "50000",
			"cpu/kip/cell-l/agent/cgroup.procs":       "4242",
			"memory/kip/cell-l/memory.limit_in_bytes": strconv.Itoa(512 << 20),
			"memory/kip/cell-l/agent/cgroup.procs":    "4242",
		}},
		{"v2", true, map[string]string{
			"cgroup.subtree_control":            "+cpu +memory",
			"kip/cgroup.subtree_control":        "+cpu +memory",
			"kip/cell-l/cpu.max":                "50000 100000",
			"kip/cell-l/memory.max":             strconv.Itoa(512 << 20),
			"kip/cell-l/cgroup.subtree_control": "+cpu +memory",
			"kip/cell-l/agent/cgroup.procs":     "4242",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if tc.v2 {
				// What makes a root v2's; a real group has the file too.
				for _, dir := range []string{root, filepath.Join(root, "kip", "cell-l")} {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu memory"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			dirs, err := createCgroups(root, "kip", "cell-l", 500, 512<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := joinCgroups(dirs, 4242); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() == "cgroup.controllers" {
					return err
				}
				b, err := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				got[rel] = string(b)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("cgroup files:\n%q\nwant\n%q", got, tc.want)
			}
		})
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

// TestTerminateRemovesTheCellsCgroupTree: the groups the agent's runtime
// made inside the cell's (a container's, in every v1 hierarchy, which runc
// fills) go with the cell, as does the cell's own: nothing of the cell is
// left in any hierarchy.
func TestTerminateRemovesTheCellsCgroupTree(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root")
	}
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-tree")
	r, err := readRecord(e.stateDir(), "cell-tree")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cgroups) == 0 {
		t.Fatalf("no cgroups: %s", r.LimitsNotEnforced)
	}
	// What runc makes for a container of the cell: its group below the
	// cell's path, in the cell's hierarchies and (v1) in one it did not
	// create.
	made := []string{}
	for _, dir := range r.Cgroups {
		made = append(made, filepath.Join(dir, "ctr-1"))
	}
	if _, err := os.Stat(filepath.Join(defaultCgroupRoot, "cgroup.controllers")); err != nil {
		made = append(made, filepath.Join(defaultCgroupRoot, "pids", testCgroupParent, "cell-tree", "ctr-1"))
	}
	for _, dir := range made {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(defaultCgroupRoot, "*", testCgroupParent, "cell-tree"))
	if _, err := os.Stat(filepath.Join(defaultCgroupRoot, testCgroupParent, "cell-tree")); err == nil {
		left = append(left, filepath.Join(defaultCgroupRoot, testCgroupParent, "cell-tree"))
	}
	if len(left) > 0 {
		t.Errorf("the cell's cgroups are left after Terminate: %q", left)
	}
}
