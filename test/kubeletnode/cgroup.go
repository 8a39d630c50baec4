package kubeletnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is where these machines mount their cgroup v1 hierarchies,
// one directory each (the unified one is skipped: nothing is attached).
const cgroupMount = "/sys/fs/cgroup"

// hierarchies returns the v1 hierarchies under cgroupMount (the unified
// one too when all is true: runc mirrors a container's cgroup there).
func hierarchies(all bool) []string {
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && (all || e.Name() != "unified") {
			out = append(out, filepath.Join(cgroupMount, e.Name()))
		}
	}
	return out
}

// makeCgroupRoot creates root in every hierarchy (the kubelet checks that
// its cgroupRoot exists), with the cpuset hierarchy's CPUs and memory nodes
// of its parent, which a new cpuset does not inherit.
func makeCgroupRoot(root string) error {
	for _, h := range hierarchies(false) {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil { //nolint:gosec // G703: dir is the cgroup Start names, /kipnode-<hex>

				return fmt.Errorf("setting %s of cgroup %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// removeCgroupRoot kills every process in root's cgroups (the node's
// pods: a shim's death leaves its container running), waits until they
// are gone, and removes root and every cgroup below it, deepest first, in
// every hierarchy.
func removeCgroupRoot(root string) {
	if root == "" || root == "/" {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for killAll(root) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, h := range hierarchies(true) {
		dirs := cgroupsUnder(filepath.Join(h, root))
		sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
		for _, d := range dirs {
			_ = os.Remove(d)
		}
	}
}

// killAll sends SIGKILL to every process in a cgroup under root and
// returns how many it found.
func killAll(root string) int {
	found := 0
	for _, h := range hierarchies(true) {
		for _, d := range cgroupsUnder(filepath.Join(h, root)) {
			data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					found++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	return found
}

func cgroupsUnder(dir string) []string {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}
