package cells

import (
	"cmp"
	"context"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
)

// statsParallel is how many cells PodStats asks at once.
const statsParallel = 64

// PodStats implements host/node.StatsProvider: it asks every running
// cell's agent for its stats, all at once (statsParallel at a time), each
// within statsTimeout, and returns them as the kubelet's summary API
// reports pods, sorted by namespace and name. A cell that does not answer
// is logged and left out; it never fails the answer.
func (m *Manager) PodStats(ctx context.Context, onlyCPUAndMemory bool) ([]statsv1alpha1.PodStats, error) {
	type source struct {
		c     *cell
		agent *cellclient.Agent
		ref   statsv1alpha1.PodReference
		start metav1.Time
	}
	var sources []source
	for _, c := range m.cells.all() {
		c.mu.Lock()
		a, start := c.agent, c.status.StartTime
		c.mu.Unlock()
		if a == nil {
			continue
		}
		s := source{c: c, agent: a, ref: statsv1alpha1.PodReference{Name: c.name, Namespace: c.namespace, UID: string(c.uid)}}
		if start != nil {
			s.start = *start
		}
		sources = append(sources, s)
	}

	out := make([]*statsv1alpha1.PodStats, len(sources))
	sem := make(chan struct{}, statsParallel)
	var wg sync.WaitGroup
	for i, s := range sources {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			cctx, cancel := context.WithTimeout(ctx, m.deps.cfg.StatsTimeout)
			defer cancel()
			resp, err := s.agent.Stats(cctx, onlyCPUAndMemory)
			if err != nil {
				if ctx.Err() == nil {
					s.c.log().WarnContext(ctx, "reading the cell's stats; its pod is left out of this answer", "error", err)
				}
				return
			}
			ps := podStats(s.ref, s.start, resp)
			out[i] = &ps
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pods := make([]statsv1alpha1.PodStats, 0, len(out))
	for _, ps := range out {
		if ps != nil {
			pods = append(pods, *ps)
		}
	}
	slices.SortFunc(pods, func(a, b statsv1alpha1.PodStats) int {
		return cmp.Or(cmp.Compare(a.PodRef.Namespace, b.PodRef.Namespace), cmp.Compare(a.PodRef.Name, b.PodRef.Name))
	})
	return pods, nil
}

// podStats is a cell's answer as the kubelet's summary reports a pod: its
// containers, the pod's CPU and memory as their sums (the cell runs the
// pod alone), its network interfaces (the first, eth0 on a cell, also
// inline as the default), its volumes, and its ephemeral storage, the
// containers' writable layers and logs, the volumes and the /etc files
// on the cell's disk, as the kubelet's calcEphemeralStorage adds them.
func podStats(ref statsv1alpha1.PodReference, start metav1.Time, st *cellapi.Stats) statsv1alpha1.PodStats {
	t := metav1.NewTime(st.Time)
	ps := statsv1alpha1.PodStats{PodRef: ref, StartTime: start, Containers: []statsv1alpha1.ContainerStats{}}
	disk := st.Disk
	var cpuNanos, cpuCores, memUsage, memWS, memRSS, faults, majorFaults uint64
	rateKnown := true
	for _, c := range st.Containers {
		cs := statsv1alpha1.ContainerStats{
			Name:      c.Name,
			StartTime: metav1.NewTime(c.StartTime),
			CPU:       &statsv1alpha1.CPUStats{Time: t, UsageCoreNanoSeconds: ptr.To(c.CPUUsageCoreNanoSeconds)},
			Memory: &statsv1alpha1.MemoryStats{
				Time: t, UsageBytes: ptr.To(c.MemoryUsageBytes), WorkingSetBytes: ptr.To(c.MemoryWorkingSetBytes),
				RSSBytes: ptr.To(c.MemoryRSSBytes), PageFaults: ptr.To(c.MemoryPageFaults), MajorPageFaults: ptr.To(c.MemoryMajorPageFaults),
			},
			Rootfs: usageOn(t, disk, c.Rootfs),
			Logs:   usageOn(t, disk, c.Logs),
		}
		if c.CPURateKnown {
			cs.CPU.UsageNanoCores = ptr.To(c.CPUUsageNanoCores)
		} else {
			rateKnown = false
		}
		cpuNanos += c.CPUUsageCoreNanoSeconds
		cpuCores += c.CPUUsageNanoCores
		memUsage += c.MemoryUsageBytes
		memWS += c.MemoryWorkingSetBytes
		memRSS += c.MemoryRSSBytes
		faults += c.MemoryPageFaults
		majorFaults += c.MemoryMajorPageFaults
		ps.Containers = append(ps.Containers, cs)
	}
	if len(ps.Containers) > 0 {
		ps.CPU = &statsv1alpha1.CPUStats{Time: t, UsageCoreNanoSeconds: ptr.To(cpuNanos)}
		if rateKnown {
			ps.CPU.UsageNanoCores = ptr.To(cpuCores)
		}
		ps.Memory = &statsv1alpha1.MemoryStats{Time: t, UsageBytes: ptr.To(memUsage), WorkingSetBytes: ptr.To(memWS),
			RSSBytes: ptr.To(memRSS), PageFaults: ptr.To(faults), MajorPageFaults: ptr.To(majorFaults)}
	}
	if ifs := st.Interfaces; len(ifs) > 0 {
		ps.Network = &statsv1alpha1.NetworkStats{Time: t}
		for _, i := range ifs {
			ps.Network.Interfaces = append(ps.Network.Interfaces, statsv1alpha1.InterfaceStats{
				Name: i.Name, RxBytes: ptr.To(i.RxBytes), RxErrors: ptr.To(i.RxErrors),
				TxBytes: ptr.To(i.TxBytes), TxErrors: ptr.To(i.TxErrors),
			})
		}
		ps.Network.InterfaceStats = ps.Network.Interfaces[0]
	}
	for _, v := range st.Volumes {
		if fs := fsStats(t, v.Fs, v.Fs); fs != nil {
			ps.VolumeStats = append(ps.VolumeStats, statsv1alpha1.VolumeStats{Name: v.Name, FsStats: *fs})
		}
	}
	if disk != nil {
		ps.EphemeralStorage = ephemeralStorage(t, disk, ps, st.EtcFiles)
	}
	return ps
}

// ephemeralStorage is the cell's disk with what the pod uses of it: its
// containers' writable layers and logs, its volumes and its /etc files.
func ephemeralStorage(t metav1.Time, disk *cellapi.FsStats, ps statsv1alpha1.PodStats, etc *cellapi.FsStats) *statsv1alpha1.FsStats {
	var used, inodes uint64
	add := func(fs *statsv1alpha1.FsStats) {
		if fs != nil && fs.UsedBytes != nil {
			used += *fs.UsedBytes
		}
		if fs != nil && fs.InodesUsed != nil {
			inodes += *fs.InodesUsed
		}
	}
	for i := range ps.Containers {
		add(ps.Containers[i].Rootfs)
		add(ps.Containers[i].Logs)
	}
	for i := range ps.VolumeStats {
		add(&ps.VolumeStats[i].FsStats)
	}
	add(fsStats(t, nil, etc))
	out := fsStats(t, disk, nil)
	out.UsedBytes, out.InodesUsed = ptr.To(used), ptr.To(inodes)
	return out
}

// usageOn is a tree's usage on the cell's disk, nil when the usage is
// not known.
func usageOn(t metav1.Time, disk, usage *cellapi.FsStats) *statsv1alpha1.FsStats {
	if usage == nil || !usage.HasUsage {
		return nil
	}
	return fsStats(t, disk, usage)
}

// fsStats is the kubelet's FsStats of a filesystem's figures (capacity,
// available, inodes) and a tree's usage (used bytes and inodes); nil when
// neither is known. Either may be nil: not known.
func fsStats(t metav1.Time, filesystem, usage *cellapi.FsStats) *statsv1alpha1.FsStats {
	hasFS, hasUsage := filesystem != nil && filesystem.HasFilesystem, usage != nil && usage.HasUsage
	if !hasFS && !hasUsage {
		return nil
	}
	out := &statsv1alpha1.FsStats{Time: t}
	if hasFS {
		out.CapacityBytes, out.AvailableBytes = ptr.To(filesystem.CapacityBytes), ptr.To(filesystem.AvailableBytes)
		out.Inodes, out.InodesFree = ptr.To(filesystem.Inodes), ptr.To(filesystem.InodesFree)
	}
	if hasUsage {
		out.UsedBytes, out.InodesUsed = ptr.To(usage.UsedBytes), ptr.To(usage.InodesUsed)
	}
	return out
}
