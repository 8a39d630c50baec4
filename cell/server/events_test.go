package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/pod"
)

func newTestServer(t *testing.T) (*Server, *pod.Manager) {
	t.Helper()
	store := logs.NewStore(t.TempDir())
	mgr := pod.New(pod.Config{Runtime: fakeRuntime{}, Logs: store, PodIP: "10.0.0.9", HostIP: "10.0.0.9"})
	t.Cleanup(func() {
		grace := time.Duration(0)
		_ = mgr.Delete(context.Background(), &grace) //nolint:usetesting // a Cleanup: t.Context() has ended
	})
	return New(Config{Pod: mgr, Logs: store}), mgr
}

func applyTestPod(t *testing.T, s *Server, containers ...string) {
	t.Helper()
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "reg/" + c + ":v1"})
	}
	data, _ := json.Marshal(&p)
	if _, err := s.ApplyPod(t.Context(), &api.PodRequest{PodJSON: data, Generation: 1}); err != nil {
		t.Fatal(err)
	}
}

// collect reads updates until one carries the event reason/message.
func collect(t *testing.T, w *watchStream, container, reason string) (events []api.PodEvent) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	var lastSeq uint64
	for {
		select {
		case u := <-w.got:
			if u.Seq <= lastSeq {
				t.Fatalf("seq went from %d to %d", lastSeq, u.Seq)
			}
			lastSeq = u.Seq
			if len(u.StatusJSON) == 0 {
				t.Fatal("an update without a status")
			}
			events = append(events, u.Events...)
			for _, e := range u.Events {
				if e.Container == container && e.Reason == reason {
					return events
				}
			}
		case <-deadline:
			t.Fatalf("no %s event for %s; got %v", reason, container, events)
		}
	}
}

func TestWatchStatusCarriesEvents(t *testing.T) {
	s, _ := newTestServer(t)
	applyTestPod(t, s, "app")
	ctx, cancel := context.WithCancel(t.Context())
	w := newWatchStream()
	done := make(chan error, 1)
	go func() { done <- s.WatchStatus(ctx, w.Send) }()
	events := collect(t, w, "app", "Started")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchStatus: %v", err)
	}
	var reasons []string
	for _, e := range events {
		reasons = append(reasons, e.Reason)
		if e.Time.IsZero() || e.Type != "Normal" {
			t.Errorf("event %v: want Normal with a time", e)
		}
	}
	// The fake has every image: Pulled "already present", no Pulling.
	want := []string{"Pulled", "Created", "Started"}
	if len(reasons) != len(want) {
		t.Fatalf("reasons = %v, want %v", reasons, want)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Errorf("reasons = %v, want %v", reasons, want)
			break
		}
	}
}

// A stream that breaks before it sends events leaves them to the next
// subscription: nothing is lost between subscriptions.
func TestWatchStatusKeepsEventsAcrossSubscriptions(t *testing.T) {
	s, mgr := newTestServer(t)
	applyTestPod(t, s, "app")
	// Wait until the container started, with nobody watching.
	deadline := time.After(5 * time.Second)
	for {
		_, _, _, changed := mgr.Status()
		st := mgr.PodStatus()
		if len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("container did not start")
		}
	}
	broken := newWatchStream()
	broken.fail = func(*api.StatusUpdate) bool { return true }
	if err := s.WatchStatus(t.Context(), broken.Send); err == nil {
		t.Fatal("WatchStatus on a broken stream returned nil")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := newWatchStream()
	go func() { _ = s.WatchStatus(ctx, w.Send) }()
	var first *api.StatusUpdate
	select {
	case first = <-w.got:
	case <-time.After(5 * time.Second):
		t.Fatal("no first update")
	}
	var reasons []string
	for _, e := range first.Events {
		reasons = append(reasons, e.Reason)
	}
	if len(reasons) != 3 || reasons[0] != "Pulled" || reasons[2] != "Started" {
		t.Errorf("first update's events = %v, want Pulled, Created, Started", reasons)
	}
	// The server drops delivered events once Send has returned, which
	// may be just after the update reached the stream.
	for wait := time.Now().Add(5 * time.Second); len(mgr.Events()) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("events still pending 5 s after delivery: %d", len(mgr.Events()))
		}
	}
	// Later events come with later updates, also when the status does not
	// change: Killing on delete.
	grace := time.Duration(0)
	if err := mgr.Delete(t.Context(), &grace); err != nil {
		t.Fatal(err)
	}
	collect(t, w, "app", "Killing")
}
