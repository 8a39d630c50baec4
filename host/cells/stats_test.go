package cells

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	cellapi "github.com/kipcell/kip/cell/api"
)

// statsAgent answers Stats with resp, or, when resp is nil, only once
// the call's context ends (a cell that does not answer).
type statsAgent struct {
	cellapi.UnimplementedCell
	resp *cellapi.Stats
	only chan bool // the last request's onlyCPUAndMemory
}

func (a *statsAgent) Stats(ctx context.Context, onlyCPUAndMemory bool) (*cellapi.Stats, error) {
	if a.resp == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	a.only <- onlyCPUAndMemory
	return a.resp, nil
}

func TestPodStats(t *testing.T) {
	sampled := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	started := sampled.Add(-time.Minute)
	answering := &statsAgent{only: make(chan bool, 1), resp: &cellapi.Stats{
		Time: sampled,
		Containers: []cellapi.ContainerStats{
			{Name: "app", StartTime: started, CPUUsageCoreNanoSeconds: 3e9, CPUUsageNanoCores: 5e8, CPURateKnown: true,
				MemoryUsageBytes: 30 << 20, MemoryWorkingSetBytes: 20 << 20, MemoryRSSBytes: 10 << 20, MemoryPageFaults: 7, MemoryMajorPageFaults: 1,
				Rootfs: &cellapi.FsStats{UsedBytes: 4096, InodesUsed: 3, HasUsage: true},
				Logs:   &cellapi.FsStats{UsedBytes: 8192, InodesUsed: 2, HasUsage: true}},
			{Name: "side", StartTime: started, CPUUsageCoreNanoSeconds: 1e9, CPUUsageNanoCores: 1e8, CPURateKnown: true,
				MemoryUsageBytes: 3 << 20, MemoryWorkingSetBytes: 2 << 20, MemoryRSSBytes: 1 << 20},
		},
		Interfaces: []cellapi.InterfaceStats{{Name: "eth0", RxBytes: 100, RxErrors: 1, TxBytes: 200, TxErrors: 2}},
		Volumes: []cellapi.VolumeStats{{Name: "scratch", Fs: &cellapi.FsStats{
			CapacityBytes: 1 << 30, AvailableBytes: 1 << 29, Inodes: 1000, InodesFree: 900, HasFilesystem: true,
			UsedBytes: 1 << 20, InodesUsed: 5, HasUsage: true}}},
		Disk:     &cellapi.FsStats{CapacityBytes: 1 << 34, AvailableBytes: 1 << 33, Inodes: 1 << 20, InodesFree: 1 << 19, HasFilesystem: true},
		EtcFiles: &cellapi.FsStats{UsedBytes: 12288, InodesUsed: 4, HasUsage: true},
	}}
	h := newHarnessSetup(t, setup{config: func(c *Config) { c.StatsTimeout = 100 * time.Millisecond }})
	for _, p := range []struct {
		name  string
		agent cellapi.Cell // nil: the cell is not running yet
	}{{"web", answering}, {"stuck", &statsAgent{}}, {"booting", nil}} {
		pod := newPod(p.name, types.UID("uid-"+p.name))
		pod.Status.StartTime = &metav1.Time{Time: started}
		c := newCell(h.m.deps, pod, nil)
		if p.agent != nil {
			a, err := dialAgent(c.id, serveAgent(t, p.agent))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			c.agent = a
		}
		if h.m.cells.add(c) != nil {
			t.Fatalf("pod %s added twice", p.name)
		}
	}

	got, err := h.m.PodStats(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if only := <-answering.only; only {
		t.Error("the agent was asked for CPU and memory only")
	}
	at := metav1.NewTime(sampled)
	u := func(v uint64) *uint64 { return &v }
	want := []statsv1alpha1.PodStats{{
		PodRef:    statsv1alpha1.PodReference{Name: "web", Namespace: "default", UID: "uid-web"},
		StartTime: metav1.NewTime(started),
		Containers: []statsv1alpha1.ContainerStats{
			{Name: "app", StartTime: metav1.NewTime(started),
				CPU: &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: u(5e8), UsageCoreNanoSeconds: u(3e9)},
				Memory: &statsv1alpha1.MemoryStats{Time: at, UsageBytes: u(30 << 20), WorkingSetBytes: u(20 << 20), RSSBytes: u(10 << 20),
					PageFaults: u(7), MajorPageFaults: u(1)},
				Rootfs: &statsv1alpha1.FsStats{Time: at, CapacityBytes: u(1 << 34), AvailableBytes: u(1 << 33), Inodes: u(1 << 20), InodesFree: u(1 << 19),
					UsedBytes: u(4096), InodesUsed: u(3)},
				Logs: &statsv1alpha1.FsStats{Time: at, CapacityBytes: u(1 << 34), AvailableBytes: u(1 << 33), Inodes: u(1 << 20), InodesFree: u(1 << 19),
					UsedBytes: u(8192), InodesUsed: u(2)}},
			{Name: "side", StartTime: metav1.NewTime(started),
				CPU: &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: u(1e8), UsageCoreNanoSeconds: u(1e9)},
				Memory: &statsv1alpha1.MemoryStats{Time: at, UsageBytes: u(3 << 20), WorkingSetBytes: u(2 << 20), RSSBytes: u(1 << 20),
					PageFaults: u(0), MajorPageFaults: u(0)}},
		},
		CPU: &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: u(6e8), UsageCoreNanoSeconds: u(4e9)},
		Memory: &statsv1alpha1.MemoryStats{Time: at, UsageBytes: u(33 << 20), WorkingSetBytes: u(22 << 20), RSSBytes: u(11 << 20),
			PageFaults: u(7), MajorPageFaults: u(1)},
		Network: &statsv1alpha1.NetworkStats{Time: at,
			InterfaceStats: statsv1alpha1.InterfaceStats{Name: "eth0", RxBytes: u(100), RxErrors: u(1), TxBytes: u(200), TxErrors: u(2)},
			Interfaces:     []statsv1alpha1.InterfaceStats{{Name: "eth0", RxBytes: u(100), RxErrors: u(1), TxBytes: u(200), TxErrors: u(2)}}},
		VolumeStats: []statsv1alpha1.VolumeStats{{Name: "scratch", FsStats: statsv1alpha1.FsStats{Time: at,
			CapacityBytes: u(1 << 30), AvailableBytes: u(1 << 29), Inodes: u(1000), InodesFree: u(900), UsedBytes: u(1 << 20), InodesUsed: u(5)}}},
		// Writable layer, logs, the volume and the /etc files.
		EphemeralStorage: &statsv1alpha1.FsStats{Time: at, CapacityBytes: u(1 << 34), AvailableBytes: u(1 << 33), Inodes: u(1 << 20), InodesFree: u(1 << 19),
			UsedBytes: u(4096 + 8192 + 1<<20 + 12288), InodesUsed: u(3 + 2 + 5 + 4)},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PodStats: the answering cell's pod alone (-want +got):\n%s", diff)
	}

	// CPU and memory only, and a first sample: no rate, in the pod as in
	// the container.
	answering.resp = &cellapi.Stats{Time: sampled, Containers: []cellapi.ContainerStats{
		{Name: "app", StartTime: started, CPUUsageCoreNanoSeconds: 3e9, MemoryWorkingSetBytes: 20 << 20}}}
	got, err = h.m.PodStats(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if only := <-answering.only; !only {
		t.Error("the agent was not asked for CPU and memory only")
	}
	if len(got) != 1 || got[0].CPU.UsageNanoCores != nil || got[0].Containers[0].CPU.UsageNanoCores != nil || got[0].Network != nil || got[0].EphemeralStorage != nil {
		t.Errorf("first sample, CPU and memory only = %+v", got)
	}
}

