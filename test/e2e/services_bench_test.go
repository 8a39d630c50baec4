//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/clusterip"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/test/bench"
	"github.com/kipcell/kip/test/lightcell"
	scaletest "github.com/kipcell/kip/test/scale"
)

// BenchmarkServiceFanout measures issue 13's ClusterIP Services at scale:
// 1,000 Services of 10 endpoints each (Services without selectors and
// their EndpointSlices, written by the benchmark), and 100 cells
// subscribed. The host's side runs in the benchmark's process as kip runs
// it (host/clusterip's Table over the informers of the node's identity,
// and a Sync per cell through host/cellclient over mutual TLS); the cells
// are light agents (test/lightcell: the real ApplyServices and
// cell/clusterip Proxy, no iptables) in a process of their own,
// test/cmd/kip-light-cells, so that the CPU measured is the host's. It
// reports:
//
//   - change → every cell: from just before an EndpointSlice update to
//     the moment the last of the 100 cells has acknowledged the revision
//     that carries it (p50/p90/p99 over the changes); and per cell, each
//     cell's acknowledgement;
//   - the host side's heap (informer caches and table) with the 1,000
//     Services, and its CPU per change and while idle;
//   - the real kip process (node kip of the run, which watches the same
//     Services but has no cell): its RSS growth and CPU.
//
// Run it alone: go test -tags e2e -run '^$' -bench ServiceFanout -benchtime=1x -timeout 30m ./test/e2e/
func BenchmarkServiceFanout(b *testing.B) {
	for b.Loop() {
		measureFanout(b, 1000, 10, 100, 200)
	}
}

func measureFanout(b *testing.B, nServices, nEndpoints, nCells, nChanges int) {
	ctx := b.Context()
	ns := f.Namespace(b)
	kipBefore := procUsageOf(b, kip.PID())
	heapBefore := heapInUse()

	// The host's side, as kip builds it, with the node's identity.
	nodeConfig, err := clientcmd.BuildConfigFromFlags("", f.Cluster.NodeKubeconfig("kip"))
	if err != nil {
		b.Fatal(err)
	}
	nodeClient, err := kubernetes.NewForConfig(nodeConfig)
	if err != nil {
		b.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(nodeClient, 0)
	table, err := clusterip.New(clusterip.Config{NodeName: "kip"}, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices())
	if err != nil {
		b.Fatal(err)
	}
	// The informers stop before Shutdown waits for them; b.Context()
	// ends only after the benchmark returns.
	informerCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer func() { stopInformers(); factory.Shutdown() }()
	if err := table.Run(ctx); err != nil {
		b.Fatal(err)
	}

	start := time.Now()
	createServices(b, ns, nServices, nEndpoints)
	b.Logf("%d Services and EndpointSlices created in %.1fs", nServices, time.Since(start).Seconds())
	waitTable(b, table, func(req int) bool { return req >= nServices })
	time.Sleep(5 * time.Second) // let kip's informers take them too
	heapAfter := heapInUse()
	kipLoaded := procUsageOf(b, kip.PID())

	// The cells: light agents in their own process.
	ca, err := pki.Load(ctx, f.Client, ns, "bench-ca")
	if err != nil {
		b.Fatal(err)
	}
	defer startLightCells(b, ca, nCells).Stop()
	acks := newAckLog(nCells)
	syncCtx, stopSync := context.WithCancel(ctx)
	var syncs sync.WaitGroup
	defer func() { stopSync(); syncs.Wait() }()
	start = time.Now()
	for i := range nCells {
		id := lightCellID(i)
		joinTLS, err := ca.JoinTLSConfig(id)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cellclient.Join(ctx, id, lightCellAddr(i), joinTLS, ca.CertPEM(), func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error) {
			return ca.Join(ctx, id, req, nil)
		}); err != nil {
			b.Fatal(err)
		}
		tlsConfig, err := ca.ClientTLSConfig(id)
		if err != nil {
			b.Fatal(err)
		}
		agent, err := cellclient.Dial(id, lightCellAddr(i), tlsConfig)
		if err != nil {
			b.Fatal(err)
		}
		defer agent.Close()
		syncs.Go(func() {
			table.Sync(syncCtx, agent, clusterip.SyncOptions{
				Backoff: func(int) time.Duration { return 100 * time.Millisecond },
				Acked:   func(rev uint64) { acks.ack(i, rev) },
			})
		})
	}
	rev, _ := table.Revision()
	acks.waitAll(b, rev)
	b.Logf("the whole table (%d Services) in all %d cells %.2fs after the syncs started", nServices, nCells, time.Since(start).Seconds())

	// Churn: one EndpointSlice changes at a time.
	var (
		everyCell, perCell []time.Duration
		cpu0               = selfCPU()
		kip0               = procUsageOf(b, kip.PID())
	)
	for j := range nChanges {
		name := fmt.Sprintf("s-%04d", j%nServices)
		slice, err := f.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		slice.Endpoints[0].Addresses = []string{fmt.Sprintf("10.250.%d.%d", j/250, j%250+1)}
		before, _ := table.Revision()
		t0 := time.Now()
		if _, err := f.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		target := waitRevision(b, table, before)
		times := acks.waitAll(b, target)
		last := time.Duration(0)
		for _, at := range times {
			d := at.Sub(t0)
			perCell = append(perCell, d)
			last = max(last, d)
		}
		everyCell = append(everyCell, last)
	}
	churnCPU := selfCPU() - cpu0
	kipChurn := procUsageOf(b, kip.PID()).CPU - kip0.CPU

	// Idle: nothing changes for ten seconds.
	cpu0, kip0 = selfCPU(), procUsageOf(b, kip.PID())
	time.Sleep(10 * time.Second)
	idleCPU, kipIdle := selfCPU()-cpu0, procUsageOf(b, kip.PID()).CPU-kip0.CPU

	all := bench.Report(b, "every-cell", time.Millisecond, everyCell)
	one := bench.Report(b, "per-cell", time.Millisecond, perCell)
	perChange := float64(churnCPU.Microseconds()) / 1000 / float64(nChanges)
	b.ReportMetric(float64(heapAfter-heapBefore)/(1<<20), "host-heap-MiB")
	b.ReportMetric(perChange, "host-cpu-ms/change")
	b.ReportMetric(float64(kipLoaded.RSS-kipBefore.RSS)/(1<<20), "kip-rss-growth-MiB")
	b.Logf("EndpointSlice change → all %d cells: %s", nCells, all)
	b.Logf("EndpointSlice change → each cell: %s", one)
	b.Logf("host side (informers, table, %d syncs): heap %.1f MiB more with %d Services of %d endpoints; CPU %.2f ms a change (%d changes, %s); idle %s over 10s",
		nCells, float64(heapAfter-heapBefore)/(1<<20), nServices, nEndpoints, perChange, nChanges, churnCPU, idleCPU)
	b.Logf("kip process (no cells): RSS %.1f → %.1f MiB with the Services; CPU %s during the changes, %s idle over 10s",
		float64(kipBefore.RSS)/(1<<20), float64(kipLoaded.RSS)/(1<<20), kipChurn, kipIdle)
}

