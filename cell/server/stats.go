package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/ephemeral"
	"github.com/kipcell/kip/cell/podnet"
	"github.com/kipcell/kip/cell/runtime"
)

// Stats implements api.Cell: the running containers' cgroup counters
// (CPU as a rate since the previous call), and unless onlyCPUAndMemory,
// the pod's network interfaces, its
// volumes, the containers' writable layers and logs, the /etc files and
// the cell's disk. A figure that cannot be read is left out and logged;
// it never fails the call.
func (s *Server) Stats(ctx context.Context, onlyCPUAndMemory bool) (*api.Stats, error) {
	tasks, resp := s.sampleContainers(ctx)
	if onlyCPUAndMemory {
		return resp, nil
	}
	for i := range resp.Containers {
		cs := &resp.Containers[i]
		if lu, ok := tasks[cs.Name].(runtime.LayerUser); ok {
			if u, err := lu.WritableLayerUsage(ctx); err != nil {
				s.log.WarnContext(ctx, "reading a container's writable layer usage", "container", cs.Name, "error", err)
			} else {
				cs.Rootfs = &api.FsStats{UsedBytes: u.Bytes, InodesUsed: u.Inodes, HasUsage: true}
			}
		}
		if s.cfg.Logs != nil {
			cs.Logs = s.dirStats(ctx, s.cfg.Logs.ContainerDir(cs.Name), false)
		}
	}
	err := podnet.Do(s.cfg.Pod.NetNS(), func() {
		var rerr error
		resp.Interfaces, rerr = readNetDev("/proc/thread-self/net/dev")
		if rerr != nil {
			s.log.WarnContext(ctx, "reading the pod's network interfaces", "error", rerr)
		}
	})
	if err != nil {
		s.log.WarnContext(ctx, "reading the pod's network interfaces", "error", err)
	}
	dirs := s.cfg.Pod.VolumeDirs()
	for _, name := range slices.Sorted(maps.Keys(dirs)) {
		resp.Volumes = append(resp.Volumes, api.VolumeStats{Name: name, Fs: s.dirStats(ctx, dirs[name], true)})
	}
	if s.cfg.DiskDir != "" {
		if fsys, err := filesystemStats(s.cfg.DiskDir); err != nil {
			s.log.WarnContext(ctx, "reading the cell's disk", "error", err)
		} else {
			resp.Disk = fsys
		}
	}
	if s.cfg.EtcDir != "" {
		resp.EtcFiles = s.dirStats(ctx, s.cfg.EtcDir, false)
	}
	return resp, nil
}

// sampleContainers reads the cgroup counters of every running container
// and returns the tasks read, by container name. CPU nano-cores are the
// rate since the previous sample of the same container (the same ID: a
// restarted container starts afresh).
func (s *Server) sampleContainers(ctx context.Context) (map[string]runtime.Task, *api.Stats) {
	resp := &api.Stats{Time: time.Now()}
	tasks := s.cfg.Pod.Tasks()
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(tasks)) {
		t := tasks[name]
		m, err := t.Metrics(ctx)
		if err != nil {
			s.log.WarnContext(ctx, "reading container metrics", "container", name, "error", err)
			continue
		}
		cs := api.ContainerStats{
			Name:                    name,
			StartTime:               t.StartedAt(),
			CPUUsageCoreNanoSeconds: m.CPUUsageNanos,
			MemoryWorkingSetBytes:   m.MemoryWorkingSet,
			MemoryUsageBytes:        m.MemoryUsageBytes,
			MemoryRSSBytes:          m.MemoryRSSBytes,
			MemoryPageFaults:        m.PageFaults,
			MemoryMajorPageFaults:   m.MajorPageFaults,
		}
		if prev, ok := s.last[t.ID()]; ok && m.Time.After(prev.Time) && m.CPUUsageNanos >= prev.CPUUsageNanos {
			cs.CPUUsageNanoCores = uint64(float64(m.CPUUsageNanos-prev.CPUUsageNanos) / m.Time.Sub(prev.Time).Seconds())
			cs.CPURateKnown = true
		}
		s.last[t.ID()] = m
		seen[t.ID()] = true
		resp.Containers = append(resp.Containers, cs)
	}
	for id := range s.last {
		if !seen[id] {
			delete(s.last, id)
		}
	}
	return tasks, resp
}

// dirStats is the usage of the tree at dir and, with filesystem, the
// figures of the filesystem it is on; nil when neither can be read.
func (s *Server) dirStats(ctx context.Context, dir string, filesystem bool) *api.FsStats {
	out := &api.FsStats{}
	if filesystem {
		fsys, err := filesystemStats(dir)
		if err != nil {
			s.log.WarnContext(ctx, "reading a filesystem", "dir", dir, "error", err)
		} else {
			out = fsys
		}
	}
	u, err := ephemeral.DirUsage(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Nothing written yet (a container's logs before it starts).
		out.HasUsage = true
	case err != nil:
		s.log.WarnContext(ctx, "reading disk usage", "dir", dir, "error", err)
	default:
		out.UsedBytes, out.InodesUsed, out.HasUsage = u.Bytes, u.Inodes, true
	}
	if !out.HasFilesystem && !out.HasUsage {
		return nil
	}
	return out
}

// filesystemStats is the capacity, free space and inodes of the
// filesystem holding dir (statfs), as cAdvisor reports a filesystem.
func filesystemStats(dir string) (*api.FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bsize := uint64(st.Bsize) //nolint:gosec // G115: a block size is positive
	return &api.FsStats{
		CapacityBytes:  st.Blocks * bsize,
		AvailableBytes: st.Bavail * bsize,
		Inodes:         st.Files,
		InodesFree:     st.Ffree,
		HasFilesystem:  true,
	}, nil
}

// readNetDev reads the interfaces of /proc/<...>/net/dev, loopback left
// out: bytes and errors received and sent.
func readNetDev(path string) ([]api.InterfaceStats, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: a /proc path of the agent's own
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return parseNetDev(data)
}

// parseNetDev parses the format of /proc/net/dev: two header lines, then
// "name: " and eight received and eight sent counters per interface.
func parseNetDev(data []byte) ([]api.InterfaceStats, error) {
	var out []api.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 0; sc.Scan(); line++ {
		if line < 2 {
			continue
		}
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("parsing net/dev line %d: no interface name", line+1)
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("parsing net/dev line %d: %d counters, want 16", line+1, len(f))
		}
		var n [16]uint64
		for i := range n {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parsing net/dev line %d: %w", line+1, err)
			}
			n[i] = v
		}
		if name == "lo" {
			continue
		}
		out = append(out, api.InterfaceStats{Name: name, RxBytes: n[0], RxErrors: n[2], TxBytes: n[8], TxErrors: n[10]})
	}
	return out, sc.Err()
}
