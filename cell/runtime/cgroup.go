package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// The cell's memory is shared by its agent and its pod, which live in
// separate cgroups so that the pod cannot take the agent's part:
//
//	<cell>        the cell's limits (the instance's size), when it has any
//	<cell>/agent  the agent, with a reservation of its own
//	<cell>/pod    the pod: PodCgroup.Limit, the cell's memory less the
//	              agent's reservation; the containers' groups are made
//	              in it, each with its own limits as runc sets them
//
// A pod that exhausts its group's memory is OOM-killed within that group:
// the kernel chooses its victim among the pod's processes only, and the
// agent, in the sibling group, reports OOMKilled. The agent's reservation
// is the part of the cell's memory the pod's limit leaves out; on cgroup
// v2 the agent's group also gets it as memory.min and memory.low, so
// that when the cell's memory runs short its pages are not reclaimed in
// favour of the pod's (when the machine's does, only as far as every
// ancestor has a protection too: a boot recipe's business,
// docs/plugins.md). On a cloud instance the cell is the machine: the
// pod's group is limited to the machine's memory less the reservation.

// DefaultAgentMemory is the memory a cell keeps for its agent out of the
// pod's reach, unless kip-cell's --agent-memory-mib says otherwise: what
// the agent's resident set stays within while it serves a pod, its logs
// going to files, not its heap (about 35 MB whatever the pod prints,
// docs/benchmarks.md). A cell's reservation is at most half its memory
// (agentReservation).
const DefaultAgentMemory = 64 << 20

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// PodCgroup is the pod's cgroup, planned (PlanPodCgroup) and then made
// (Make).
type PodCgroup struct {
	// Path is the group's path from the root of the hierarchy.
	Path string
	// CellMemory is the memory the cell has: the lowest memory limit of
	// the group's ancestors, else the machine's memory.
	CellMemory int64
	// Limit is the group's memory limit: CellMemory less the agent's
	// reservation.
	Limit int64
	root  string
}

// PlanPodCgroup plans the pod's cgroup group (a path from the root of
// the cgroup hierarchy): its memory limit is the cell's less the agent's
// reservation of agentMemory bytes (at most half of the cell's). It reads
// and changes nothing of the group itself, so that an agent started again
// plans the same limit: the group's own limit is not among the ancestors'
// it starts from.
func PlanPodCgroup(group string, agentMemory int64) (PodCgroup, error) {
	total, err := memTotal("/proc/meminfo")
	if err != nil {
		return PodCgroup{}, err
	}
	return planPodCgroup(CgroupRoot, group, agentMemory, total)
}

// planPodCgroup is PlanPodCgroup under root, with the machine's memory
// given.
func planPodCgroup(root, group string, agentMemory, machineMemory int64) (PodCgroup, error) {
	group = path.Clean("/" + group)
	if group == "/" {
		return PodCgroup{}, errors.New("planning the pod's cgroup: the root cgroup cannot be the pod's")
	}
	pc := PodCgroup{Path: group, CellMemory: min(machineMemory, ancestorsMemoryLimit(root, path.Dir(group))), root: root}
	pc.Limit = pc.CellMemory - agentReservation(pc.CellMemory, agentMemory)
	return pc, nil
}

// Make makes the group if it is not there, in the memory hierarchy of
// cgroup v1 or in v2's unified one (with the cpu and memory controllers
// enabled on the way), and writes its memory limit: Limit, or podLimit,
// the pod's own (its containers' limits together), when that is less (0:
// none). On cgroup v2, an agent whose own group is the pod's sibling (the
// cell's group holds both) gets the reservation there as memory.min and
// memory.low; protected says whether it did. It is idempotent.
func (pc PodCgroup) Make(podLimit int64) (protected bool, err error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false, fmt.Errorf("reading the agent's cgroup: %w", err)
	}
	return pc.make(podLimit, string(self))
}

// make is Make with the agent's /proc/self/cgroup given.
func (pc PodCgroup) make(podLimit int64, selfCgroup string) (protected bool, err error) {
	limit := pc.Limit
	if podLimit > 0 {
		limit = min(limit, podLimit)
	}
	value := strconv.FormatInt(limit, 10)
	if !isV2(pc.root) {
		dir := filepath.Join(pc.root, "memory", pc.Path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, fmt.Errorf("creating the pod's cgroup: %w", err)
		}
		return false, writeCgroupFile(dir, "memory.limit_in_bytes", value)
	}
	// cgroup v2: a controller is usable in a group only if each of its
	// ancestors enables it for its children.
	dir := pc.root
	for _, p := range strings.Split(strings.TrimPrefix(pc.Path, "/"), "/") {
		if err := writeCgroupFile(dir, "cgroup.subtree_control", "+cpu +memory"); err != nil {
			return false, err
		}
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("creating the pod's cgroup: %w", err)
		}
	}
	if err := writeCgroupFile(dir, "memory.max", value); err != nil {
		return false, err
	}
	agent, ok := v2Path(selfCgroup)
	if !ok || agent == "/" || agent == pc.Path || path.Dir(agent) != path.Dir(pc.Path) {
		return false, nil // the agent's group is not the cell's to shape
	}
	reserve := strconv.FormatInt(pc.CellMemory-pc.Limit, 10)
	for _, name := range []string{"memory.min", "memory.low"} {
		if err := writeCgroupFile(filepath.Join(pc.root, agent), name, reserve); err != nil {
			return false, err
		}
	}
	return true, nil
}

