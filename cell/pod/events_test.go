package pod

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

// waitEvent waits until an event with reason (and a message containing
// msg) is pending and returns the pending events.
func waitEvent(t *testing.T, m *Manager, reason, msg string) []Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		_, _, _, changed := m.Status()
		evs := m.Events()
		for _, e := range evs {
			if e.Reason == reason && strings.Contains(e.Message, msg) {
				return evs
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for event %s %q; have %v", reason, msg, summary(evs))
		}
	}
}

func summary(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s/%s/%s: %s", e.Type, e.Reason, e.Container, e.Message))
	}
	return out
}

func TestEventsOfAStartAndStop(t *testing.T) {
	rt := newFakeRuntime()
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app", "side")
	rt.present["reg/side:v1"] = true // IfNotPresent (a tagged image): no pull
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "reg/init:v1"}}
	rt.onStart = func(spec runtime.ContainerSpec, task *fakeTask) {
		if spec.Name == "init" {
			task.exit(0)
		}
	}
	apply(t, m, 1, p)
	waitEvent(t, m, "Started", "Started container side")
	waitEvent(t, m, "Started", "Started container app")
	deletePod(t, m, time.Second)

	var app []string
	var sawPresent bool
	for _, e := range m.Events() {
		if e.Type != EventNormal || e.Time.IsZero() || e.Seq == 0 {
			t.Errorf("event %+v: want Normal with a time and seq", e)
		}
		if e.Container == "app" {
			app = append(app, e.Reason+": "+e.Message)
		}
		if e.Container == "side" && e.Reason == "Pulled" && e.Message == `Container image "reg/side:v1" already present on machine` {
			sawPresent = true
		}
	}
	want := []string{
		`Pulling: Pulling image "reg/app:v1"`,
		`Pulled: Successfully pulled image "reg/app:v1" in`,
		`Created: Created container app`,
		`Started: Started container app`,
		`Killing: Stopping container app`,
	}
	if len(app) != len(want) {
		t.Fatalf("app events = %q, want %q", app, want)
	}
	for i := range want {
		if !strings.HasPrefix(app[i], want[i]) {
			t.Errorf("app event %d = %q, want prefix %q", i, app[i], want[i])
		}
	}
	if !sawPresent {
		t.Errorf("no \"already present\" event for side's image")
	}
}

func TestEventsOfAPullFailure(t *testing.T) {
	rt := newFakeRuntime()
	rt.setPullErr("reg/app:v1", errors.New("manifest unknown"))
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyAlways, "app"))
	evs := waitEvent(t, m, "Failed", "Error: ImagePullBackOff")
	got := summary(evs)
	want := []string{
		`Normal/Pulling/app: Pulling image "reg/app:v1"`,
		`Warning/Failed/app: Failed to pull image "reg/app:v1": manifest unknown`,
		`Warning/Failed/app: Error: ErrImagePull`,
		`Normal/BackOff/app: Back-off pulling image "reg/app:v1"`,
		`Warning/Failed/app: Error: ImagePullBackOff`,
	}
	if len(got) < len(want) {
		t.Fatalf("events = %q, want %q first", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
	deletePod(t, m, time.Second)
}

func TestEventsOfACrashLoop(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.exit(1) }
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyAlways, "app"))
	waitEvent(t, m, "BackOff", "Back-off restarting failed container app in pod p_ns(uid-1)")
	for _, e := range m.Events() {
		if e.Reason == "BackOff" && e.Type != EventWarning {
			t.Errorf("BackOff event type %s, want Warning", e.Type)
		}
	}
	deletePod(t, m, time.Second)
}

func TestEventsAckAndBound(t *testing.T) {
	m := newManager(t, newFakeRuntime())
	_, _, seq0, changed := m.Status()
	m.emit(EventNormal, "Test", "c", "one")
	select {
	case <-changed:
	default:
		t.Fatal("an event did not wake the watchers")
	}
	if _, _, seq, _ := m.Status(); seq != seq0+1 {
		t.Errorf("seq after an event = %d, want %d", seq, seq0+1)
	}
	m.emit(EventNormal, "Test", "c", "two")
	evs := m.Events()
	if len(evs) != 2 || evs[0].Message != "one" || evs[1].Message != "two" {
		t.Fatalf("events = %v", summary(evs))
	}
	m.AckEvents(evs[0].Seq)
	if evs := m.Events(); len(evs) != 1 || evs[0].Message != "two" {
		t.Fatalf("events after ack of the first = %v", summary(evs))
	}
	// An older ack changes nothing; unacknowledged events stay for the
	// next subscriber.
	m.AckEvents(evs[0].Seq)
	if len(m.Events()) != 1 {
		t.Fatal("a stale ack dropped an event")
	}
	for i := range MaxPendingEvents + 5 {
		m.emit(EventNormal, "Test", "c", "n%d", i)
	}
	evs = m.Events()
	if len(evs) != MaxPendingEvents || evs[len(evs)-1].Message != fmt.Sprintf("n%d", MaxPendingEvents+4) {
		t.Fatalf("kept %d events ending %q", len(evs), evs[len(evs)-1].Message)
	}
	if evs[0].Message != "n5" {
		t.Errorf("oldest kept = %q, want n5 (\"two\" and n0..n4 dropped)", evs[0].Message)
	}
	if d := m.DroppedEvents(); d != 6 {
		t.Errorf("dropped = %d, want 6", d)
	}
}
