package node

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// TestEventsHaveTheirOwnRateLimit records events while the node client's
// rate limiter lets nothing through: they still reach the API server,
// as the kubelet's events do through its own EventClient.
func TestEventsHaveTheirOwnRateLimit(t *testing.T) {
	var posted atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
			posted.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.Copy(w, r.Body) // the created event, as sent
	}))
	defer srv.Close()

	spent := flowcontrol.NewFakeNeverRateLimiter() // the node client's budget, all taken
	defer spent.Stop()
	base := &rest.Config{Host: srv.URL, RateLimiter: spent}
	if got := ClientConfig(base).RateLimiter; got != spent {
		t.Fatalf("ClientConfig dropped the configured rate limiter: %v", got)
	}
	events, err := kubernetes.NewForConfig(EventClientConfig(base))
	if err != nil {
		t.Fatal(err)
	}
	if base.QPS != 0 || base.RateLimiter != spent {
		t.Fatalf("EventClientConfig changed its base: QPS %v, limiter %v", base.QPS, base.RateLimiter)
	}
	recorder, stop := NewEventRecorder(t.Context(), events, "kip")
	defer stop()

	const n = 20
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p" + string(rune('a'+i)), UID: types.UID("uid-" + string(rune('a'+i)))}}
		recorder.Event(pod, corev1.EventTypeNormal, "Started", "started")
	}
	deadline := time.Now().Add(30 * time.Second)
	for posted.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := posted.Load(); got != n {
		t.Fatalf("%d of %d events reached the API server", got, n)
	}
}
