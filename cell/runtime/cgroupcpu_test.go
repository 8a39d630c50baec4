package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

// The CPU quota in millicores that bounds a cgroup, as cgroup v2 and v1
// write it: its own or an ancestor's.
func TestCgroupCPUMillis(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		cgroup string
		want   int64
	}{
		{"v2 quota", map[string]string{"kip/cell/cpu.max": "50000 100000\n"}, "/kip/cell", 500},
		{"v2 no quota", map[string]string{"kip/cell/cpu.max": "max 100000\n"}, "/kip/cell", 0},
		{"v1 quota", map[string]string{"cpu/kip/cell/cpu.cfs_quota_us": "125000\n", "cpu/kip/cell/cpu.cfs_period_us": "100000\n"}, "/kip/cell", 1250},
		{"v1 no quota", map[string]string{"cpu/kip/cell/cpu.cfs_quota_us": "-1\n", "cpu/kip/cell/cpu.cfs_period_us": "100000\n"}, "/kip/cell", 0},
		{"no such cgroup", nil, "/kip/cell", 0},
		// The pod's group has no quota of its own: the cell's bounds it
		// (v1 gives a group without one its parent's).
		{"v2 the parent's", map[string]string{"kip/cell/cpu.max": "50000 100000\n", "kip/cell/pod/cpu.max": "max 100000\n"}, "/kip/cell/pod", 500},
		{"v1 the parent's", map[string]string{"cpu/kip/cell/cpu.cfs_quota_us": "50000\n", "cpu/kip/cell/cpu.cfs_period_us": "100000\n",
			"cpu/kip/cell/pod/cpu.cfs_quota_us": "-1\n", "cpu/kip/cell/pod/cpu.cfs_period_us": "100000\n"}, "/kip/cell/pod", 500},
		{"v1 the lowest", map[string]string{"cpu/kip/cell/cpu.cfs_quota_us": "50000\n", "cpu/kip/cell/cpu.cfs_period_us": "100000\n",
			"cpu/kip/cell/pod/cpu.cfs_quota_us": "200000\n", "cpu/kip/cell/pod/cpu.cfs_period_us": "100000\n"}, "/kip/cell/pod", 500},
		{"no cgroup parent", map[string]string{"cpu.max": "50000 100000\n"}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupCPUMillis(root, tc.cgroup); got != tc.want {
				t.Errorf("cgroupCPUMillis = %d, want %d", got, tc.want)
			}
		})
	}
}
