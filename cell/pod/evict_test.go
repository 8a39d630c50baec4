package pod

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

// An evicted pod ends Failed with reason Evicted and the message, whatever
// its restart policy; its container, which ignores SIGTERM, is killed after
// the eviction's grace of a second, not the pod's hour, and not restarted;
// an agent started again keeps it so.
func TestEvict(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.ignoreTerm = true }
	state := t.TempDir() + "/state.json"
	m := New(Config{Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "127.0.0.1", StatePath: state, Backoff: testBackoff})
	t.Cleanup(func() {
		grace := time.Duration(0)
		_ = m.Delete(context.Background(), &grace) //nolint:usetesting // a Cleanup: t.Context() has ended
	})
	if m.Evict(t.Context(), "too early") {
		t.Fatal("Evict before any pod reported an eviction")
	}
	p := testPod(corev1.RestartPolicyAlways, "app")
	hour := int64(3600)
	p.Spec.TerminationGracePeriodSeconds = &hour
	apply(t, m, 1, p)
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })

	const msg = `Container app exceeded its local ephemeral storage limit "10Mi". `
	begin := time.Now()
	if !m.Evict(t.Context(), msg) {
		t.Fatal("Evict of a running pod reported none")
	}
	st := waitStatus(t, m, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
	if st.Reason != ReasonEvicted || st.Message != msg {
		t.Errorf("reason %q message %q, want %q %q", st.Reason, st.Message, ReasonEvicted, msg)
	}
	waitEvent(t, m, ReasonEvicted, msg)
	waitStatus(t, m, "container stopped", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Terminated != nil })
	if took := time.Since(begin); took > 4*time.Second {
		t.Errorf("the container stopped %s after the eviction, want about its grace of 1s", took.Round(time.Millisecond))
	}
	rt.mu.Lock()
	sigs := rt.tasks[0].gotSignals()
	rt.mu.Unlock()
	if diff := cmp.Diff([]syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, sigs); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if m.Evict(t.Context(), "again") {
		t.Error("a second Evict reported an eviction")
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rt.startedNames()); n != 1 {
		t.Errorf("%d attempts: the container was restarted after the eviction", n)
	}

	// A new agent on the state file keeps the pod evicted.
	m2 := New(Config{Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "127.0.0.1", StatePath: state, Backoff: testBackoff})
	if _, err := m2.Restore(t.Context(), string(p.UID)); err != nil {
		t.Fatal(err)
	}
	st = m2.PodStatus()
	if st.Phase != corev1.PodFailed || st.Reason != ReasonEvicted || st.Message != msg {
		t.Errorf("restored: phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rt.startedNames()); n != 1 {
		t.Errorf("%d attempts: the restored agent restarted the evicted pod", n)
	}
}
