package scale

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeNode is a node in a fake clientset: Start registers it Ready and
// marks each pod bound to it Running, writing one audit event per status
// update; its process is the test's own.
type fakeNode struct {
	client kubernetes.Interface
	audit  string
	name   string

	mu      sync.Mutex
	started int
	calls   float64
	cancel  context.CancelFunc
	done    chan struct{}
}

func (n *fakeNode) Name() string { return n.name }
func (n *fakeNode) PID() int     { return os.Getpid() }
func (n *fakeNode) User() string { return "system:node:" + n.name }

func (n *fakeNode) Exited() <-chan struct{} { return make(chan struct{}) }

func (n *fakeNode) Start(ctx context.Context) error {
	n.mu.Lock()
	n.started++
	n.mu.Unlock()
	_, err := n.client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	w, err := n.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.done = make(chan struct{})
	go func() {
		defer close(n.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if ev.Type != watch.Added || !ok {
					continue
				}
				// Audited before it is done, as the API server's
				// blocking audit log does.
				f, err := os.OpenFile(n.audit, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					continue
				}
				_, _ = f.WriteString(`{"stage":"RequestReceived","verb":"update","user":{"username":"system:node:` + n.name + `"},"objectRef":{"resource":"pods","subresource":"status"}}` + "\n")
				_ = f.Close()
				n.mu.Lock()
				n.calls++
				n.mu.Unlock()
				p.Status.Phase = corev1.PodRunning
				_, _ = n.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}()
	return nil
}

func (n *fakeNode) Stop() error {
	n.cancel()
	<-n.done
	return nil
}

func (n *fakeNode) Counters(context.Context) (map[string]float64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return map[string]float64{"calls": n.calls}, nil
}

// TestRun runs a burst of 50 pods through a fake node: every pod is seen
// Running and then gone, and the node's requests and counters are its
// status updates.
func TestRun(t *testing.T) {
	const pods = 50
	client := fake.NewClientset()
	audit := AuditLog{Path: filepath.Join(t.TempDir(), "audit.log")}
	node := &fakeNode{client: client, audit: audit.Path, name: "fake"}
	r, err := Run(t.Context(), node, Options{Client: client, Namespace: "ns", Pods: pods, Image: "pause", Audit: audit, Idle: time.Millisecond, Quiet: 20 * time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != "fake" || r.Pods != pods || len(r.Running) != pods || r.Start.N != pods {
		t.Errorf("Run = node %q, %d pods, %d Running, %d starts; want fake and %d of each", r.Node, r.Pods, len(r.Running), r.Start.N, pods)
	}
	for _, d := range r.Running {
		if d > r.AllRunning {
			t.Errorf("a pod Running at %v, after all Running at %v", d, r.AllRunning)
		}
	}
	if want := (Requests{Total: pods, ByKind: map[string]int{"update pods/status": pods}}); !cmp.Equal(want, r.Requests) {
		t.Errorf("Requests = %+v, want %+v", r.Requests, want)
	}
	if diff := cmp.Diff(map[string]float64{"calls": pods}, r.Counters); diff != "" {
		t.Errorf("Counters (-want +got):\n%s", diff)
	}
	if r.PeakRSS == 0 {
		t.Error("PeakRSS = 0, want this process's")
	}
	left, err := client.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 || node.started != 1 {
		t.Errorf("after Run: %d pods left, node started %d times; want 0 and 1", len(left.Items), node.started)
	}
}

func TestPodOn(t *testing.T) {
	p := podOn("mock-100", "mock-100-0007", "pause")
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"mock-100"}}}}}
	if diff := cmp.Diff(want, terms); diff != "" {
		t.Errorf("node affinity (-want +got):\n%s", diff)
	}
	if p.Labels[nodeLabel] != "mock-100" || p.Spec.Tolerations[0].Key != "virtual-kubelet.io/provider" {
		t.Errorf("labels %v, tolerations %v; want the node's label and the virtual-kubelet taint tolerated", p.Labels, p.Spec.Tolerations)
	}
}

// TestForEachError checks that forEach calls every name once when all
// succeed, and returns the failures' names.
func TestForEachError(t *testing.T) {
	names := podNames("n", 100)
	var mu sync.Mutex
	calls := map[string]int{}
	at, err := forEach(t.Context(), names, func(_ context.Context, name string) error {
		mu.Lock()
		calls[name]++
		mu.Unlock()
		return nil
	})
	if err != nil || len(at) != len(names) || len(calls) != len(names) {
		t.Fatalf("forEach = %d times, %v; %d names called; want %d, nil", len(at), err, len(calls), len(names))
	}
	_, err = forEach(t.Context(), names, func(_ context.Context, name string) error {
		if name == "n-0042" {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "n-0042") {
		t.Errorf("forEach with a failure = %v, want an error naming n-0042", err)
	}
}

// TestSettle waits for a node's event requests to stop: while a writer
// appends "create events" to the audit log settle waits, and it returns
// quiet after the last one; a node that never stops ends the wait at the
// timeout, not settled; another user's events and the node's other
// requests do not count.
func TestSettle(t *testing.T) {
	const user = "system:node:n"
	line := func(user, verb, resource string) string {
		return `{"stage":"RequestReceived","verb":"` + verb + `","user":{"username":"` + user + `"},"objectRef":{"resource":"` + resource + `"}}` + "\n"
	}
	tests := []struct {
		name string
		// writes is what is appended every 10 ms, for writeFor.
		writes      string
		writeFor    time.Duration
		timeout     time.Duration
		wantSettled bool
		// the wait's bounds
		atLeast, atMost time.Duration
	}{
		{name: "events stop", writes: line(user, "create", "events"), writeFor: 300 * time.Millisecond, timeout: 10 * time.Second,
			wantSettled: true, atLeast: 300*time.Millisecond + 100*time.Millisecond, atMost: 5 * time.Second},
		{name: "events never stop", writes: line(user, "patch", "events"), writeFor: time.Hour, timeout: 500 * time.Millisecond,
			wantSettled: false, atLeast: 500 * time.Millisecond, atMost: 5 * time.Second},
		{name: "others' events and other requests", writes: line("system:node:other", "create", "events") + line(user, "update", "pods"),
			writeFor: time.Hour, timeout: 10 * time.Second, wantSettled: true, atLeast: 100 * time.Millisecond, atMost: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			audit := AuditLog{Path: filepath.Join(t.TempDir(), "audit.log")}
			if err := os.WriteFile(audit.Path, []byte(line(user, "create", "events")), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() {
				until := time.Now().Add(tt.writeFor)
				for time.Now().Before(until) && ctx.Err() == nil {
					f, err := os.OpenFile(audit.Path, os.O_APPEND|os.O_WRONLY, 0o600)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = f.WriteString(tt.writes)
					_ = f.Close()
					time.Sleep(10 * time.Millisecond)
				}
			})
			start := time.Now()
			settled, err := settle(ctx, audit, user, 0, 100*time.Millisecond, tt.timeout)
			took := time.Since(start)
			cancel()
			if err != nil || settled != tt.wantSettled {
				t.Errorf("settle = %v, %v; want %v, nil", settled, err, tt.wantSettled)
			}
			if took < tt.atLeast || took > tt.atMost {
				t.Errorf("settle took %v, want between %v and %v", took, tt.atLeast, tt.atMost)
			}
		})
	}
}
