package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// An instance type's CPU and memory become the limits of a cgroup,
// kip/<cellID> under the cgroup root, in the cpu and memory hierarchies of
// cgroup v1 or in the unified hierarchy of cgroup v2 (used when
// <root>/cgroup.controllers exists). It holds two groups: the agent runs
// in kip/<cellID>/agent, and the pod in kip/<cellID>/pod, which kip-cell
// makes (its --cgroup-parent, cell/runtime.PlanPodCgroup) with the cell's
// memory less the agent's reservation as its limit, and makes the
// containers' groups in. So the type's size bounds the pod as an
// instance's does, and a pod that exhausts its memory is OOM-killed within
// its own group, never the agent (issue 29: the kernel killed the agent,
// which shared the pod's group). Terminate removes the tree, and the
// groups runc made under the same path in the other v1 hierarchies.
// Without write access to the cgroup tree (not root) the cell runs
// without limits and says so in its StateReason: a local plugin that
// refused to launch there would be useless on a laptop.

// defaultCgroupRoot is where cgroup file systems are mounted.
const defaultCgroupRoot = "/sys/fs/cgroup"

// cfsPeriod is the CFS period in microseconds; the quota is milli-CPU ×
// 100, so 1000 milli-CPU is one full CPU per period.
const cfsPeriod = 100000

// defaultCgroupParent is the group under which every cell's group is created.
const defaultCgroupParent = "kip"

// createCgroups creates the cell's cgroup(s) and writes the limits. It
// returns the directories created, for joinCgroups and removeCgroups. On
// error it leaves nothing behind.
func createCgroups(root, group, cellID string, milliCPU, memoryBytes int64) (dirs []string, err error) {
	defer func() {
		if err != nil {
			_ = removeCgroups(dirs)
			dirs = nil
		}
	}()
	quota := strconv.FormatInt(milliCPU*cfsPeriod/1000, 10)
	memory := strconv.FormatInt(memoryBytes, 10)

	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		// cgroup v2: a controller is usable in a group only if every
		// ancestor enables it for its children.
		parent := filepath.Join(root, group)
		if err := enableControllers(root); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, err
		}
		if err := enableControllers(parent); err != nil {
			return nil, err
		}
		dir := filepath.Join(parent, cellID)
		if err := mkdirCgroup(dir); err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
		if err := writeFiles(dir, map[string]string{
			"cpu.max":    quota + " " + strconv.Itoa(cfsPeriod),
			"memory.max": memory,
		}); err != nil {
			return dirs, err
		}
		// The agent runs in a leaf of its own: a v2 group that has
		// processes cannot enable controllers for children, and the
		// pod's group is made beside it (by the agent).
		if err := enableControllers(dir); err != nil {
			return dirs, err
		}
		return dirs, mkdirCgroup(filepath.Join(dir, agentCgroup))
	}

	// cgroup v1: one group per hierarchy.
	cpu := filepath.Join(root, "cpu", group, cellID)
	if err := mkdirCgroup(cpu); err != nil {
		return nil, err
	}
	dirs = append(dirs, cpu)
	if err := writeFiles(cpu, map[string]string{
		"cpu.cfs_period_us": strconv.Itoa(cfsPeriod),
		"cpu.cfs_quota_us":  quota,
	}); err != nil {
		return dirs, err
	}
	mem := filepath.Join(root, "memory", group, cellID)
	if err := mkdirCgroup(mem); err != nil {
		return dirs, err
	}
	dirs = append(dirs, mem)
	if err := writeFiles(mem, map[string]string{"memory.limit_in_bytes": memory}); err != nil {
		return dirs, err
	}
	// The agent's group beside the pod's, in both hierarchies.
	for _, dir := range dirs {
		if err := mkdirCgroup(filepath.Join(dir, agentCgroup)); err != nil {
			return dirs, err
		}
	}
	return dirs, nil
}

// mkdirCgroup creates a cgroup and its parents; an existing one (from an
// interrupted launch) is reused.
func mkdirCgroup(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating cgroup: %w", err)
	}
	return nil
}

// enableControllers turns on the cpu and memory controllers for the
// children of the v2 group dir.
func enableControllers(dir string) error {
	return writeFiles(dir, map[string]string{"cgroup.subtree_control": "+cpu +memory"})
}

// writeFiles writes each value to its file in dir. Order does not matter
// for the files written together here.
func writeFiles(dir string, files map[string]string) error {
	for name, value := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
			return fmt.Errorf("writing cgroup limit: %w", err)
		}
	}
	return nil
}

// agentCgroup is the group of a cell's the agent runs in; podCgroup the
// one its pod's containers are made in (by the agent: kip-cell's
// --cgroup-parent).
const (
	agentCgroup = "agent"
	podCgroup   = "pod"
)

// joinCgroups moves process pid (all its threads) into the groups' agent
// group, which it makes when a cell launched by an earlier plugin has
// none (its agent ran in the cell's group, cgroup v1).
func joinCgroups(dirs []string, pid int) error {
	for _, dir := range dirs {
		dir = filepath.Join(dir, agentCgroup)
		if err := mkdirCgroup(dir); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("moving agent into cgroup: %w", err)
		}
	}
	return nil
}

// removeCgroups removes the groups. A group can only be removed once it
// has no processes; whatever the agent left behind in it is killed first,
// since the cgroup is the one complete list of a cell's processes.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, dir := range dirs {
		if err := removeCgroupTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes dir and the groups below it, deepest first: the
// agent's leaf (v2) and the groups of containers the agent left.
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return removeCgroup(dir)
}

// leftCgroups are the cell's groups that remain once its own are removed:
// those in the other v1 hierarchies (pids, devices, freezer, ...), which
// runc makes for the containers under the cell's path and which outlive
// them; cgroup v2 has none.
func leftCgroups(root, group, cellID string) []string {
	left, _ := filepath.Glob(filepath.Join(root, "*", group, cellID))
	return left
}

func removeCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s: %w", dir, err)
		}
		killCgroup(dir)
		time.Sleep(20 * time.Millisecond)
	}
}

// killCgroup sends SIGKILL to every process in the group.
func killCgroup(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
