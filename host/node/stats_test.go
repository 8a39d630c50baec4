package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"io"
	corev1 "k8s.io/api/core/v1"
)

// stubPods is a Pods with no pods (host/node/nodetest imports this
// package, so its tests cannot use it).
type stubPods struct{}

var errNoPod = errors.New("no such pod")

func (stubPods) CreatePod(context.Context, *corev1.Pod) error { return nil }
func (stubPods) UpdatePod(context.Context, *corev1.Pod) error { return nil }
func (stubPods) DeletePod(context.Context, *corev1.Pod) error { return nil }
func (stubPods) GetPod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, errNoPod
}
func (stubPods) GetPodStatus(context.Context, string, string) (*corev1.PodStatus, error) {
	return nil, errNoPod
}
func (stubPods) GetPods(context.Context) ([]*corev1.Pod, error) { return nil, nil }
func (stubPods) NotifyPods(context.Context, func(*corev1.Pod))  {}
func (stubPods) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, errNoPod
}
func (stubPods) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errNoPod
}
func (stubPods) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errNoPod
}
func (stubPods) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errNoPod
}

// statsPods is a Pods that is a StatsProvider: it answers pods, or err,
// and records what it was asked.
type statsPods struct {
	stubPods
	pods []statsv1alpha1.PodStats
	err  error
	only []bool
}

func (p *statsPods) PodStats(_ context.Context, onlyCPUAndMemory bool) ([]statsv1alpha1.PodStats, error) {
	p.only = append(p.only, onlyCPUAndMemory)
	return p.pods, p.err
}

var (
	statsStart   = time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC)
	statsSampled = time.Date(2026, 11, 24, 12, 0, 0, 500e6, time.UTC)
)

// twoPods are two pods' stats: web with two containers, its CPU rate known,
// and job with one, sampled earlier and its rate not yet known.
func twoPods() []statsv1alpha1.PodStats {
	at, earlier := metav1.NewTime(statsSampled), metav1.NewTime(statsSampled.Add(-time.Second))
	started := metav1.NewTime(statsStart.Add(time.Minute))
	cpu := func(t metav1.Time, rate *uint64, total uint64) *statsv1alpha1.CPUStats {
		return &statsv1alpha1.CPUStats{Time: t, UsageNanoCores: rate, UsageCoreNanoSeconds: ptr.To(total)}
	}
	mem := func(t metav1.Time, ws uint64) *statsv1alpha1.MemoryStats {
		return &statsv1alpha1.MemoryStats{Time: t, WorkingSetBytes: ptr.To(ws), UsageBytes: ptr.To(ws * 2), RSSBytes: ptr.To(ws / 2)}
	}
	return []statsv1alpha1.PodStats{{
		PodRef: statsv1alpha1.PodReference{Name: "web", Namespace: "default", UID: "u1"}, StartTime: started,
		Containers: []statsv1alpha1.ContainerStats{
			{Name: "app", StartTime: started, CPU: cpu(at, ptr.To[uint64](5e8), 15e8), Memory: mem(at, 20e6)},
			{Name: "side", StartTime: started, CPU: cpu(at, ptr.To[uint64](1e8), 5e8), Memory: mem(at, 4e6)},
		},
		CPU: cpu(at, ptr.To[uint64](6e8), 2e9), Memory: mem(at, 24e6),
	}, {
		PodRef: statsv1alpha1.PodReference{Name: "job", Namespace: "batch", UID: "u2"}, StartTime: started,
		Containers: []statsv1alpha1.ContainerStats{{Name: "run", StartTime: started, CPU: cpu(earlier, nil, 25e8), Memory: mem(earlier, 1e6)}},
		CPU:        cpu(earlier, nil, 25e8), Memory: mem(earlier, 1e6),
	}}
}

func statsServer(pods Pods) http.Handler {
	return routes(pods, nil, statsRoutes{node: "kip", start: statsStart, log: slog.New(slog.DiscardHandler)})
}

func get(t testing.TB, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "https://kip:10250"+path, nil))
	return w
}

func TestStatsSummary(t *testing.T) {
	pods := &statsPods{pods: twoPods()}
	h := statsServer(pods)

	w := get(t, h, "/stats/summary")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /stats/summary = %d %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var got statsv1alpha1.Summary
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// The node is the pods' sum at the latest sample; its rate is not
	// known while one pod's is not.
	wantNode := statsv1alpha1.NodeStats{
		NodeName: "kip", StartTime: metav1.NewTime(statsStart),
		CPU: &statsv1alpha1.CPUStats{Time: metav1.NewTime(statsSampled), UsageCoreNanoSeconds: ptr.To[uint64](45e8)},
		Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(statsSampled), WorkingSetBytes: ptr.To[uint64](25e6),
			UsageBytes: ptr.To[uint64](50e6), RSSBytes: ptr.To[uint64](12.5e6), PageFaults: ptr.To[uint64](0), MajorPageFaults: ptr.To[uint64](0)},
	}
	// JSON keeps times to the second, as the kubelet's does.
	wantNode.CPU.Time = metav1.NewTime(statsSampled.Truncate(time.Second))
	wantNode.Memory.Time = wantNode.CPU.Time
	if diff := cmp.Diff(wantNode, got.Node); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
	if len(got.Pods) != 2 || got.Pods[0].PodRef.Name != "web" || len(got.Pods[0].Containers) != 2 {
		t.Errorf("pods = %+v", got.Pods)
	}

	get(t, h, "/stats/summary?only_cpu_and_memory=true")
	if diff := cmp.Diff([]bool{false, true}, pods.only); diff != "" {
		t.Errorf("only CPU and memory asked (-want +got):\n%s", diff)
	}

	pods.err = errors.New("plugin gone")
	if w := get(t, h, "/stats/summary"); w.Code != http.StatusInternalServerError {
		t.Errorf("failing provider: %d, want 500", w.Code)
	}
}

