package runtime

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeTree writes files (path under root: content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads every file under root but cgroup.controllers.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
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
	return got
}

// TestPodCgroupLayout: the pod's group is made beside the agent's in the
// cell's, limited to the cell's memory less the agent's reservation; on
// cgroup v2 the agent's group gets the reservation as memory.min and
// memory.low; on a machine that is the cell (no limit above), the
// machine's memory is the cell's.
func TestPodCgroupLayout(t *testing.T) {
	const (
		cell    = 512 << 20
		machine = 8 << 30
		agent   = DefaultAgentMemory
	)
	mib := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, tc := range []struct {
		name        string
		files       map[string]string // the root before
		group, self string            // the pod's group, the agent's /proc/self/cgroup
		agentMemory int64
		wantCell    int64
		wantFiles   map[string]string // the root after
		wantProtect bool
	}{
		{
			name:  "v1 local cell",
			files: map[string]string{"memory/kip/c1/memory.limit_in_bytes": mib(cell), "memory/kip/c1/agent/cgroup.procs": "7"},
			group: "/kip/c1/pod", self: "4:memory:/kip/c1/agent\n0::/\n", agentMemory: agent, wantCell: cell,
			wantFiles: map[string]string{
				"memory/kip/c1/memory.limit_in_bytes":     mib(cell),
				"memory/kip/c1/agent/cgroup.procs":        "7",
				"memory/kip/c1/pod/memory.limit_in_bytes": mib(cell - agent),
			},
		},
		{
			name: "v2 local cell",
			files: map[string]string{"cgroup.controllers": "cpu memory", "kip/c1/memory.max": mib(cell), "kip/c1/cgroup.subtree_control": "",
				"kip/c1/agent/cgroup.procs": "7"},
			group: "/kip/c1/pod", self: "0::/kip/c1/agent\n", agentMemory: agent, wantCell: cell, wantProtect: true,
			wantFiles: map[string]string{
				"cgroup.subtree_control":        "+cpu +memory",
				"kip/cgroup.subtree_control":    "+cpu +memory",
				"kip/c1/cgroup.subtree_control": "+cpu +memory",
				"kip/c1/memory.max":             mib(cell),
				"kip/c1/agent/cgroup.procs":     "7",
				"kip/c1/agent/memory.min":       mib(agent),
				"kip/c1/agent/memory.low":       mib(agent),
				"kip/c1/pod/memory.max":         mib(cell - agent),
			},
		},
		{
			name:  "v2 cloud instance: the agent in its systemd unit",
			files: map[string]string{"cgroup.controllers": "cpu memory", "system.slice/kip-cell.service/cgroup.procs": "7"},
			group: "/kip-c1", self: "0::/system.slice/kip-cell.service\n", agentMemory: 256 << 20, wantCell: machine,
			wantFiles: map[string]string{
				"cgroup.subtree_control":                     "+cpu +memory",
				"system.slice/kip-cell.service/cgroup.procs": "7",
				"kip-c1/memory.max":                          mib(machine - 256<<20),
			},
		},
		{
			name:  "v1 cloud instance",
			group: "/kip-c1", self: "4:memory:/system.slice/kip-cell.service\n", agentMemory: agent, wantCell: machine,
			wantFiles: map[string]string{"memory/kip-c1/memory.limit_in_bytes": mib(machine - agent)},
		},
		{
			name:  "a small cell keeps half for its pod",
			files: map[string]string{"memory/kip/c1/memory.limit_in_bytes": mib(64 << 20)},
			group: "/kip/c1/pod", agentMemory: agent, wantCell: 64 << 20,
			wantFiles: map[string]string{
				"memory/kip/c1/memory.limit_in_bytes":     mib(64 << 20),
				"memory/kip/c1/pod/memory.limit_in_bytes": mib(32 << 20),
			},
		},
		{
			name: "an agent started again plans the same limit",
			files: map[string]string{"memory/kip/c1/memory.limit_in_bytes": mib(cell),
				"memory/kip/c1/pod/memory.limit_in_bytes": mib(cell - agent)},
			group: "/kip/c1/pod", agentMemory: agent, wantCell: cell,
			wantFiles: map[string]string{
				"memory/kip/c1/memory.limit_in_bytes":     mib(cell),
				"memory/kip/c1/pod/memory.limit_in_bytes": mib(cell - agent),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tc.files)
			pc, err := planPodCgroup(root, tc.group, tc.agentMemory, machine)
			if err != nil {
				t.Fatal(err)
			}
			if pc.CellMemory != tc.wantCell || pc.Limit != tc.wantCell-agentReservation(tc.wantCell, tc.agentMemory) {
				t.Errorf("planned %+v, want the cell's memory %d", pc, tc.wantCell)
			}
			protected, err := pc.make(0, tc.self)
			if err != nil {
				t.Fatal(err)
			}
			if protected != tc.wantProtect {
				t.Errorf("agent protected = %v, want %v", protected, tc.wantProtect)
			}
			if got := readTree(t, root); !maps.Equal(got, tc.wantFiles) {
				t.Errorf("cgroup files:\n%q\nwant\n%q", got, tc.wantFiles)
			}
		})
	}
}