// createServices creates n Services without selectors, each with an
// EndpointSlice of m ready endpoints, with a client of its own that is not
// throttled.
func createServices(b *testing.B, ns string, n, m int) {
	cfg := rest.CopyConfig(f.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				errs <- createService1(b.Context(), client, ns, i, m)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

func createService1(ctx context.Context, client kubernetes.Interface, ns string, i, m int) error {
	name := fmt.Sprintf("s-%04d", i)
	_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "e2e.kipcell.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for e := range m {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 200+i/256, i%256, e+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	_, err = client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
	return err
}

// waitTable waits until the whole table's number of Services passes ok.
func waitTable(b *testing.B, table *clusterip.Table, ok func(services int) bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rev, changed := table.Revision()
		if ok(len(table.Request(0, true).Services)) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the table at revision %d never got there", rev)
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
	}
}

// waitRevision waits until the table's revision passes rev and returns it.
func waitRevision(b *testing.B, table *clusterip.Table, rev uint64) uint64 {
	b.Helper()
	timeout := time.After(30 * time.Second)
	for {
		now, changed := table.Revision()
		if now > rev {
			return now
		}
		select {
		case <-changed:
		case <-timeout:
			b.Fatalf("the table stayed at revision %d", rev)
		}
	}
}

// ackLog is what each cell acknowledged, and when.
type ackLog struct {
	mu      sync.Mutex
	rev     []uint64
	at      []time.Time
	changed chan struct{}
}

func newAckLog(n int) *ackLog {
	return &ackLog{rev: make([]uint64, n), at: make([]time.Time, n), changed: make(chan struct{})}
}

func (a *ackLog) ack(cell int, rev uint64) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if rev > a.rev[cell] {
		a.rev[cell], a.at[cell] = rev, now
	}
	close(a.changed)
	a.changed = make(chan struct{})
}

// waitAll waits until every cell has acknowledged rev or later and
// returns when each did so first.
func (a *ackLog) waitAll(b *testing.B, rev uint64) []time.Time {
	b.Helper()
	timeout := time.After(60 * time.Second)
	for {
		a.mu.Lock()
		behind := 0
		for _, r := range a.rev {
			if r < rev {
				behind++
			}
		}
		changed := a.changed
		if behind == 0 {
			at := append([]time.Time(nil), a.at...)
			a.mu.Unlock()
			return at
		}
		a.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			b.Fatalf("%d cells never acknowledged revision %d", behind, rev)
		}
	}
}

func lightCellID(i int) string   { return fmt.Sprintf("bench-%03d", i) }
func lightCellAddr(i int) string { return fmt.Sprintf("127.0.77.%d", i+1) }

// startLightCells runs n light cells in a kip-light-cells process, each
// with a bootstrap from ca.
func startLightCells(b *testing.B, ca *pki.CA, n int) *lightcell.Process {
	b.Helper()
	return lightcell.StartProcess(b, n, func(i int) (*cellapi.Bootstrap, error) {
		bs, err := ca.Bootstrap(lightCellID(i), "e2e", "kip", "bench-"+strconv.Itoa(i), 0)
		if err == nil {
			bs.ListenAddress = lightCellAddr(i) + ":6421"
		}
		return bs, err
	})
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procUsageOf reads a process's resident memory and CPU time from /proc
// (scaletest.ReadUsage).
func procUsageOf(b *testing.B, pid int) scaletest.Usage {
	b.Helper()
	u, err := scaletest.ReadUsage(pid)
	if err != nil {
		b.Fatal(err)
	}
	return u
}