func TestMetricsResource(t *testing.T) {
	pods := &statsPods{pods: twoPods()}
	h := statsServer(pods)
	w := get(t, h, "/metrics/resource")
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics/resource = %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	// As a kubelet writes them (resource_metrics.go), families by name;
	// the timestamps are the samples' in milliseconds.
	const want = `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.5 1795521600500
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 0.5 1795521600500
container_cpu_usage_seconds_total{container="run",namespace="batch",pod="job"} 2.5 1795521599500
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 2e+07 1795521600500
container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 4e+06 1795521600500
container_memory_working_set_bytes{container="run",namespace="batch",pod="job"} 1e+06 1795521599500
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.79551806e+09
container_start_time_seconds{container="side",namespace="default",pod="web"} 1.79551806e+09
container_start_time_seconds{container="run",namespace="batch",pod="job"} 1.79551806e+09
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 4.5 1795521600500
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2.5e+07 1795521600500
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 1795521600500
pod_cpu_usage_seconds_total{namespace="batch",pod="job"} 2.5 1795521599500
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 2.4e+07 1795521600500
pod_memory_working_set_bytes{namespace="batch",pod="job"} 1e+06 1795521599500
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	if diff := cmp.Diff(want, w.Body.String()); diff != "" {
		t.Errorf("/metrics/resource (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true}, pods.only); diff != "" {
		t.Errorf("only CPU and memory asked (-want +got):\n%s", diff)
	}

	pods.err = errors.New("plugin gone")
	w = get(t, h, "/metrics/resource")
	const failed = `# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`
	if w.Code != http.StatusOK || w.Body.String() != failed {
		t.Errorf("failing provider: %d\n%s", w.Code, w.Body)
	}
}

func TestStatsRoutesWithoutProvider(t *testing.T) {
	h := statsServer(stubPods{})
	for _, path := range []string{"/stats/summary", "/metrics/resource", "/metrics/cadvisor", "/stats"} {
		if w := get(t, h, path); w.Code != http.StatusNotImplemented {
			t.Errorf("%s without a StatsProvider: %d, want 501", path, w.Code)
		}
	}
	h = statsServer(&statsPods{})
	if w := get(t, h, "/metrics/cadvisor"); w.Code != http.StatusNotImplemented {
		t.Errorf("/metrics/cadvisor: %d, want 501", w.Code)
	}
}

// TestMetricsServerAuth: metrics-server calls the kubelet API with its
// service account's token; the node checks it with a TokenReview and lets
// it read nodes/metrics only as RBAC allows (metrics-server's ClusterRole
// grants get on nodes/metrics, not nodes/stats), as a kubelet in webhook
// mode does. The API server is played by an HTTP server answering the two
// reviews: the webhook authenticator posts them with a REST client, which
// a fake clientset does not have.
func TestMetricsServerAuth(t *testing.T) {
	const token, user = "ms-token", "system:serviceaccount:kube-system:metrics-server"
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authnv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			tr.Status = authnv1.TokenReviewStatus{Authenticated: tr.Spec.Token == token, User: authnv1.UserInfo{Username: user}}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authzv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ra := sar.Spec.ResourceAttributes
			sar.Status.Allowed = sar.Spec.User == user && ra != nil && ra.Verb == "get" && ra.Resource == "nodes" && ra.Subresource == "metrics" && ra.Name == "kip"
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer apiserver.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: apiserver.URL})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := nodeutil.WebhookAuth(client, "kip")
	if err != nil {
		t.Fatal(err)
	}
	h := withAuth(auth, statsServer(&statsPods{pods: twoPods()}), slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics/resource", token, http.StatusOK},
		{"/stats/summary", token, http.StatusForbidden},
		{"/metrics/resource", "stolen", http.StatusUnauthorized},
		{"/metrics/resource", "", http.StatusUnauthorized},
	} {
		r := httptest.NewRequest(http.MethodGet, "https://kip:10250"+tc.path, nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s with token %q: %d, want %d (%s)", tc.path, tc.token, w.Code, tc.want, strings.TrimSpace(w.Body.String()))
		}
	}
}

// BenchmarkStatsRoutes is the node's cost of answering /stats/summary
// (JSON) and /metrics/resource (text) for 100 pods of two containers, their
// stats already read (host/cells' BenchmarkPodStats reads them).
func BenchmarkStatsRoutes(b *testing.B) {
	var pods []statsv1alpha1.PodStats
	for i := range 50 {
		for _, p := range twoPods() {
			p.PodRef.Name = fmt.Sprintf("%s-%d", p.PodRef.Name, i)
			p.Containers = append(p.Containers, p.Containers[0])
			pods = append(pods, p)
		}
	}
	h := statsServer(&statsPods{pods: pods})
	for _, path := range []string{"/stats/summary", "/metrics/resource"} {
		b.Run(strings.TrimPrefix(path, "/"), func(b *testing.B) {
			for b.Loop() {
				if w := get(b, h, path); w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
