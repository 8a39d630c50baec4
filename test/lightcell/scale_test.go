package lightcell

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
)

// TestManyLightCellsInOneProcess measures what a light cell costs: it
// runs $KIP_LIGHT_CELLS cells (skipped when unset) in one kip-light-cells
// process, joins each as kip does, runs a pod on each and keeps a status
// watch open on each, as kip keeps one, and reports the process's
// resident memory per cell, before the joins and with every pod Running.
//
//	KIP_LIGHT_CELLS=1000 go test -count=1 -run ManyLightCells -v ./test/lightcell/
func TestManyLightCellsInOneProcess(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KIP_LIGHT_CELLS"))
	if n <= 0 {
		t.Skip("set KIP_LIGHT_CELLS to the number of cells to measure")
	}
	ctx := t.Context()
	ca := newCA(t)
	id := func(i int) string { return fmt.Sprintf("scale-%04d", i) }
	addr := func(i int) string { return fmt.Sprintf("127.78.%d.%d", i/250, 1+i%250) }
	proc := StartProcess(t, n, func(i int) (*cellapi.Bootstrap, error) {
		b, err := ca.Bootstrap(id(i), "test", "kip", "uid-"+id(i), time.Hour)
		if err == nil {
			b.ListenAddress = addr(i) + ":6421"
		}
		return b, err
	})
	idle := residentKiB(t, proc.Pid())

	start := time.Now()
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var wg, running sync.WaitGroup
	defer func() { stopWatches(); wg.Wait() }()
	running.Add(n)
	for i := range n {
		agent := joinCell(t, ca, id(i), addr(i))
		(&host{agent: agent}).apply(t, testPod(id(i), corev1.RestartPolicyAlways, "/app"))
		wg.Go(func() {
			once := sync.OnceFunc(running.Done)
			_ = agent.WatchStatus(watchCtx, func(st *corev1.PodStatus, _ int64, _ []cellapi.PodEvent, _ []cellapi.InstanceNotice) {
				if st.Phase == corev1.PodRunning {
					once()
				}
			})
		})
	}
	allRunning := make(chan struct{})
	go func() { running.Wait(); close(allRunning) }()
	select {
	case <-allRunning:
	case <-time.After(5 * time.Minute):
		t.Fatal("not every pod Running after 5 minutes")
	}
	took := time.Since(start)
	loaded := residentKiB(t, proc.Pid())
	t.Logf("%d light cells in one process: %d MiB resident before the joins (%d KiB a cell); "+
		"%d MiB with a pod Running and a status watch on each (%d KiB a cell); joins and pods took %.1fs",
		n, idle/1024, idle/int64(n), loaded/1024, loaded/int64(n), took.Seconds())
}

// residentKiB is a process's VmRSS.
func residentKiB(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
