package lightcell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	utilexec "k8s.io/utils/exec"

	"github.com/kipcell/kip/cell"
	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/pki"
)

// host is the host's side of one light cell, as kip has it: the cluster
// CA of host/pki and an agent joined and dialled through host/cellclient.
type host struct {
	agent *cellclient.Agent
	light *Cell
	done  chan error
}

// startCell runs a light cell in this process on a loopback address of
// its own (the agent port is fixed) and joins it as kip does.
func startCell(t *testing.T, podUID string) *host {
	t.Helper()
	ca := newCA(t)
	id := fmt.Sprintf("light-%d", rand.IntN(1e6))
	addr := loopbackAddress()
	b, err := ca.Bootstrap(id, "test", "kip", podUID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{light: New(fakeruntime.Config{}), done: make(chan error, 1)}
	runCtx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	ready := make(chan struct{})
	go func() {
		h.done <- h.light.Run(runCtx, cell.Config{Bootstrap: b, StateDir: t.TempDir(), PodIP: addr,
			Listen: net.JoinHostPort(addr, fmt.Sprint(cellapi.Port)), StopGrace: time.Second,
			Ready: func(net.Addr) { close(ready) }})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-h.done; err != nil {
			t.Errorf("light cell ended: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-h.done:
		t.Fatalf("light cell ended before it served: %v", err)
	}
	h.agent = joinCell(t, ca, id, addr)
	return h
}

// newCA is the host's cluster CA.
func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.Load(t.Context(), fake.NewClientset(), "kip-system", "kip-ca")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// loopbackAddress is an address of 127/8 no other test is likely to use
// (the agent's port is fixed).
func loopbackAddress() string {
	return fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), 1+rand.IntN(250), 1+rand.IntN(250))
}

// joinCell joins the agent of cell id at addr as kip does, and dials it.
func joinCell(t *testing.T, ca *pki.CA, id, addr string) *cellclient.Agent {
	t.Helper()
	joinTLS, err := ca.JoinTLSConfig(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cellclient.Join(t.Context(), id, addr, joinTLS, ca.CertPEM(), func(ctx context.Context, req cellapi.JoinRequest) ([]byte, error) {
		return ca.Join(ctx, id, req, nil)
	}); err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := ca.ClientTLSConfig(id)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := cellclient.Dial(id, addr, tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Close() })
	return agent
}

// apply sends pod, generation 1.
func (h *host) apply(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.agent.Apply(t.Context(), &cellapi.PodRequest{Generation: 1, PodJSON: data}); err != nil {
		t.Fatal(err)
	}
}

// waitPhase watches the status until the pod is in phase and returns it.
func (h *host) waitPhase(t *testing.T, phase corev1.PodPhase) *corev1.PodStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got *corev1.PodStatus
	err := h.agent.WatchStatus(ctx, func(st *corev1.PodStatus, _ int64, _ []cellapi.PodEvent, _ []cellapi.InstanceNotice) {
		if st.Phase == phase {
			got = st
			cancel()
		}
	})
	if got == nil {
		t.Fatalf("pod never %s: %v", phase, err)
	}
	return got
}

func testPod(uid string, policy corev1.RestartPolicy, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "light", UID: types.UID("uid-" + uid)},
		Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{
			{Name: "app", Image: "registry.example/app:1", Command: command},
		}},
	}
}