// BenchmarkPodStats is the host's cost of one stats answer over n running
// cells: a Stats call to each agent (gRPC, in memory) with a pod's whole
// summary (two containers, an interface, two volumes, the disk), and the
// conversion to the kubelet's types. The agents answer at once: a cell's
// own time (cgroup reads, the disk walks) is not in it.
func BenchmarkPodStats(b *testing.B) {
	now := time.Now()
	fs := &cellapi.FsStats{CapacityBytes: 1 << 34, AvailableBytes: 1 << 33, Inodes: 1 << 20, InodesFree: 1 << 19, HasFilesystem: true,
		UsedBytes: 1 << 20, InodesUsed: 9, HasUsage: true}
	ctr := func(name string) cellapi.ContainerStats {
		return cellapi.ContainerStats{Name: name, StartTime: now, CPUUsageCoreNanoSeconds: 3e9, CPUUsageNanoCores: 5e8, CPURateKnown: true,
			MemoryUsageBytes: 30 << 20, MemoryWorkingSetBytes: 20 << 20, MemoryRSSBytes: 10 << 20, Rootfs: fs, Logs: fs}
	}
	agent := &statsAgent{only: make(chan bool, 1<<20), resp: &cellapi.Stats{
		Time: now, Containers: []cellapi.ContainerStats{ctr("app"), ctr("side")},
		Interfaces: []cellapi.InterfaceStats{{Name: "eth0", RxBytes: 1 << 30, TxBytes: 1 << 29}},
		Volumes:    []cellapi.VolumeStats{{Name: "kube-api-access-x", Fs: fs}, {Name: "scratch", Fs: fs}},
		Disk:       fs, EtcFiles: fs,
	}}
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("cells=%d", n), func(b *testing.B) {
			h := newHarnessSetup(b, setup{})
			lis := serveAgent(b, agent)
			for i := range n {
				c := newCell(h.m.deps, newPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-%d", i))), nil)
				a, err := dialAgent(c.id, lis)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = a.Close() })
				c.agent = a
				h.m.cells.add(c)
			}
			for b.Loop() {
				pods, err := h.m.PodStats(b.Context(), false)
				if err != nil || len(pods) != n {
					b.Fatalf("PodStats = %d pods, %v", len(pods), err)
				}
				for range n {
					<-agent.only
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/cell")
		})
	}
}