// agentReservation is the part of a cell's memory kept for its agent:
// agentMemory, at most half the cell's.
func agentReservation(cellMemory, agentMemory int64) int64 {
	return max(0, min(agentMemory, cellMemory/2))
}

// isV2 says whether root holds cgroup v2's unified hierarchy.
func isV2(root string) bool {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return err == nil
}

// v2Path is the cgroup v2 path in a /proc/<pid>/cgroup ("0::/path").
func v2Path(procCgroup string) (string, bool) {
	for line := range strings.SplitSeq(procCgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// ancestorsMemoryLimit is the lowest memory limit of group (a path from
// the root of the hierarchy) and its ancestors: memory.max in cgroup v2,
// memory.limit_in_bytes of the memory hierarchy in v1. MaxInt64 when none
// has one (or none exists).
func ancestorsMemoryLimit(root, group string) int64 {
	lowest := int64(math.MaxInt64)
	for g := path.Clean("/" + group); g != "/"; g = path.Dir(g) {
		file := filepath.Join(root, "memory", g, "memory.limit_in_bytes")
		if isV2(root) {
			file = filepath.Join(root, g, "memory.max")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		// "max" (v2) does not parse; v1's unlimited is close to MaxInt64.
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			lowest = min(lowest, v)
		}
	}
	return lowest
}

// memTotal is MemTotal of a /proc/meminfo, in bytes.
func memTotal(meminfo string) (int64, error) {
	b, err := os.ReadFile(meminfo)
	if err != nil {
		return 0, fmt.Errorf("reading the machine's memory: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading the machine's memory: %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("reading the machine's memory: no MemTotal in %s", meminfo)
}

// MachineMemory is the machine's memory (MemTotal), for a cell that is
// the machine and has no cgroup of its own.
func MachineMemory() (int64, error) { return memTotal("/proc/meminfo") }

func writeCgroupFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("writing cgroup file %s: %w", name, err)
	}
	return nil
}

// cgroupCPUMillis is the CPU quota in millicores that bounds cgroup (a
// path from the root of the hierarchy): the lowest of its own and its
// ancestors', read under root (cpu.max in cgroup v2, cpu.cfs_quota_us and
// cpu.cfs_period_us of the cpu hierarchy in v1, where a group without a
// quota has its parent's). 0 when none has one, cgroup is empty, or none
// can be read.
func cgroupCPUMillis(root, cgroup string) int64 {
	if cgroup == "" {
		return 0
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	var lowest int64
	for g := path.Clean("/" + cgroup); g != "/"; g = path.Dir(g) {
		var quota, period string
		if f := strings.Fields(read(path.Join(g, "cpu.max"))); len(f) == 2 {
			quota, period = f[0], f[1]
		} else {
			quota, period = read(path.Join("cpu", g, "cpu.cfs_quota_us")), read(path.Join("cpu", g, "cpu.cfs_period_us"))
		}
		q, err1 := strconv.ParseInt(quota, 10, 64)
		p, err2 := strconv.ParseInt(period, 10, 64)
		if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
			continue // "max", -1: no quota of its own
		}
		if m := q * 1000 / p; lowest == 0 || m < lowest {
			lowest = m
		}
	}
	return lowest
}

// oomKills is how many processes of cgroup (a path from the root of the
// hierarchy) the kernel's OOM killer killed: oom_kill of memory.events in
// cgroup v2 (its descendants' included), of memory.oom_control in v1. 0
// when it cannot be read.
func oomKills(root, cgroup string) int {
	file := filepath.Join(root, "memory", cgroup, "memory.oom_control")
	if isV2(root) {
		file = filepath.Join(root, cgroup, "memory.events")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v
		}
	}
	return 0
}

// capSysResource is CAP_SYS_RESOURCE's bit in a capability set.
const capSysResource = 24

// oomScoreAdjFloor is the lowest OOM score adjustment the agent can give
// a container: any, with CAP_SYS_RESOURCE (which lowering a score
// needs); else its own, as containerd's restrict_oom_score_adj does
// (a sandbox without the capability, where runc would fail to create a
// container asking for less). status and scoreAdj are the agent's
// /proc/self/status and oom_score_adj.
func oomScoreAdjFloor(status, scoreAdj string) int {
	for line := range strings.SplitSeq(status, "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			if caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64); err == nil && caps&(1<<capSysResource) != 0 {
				return -1000
			}
		}
	}
	own, err := strconv.Atoi(strings.TrimSpace(scoreAdj))
	if err != nil {
		return 0
	}
	return own
}

// OOMScoreAdjFloor is oomScoreAdjFloor of the calling process.
func OOMScoreAdjFloor() int {
	status, _ := os.ReadFile("/proc/self/status")
	adj, _ := os.ReadFile("/proc/self/oom_score_adj")
	return oomScoreAdjFloor(string(status), string(adj))
}

// SetOOMScoreAdj sets the OOM score adjustment of process pid (0: the
// calling process): -1000 to 1000, lower making the kernel's OOM killer
// choose it later. Lowering it needs CAP_SYS_RESOURCE.
func SetOOMScoreAdj(pid, adj int) error {
	p := "self"
	if pid != 0 {
		p = strconv.Itoa(pid)
	}
	if err := os.WriteFile(filepath.Join("/proc", p, "oom_score_adj"), []byte(strconv.Itoa(adj)), 0o644); err != nil {
		return fmt.Errorf("setting oom_score_adj: %w", err)
	}
	return nil
}