// attachIO is an exec's streams for cellclient.Agent.Exec.
type attachIO struct {
	stdin  io.Reader
	stdout nopCloser
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

func newAttachIO(stdin string) *attachIO {
	return &attachIO{stdin: strings.NewReader(stdin), stdout: nopCloser{&bytes.Buffer{}}}
}

func (a *attachIO) Stdin() io.Reader            { return a.stdin }
func (a *attachIO) Stdout() io.WriteCloser      { return a.stdout }
func (a *attachIO) Stderr() io.WriteCloser      { return nil }
func (a *attachIO) TTY() bool                   { return false }
func (a *attachIO) Resize() <-chan api.TermSize { return nil }
func (a *attachIO) output() string              { return a.stdout.String() }

func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHostDrivesALightCell: the host's client of the cell protocol
// (host/cellclient, with host/pki's join and mutual TLS) drives a light
// cell through a pod's life: ApplyPod, Running, Logs, Exec, Stats,
// DeletePod; the container ran on the fake runtime and is gone.
func TestHostDrivesALightCell(t *testing.T) {
	h := startCell(t, "uid-run")
	h.apply(t, testPod("run", corev1.RestartPolicyAlways, "/app", "-serve"))
	st := h.waitPhase(t, corev1.PodRunning)
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil || !st.ContainerStatuses[0].Ready {
		t.Fatalf("container statuses %+v, want app running and ready", st.ContainerStatuses)
	}

	logs, err := h.agent.Logs(t.Context(), "app", api.ContainerLogOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, logs); !strings.Contains(got, "/app -serve\n") {
		t.Errorf("logs %q, want the container's command line", got)
	}

	exec := newAttachIO("from stdin\n")
	if err := h.agent.Exec(t.Context(), "app", []string{"echo", "hi"}, exec); err != nil {
		t.Fatal(err)
	}
	if got, want := exec.output(), "echo hi\nfrom stdin\n"; got != want {
		t.Errorf("exec output %q, want %q", got, want)
	}
	exit := newAttachIO("")
	var code utilexec.CodeExitError
	if err := h.agent.Exec(t.Context(), "app", []string{"exit", "3"}, exit); !errors.As(err, &code) || code.Code != 3 {
		t.Errorf("exec exit 3: %v, want exit code 3", err)
	}

	stats, err := h.agent.Stats(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if cs := stats.Containers; len(cs) != 1 || cs[0].Name != "app" || cs[0].MemoryWorkingSetBytes != fakeruntime.MemoryUsage {
		t.Errorf("container stats %v, want app's working set of %d bytes", cs, fakeruntime.MemoryUsage)
	}
	if stats.Disk == nil {
		t.Error("stats without the cell's disk")
	}

	if err := h.agent.Delete(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); h.light.Runtime.Running() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d containers still run after DeletePod", h.light.Runtime.Running())
		}
	}
}

// TestLightPodsEnd: a container's command decides how the pod ends, as
// the pod logic of a real cell reports it.
func TestLightPodsEnd(t *testing.T) {
	tests := map[string]struct {
		command  []string
		phase    corev1.PodPhase
		wantCode int32
	}{
		"exit 0 succeeds":  {command: []string{"exit", "0"}, phase: corev1.PodSucceeded},
		"exit 3 fails":     {command: []string{"exit", "3"}, phase: corev1.PodFailed, wantCode: 3},
		"sleep, then ends": {command: []string{"sleep", "0.2"}, phase: corev1.PodSucceeded},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := startCell(t, "uid-end")
			h.apply(t, testPod("end", corev1.RestartPolicyNever, tt.command...))
			st := h.waitPhase(t, tt.phase)
			if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil ||
				st.ContainerStatuses[0].State.Terminated.ExitCode != tt.wantCode {
				t.Errorf("container statuses %+v, want app terminated with %d", st.ContainerStatuses, tt.wantCode)
			}
		})
	}
}

// TestLightCellTakesServices: a light cell keeps the host's services
// table, whole and in deltas, and only counts what it would program.
func TestLightCellTakesServices(t *testing.T) {
	h := startCell(t, "uid-svc")
	svc := func(name string) cellapi.Service { return cellapi.Service{Namespace: "default", Name: name} }
	for _, req := range []*cellapi.ServicesUpdate{
		{Table: "t", Revision: 2, Services: []cellapi.Service{svc("a"), svc("b")}},
		{Table: "t", Revision: 3, BaseRevision: 2, Services: []cellapi.Service{svc("c")}, Removed: []string{"default/a"}},
	} {
		applied, err := h.agent.ApplyServices(t.Context(), req)
		if err != nil || applied.Revision != req.Revision {
			t.Fatalf("ApplyServices revision %d: %+v, %v", req.Revision, applied, err)
		}
	}
	if syncs, services := h.light.Programmed(); syncs != 2 || services != 2 {
		t.Errorf("programmed %d tables, the last of %d services; want 2 tables, the last of 2 (b and c)", syncs, services)
	}
}
