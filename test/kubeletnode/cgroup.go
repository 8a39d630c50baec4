package kubeletnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cgroupMount is where these machines mount their cgroup v1 hierarchies,
// one directory each (the unified one is skipped: nothing is attached).
const cgroupMount = "/sys/fs/cgroup"

// hierarchies returns the v1 hierarchies under cgroupMount.
func hierarchies() []string {
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			out = append(out, filepath.Join(cgroupMount, e.Name()))
		}
	}
	return out
}

// makeCgroupRoot creates root in every hierarchy (the kubelet checks that
// its cgroupRoot exists), with the cpuset hierarchy's CPUs and memory nodes
// of its parent, which a new cpuset does not inherit.
func makeCgroupRoot(root string) error {
	for _, h := range hierarchies() {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("setting %s of cgroup %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// removeCgroupRoot removes root and every cgroup below it, deepest first,
// in every hierarchy; a cgroup that still holds a process stays.
func removeCgroupRoot(root string) {
	if root == "" || root == "/" {
		return
	}
	for _, h := range hierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
		for _, d := range dirs {
			_ = os.Remove(d)
		}
	}
}