// The pod's group gets the pod's own limit when it is less than the
// cell's part, never more.
func TestPodCgroupPodLimit(t *testing.T) {
	const cell, part = 512 << 20, 448 << 20
	for _, tc := range []struct {
		name     string
		v2       bool
		podLimit int64
		want     int64
	}{
		{"v1 the pod's", false, 96 << 20, 96 << 20},
		{"v1 none", false, 0, part},
		{"v1 more than the cell's part", false, 1 << 30, part},
		{"v2 the pod's", true, 96 << 20, 96 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			file := "memory/kip/c1/pod/memory.limit_in_bytes"
			if tc.v2 {
				writeTree(t, root, map[string]string{"cgroup.controllers": "memory"})
				file = "kip/c1/pod/memory.max"
			}
			pc := PodCgroup{Path: "/kip/c1/pod", CellMemory: cell, Limit: part, root: root}
			if _, err := pc.make(tc.podLimit, "0::/elsewhere\n"); err != nil {
				t.Fatal(err)
			}
			if got := readTree(t, root)[file]; got != strconv.FormatInt(tc.want, 10) {
				t.Errorf("%s = %s, want %d", file, got, tc.want)
			}
		})
	}
}

func TestPodCgroupRefusesTheRoot(t *testing.T) {
	if _, err := planPodCgroup(t.TempDir(), "/", DefaultAgentMemory, 1<<30); err == nil {
		t.Error("the root cgroup was planned as the pod's")
	}
}

// The OOM kill counter of a container's group, as cgroup v1 and v2 keep
// it.
func TestOOMKills(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"v1", map[string]string{"memory/kip/c1/pod/ctr/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"}, 2},
		{"v1 none", map[string]string{"memory/kip/c1/pod/ctr/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}, 0},
		{"v2", map[string]string{"cgroup.controllers": "memory", "kip/c1/pod/ctr/memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"}, 1},
		{"no such group", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tc.files)
			if got := oomKills(root, "/kip/c1/pod/ctr"); got != tc.want {
				t.Errorf("oomKills = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMemTotal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	writeTree(t, filepath.Dir(p), map[string]string{"meminfo": "MemTotal:        8048576 kB\nMemFree:         1000 kB\n"})
	if got, err := memTotal(p); err != nil || got != 8048576<<10 {
		t.Errorf("memTotal = %d, %v; want %d", got, err, 8048576<<10)
	}
}

// The lowest OOM score adjustment a container gets: any with
// CAP_SYS_RESOURCE, else the agent's own.
func TestOOMScoreAdjFloor(t *testing.T) {
	for _, tc := range []struct {
		name, status, adj string
		want              int
	}{
		{"root with every capability", "Name:\tkip-cell\nCapEff:\t000001ffffffffff\n", "-998\n", -1000},
		{"without CAP_SYS_RESOURCE", "CapEff:\t000001fffeffffff\n", "0\n", 0},
		{"without it, lowered before", "CapEff:\t0000000000000000\n", "-500\n", -500},
		{"unreadable", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oomScoreAdjFloor(tc.status, tc.adj); got != tc.want {
				t.Errorf("oomScoreAdjFloor = %d, want %d", got, tc.want)
			}
		})
	}
}
