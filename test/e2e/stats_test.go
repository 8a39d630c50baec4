//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/test/e2e/framework"
)

// burner is a hello container that keeps one goroutine busy, held to
// 200m by its CPU limit: twice its 100m request when the machine has a
// core to spare, and above the HPA's 50 % target even when it has little.
func burner() corev1.Container {
	return corev1.Container{
		Name: "burn", Image: cells.Images.Hello.Ref, Args: []string{"-burn", "1"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}
}

// TestStats is the kubelet's stats on a Kip node: the summary and the
// resource metrics of a CPU-burning pod, read through the API server's
// node proxy as a kubelet's are; metrics-server (built from the Go module
// proxy, on the kubelet node) scraping them, so that kubectl top pod
// shows the pod's CPU and memory; and a HorizontalPodAutoscaler on CPU
// scaling the pod's Deployment up from 1.
func TestStats(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	deployment(t, ns, "burn", 1, nil, burner())
	// metrics-server runs where it runs in a real cluster: on a kubelet
	// node, from which it scrapes kip's kubelet API like any node's.
	if _, err := f.InfraNode(ctx, cells, t.Output()); err != nil {
		t.Fatal(err)
	}
	ms, err := f.DeployMetricsServer(ctx, cells, framework.Placement{}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if pods, err := f.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=metrics-server"}); err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != framework.InfraNodeName {
		t.Errorf("metrics-server's pods %v (%v), want one on the kubelet node %s", podNodes(pods), err, framework.InfraNodeName)
	}
	t.Cleanup(func() {
		if err := ms.Delete(context.Background(), f); err != nil { //nolint:usetesting // a Cleanup: t.Context() has ended
			t.Error(err)
		}
	})
	pod := f.WaitForPods(t, ns, "app=burn", 1, 90*time.Second, "Running on kip", func(p *corev1.Pod) bool {
		return p.Spec.NodeName == "kip" && running(p)
	})[0].Name

	t.Run("summary", func(t *testing.T) { checkSummary(t, ns, pod) })
	t.Run("metrics/resource", func(t *testing.T) { checkResourceMetrics(t, ns, pod) })
	t.Run("kubectl top pod", func(t *testing.T) { checkTopPod(t, ns, pod) })
	t.Run("HorizontalPodAutoscaler", func(t *testing.T) { checkHPA(t, ns) })
}

// checkSummary reads the summary through the API server's node proxy until
// the pod's CPU rate is in it, then checks the burner's figures.
func checkSummary(t *testing.T, ns, pod string) {
	// The first sample of a container has no rate: ask until one has.
	var ps *statsv1alpha1.PodStats
	var last string
	err := framework.Poll(t.Context(), 30*time.Second, func(ctx context.Context) (bool, error) {
		raw, err := f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/kip/proxy/stats/summary").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		last = string(raw)
		var sum statsv1alpha1.Summary
		if err := json.Unmarshal(raw, &sum); err != nil {
			return false, fmt.Errorf("decoding the summary: %w\n%.2000s", err, raw)
		}
		for i := range sum.Pods {
			if p := &sum.Pods[i]; p.PodRef.Namespace == ns && p.PodRef.Name == pod {
				ps = p
			}
		}
		return ps != nil && ps.CPU != nil && ps.CPU.UsageNanoCores != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the pod's CPU rate in /stats/summary: %v; the last summary:\n%.3000s", err, last)
	}
	if got := *ps.CPU.UsageNanoCores; got < 20e6 { // 20m of its 200m
		t.Errorf("pod CPU = %d nano-cores, want the burner's (up to 200m)", got)
	}
	if len(ps.Containers) != 1 || ps.Containers[0].Name != "burn" || ps.Containers[0].Memory == nil ||
		ptr.Deref(ps.Containers[0].Memory.WorkingSetBytes, 0) == 0 || ps.Containers[0].StartTime.IsZero() {
		t.Errorf("containers = %+v, want burn with its memory and start time", ps.Containers)
	}
	if ps.Network == nil || ps.Network.Name != "eth0" || ptr.Deref(ps.Network.TxBytes, 0) == 0 {
		t.Errorf("network = %+v, want eth0 of the cell with traffic (the image pull at least)", ps.Network)
	}
	if e := ps.EphemeralStorage; e == nil || ptr.Deref(e.UsedBytes, 0) == 0 || ptr.Deref(e.CapacityBytes, 0) == 0 {
		t.Errorf("ephemeral storage = %+v, want the pod's logs and layer on the cell's disk", e)
	}
	var names []string
	for _, v := range ps.VolumeStats {
		names = append(names, v.Name)
	}
	if len(names) == 0 || !strings.HasPrefix(names[0], "kube-api-access") {
		t.Errorf("volumes = %v, want the kube-api-access volume", names)
	}
}

// checkResourceMetrics reads /metrics/resource through the node proxy.
func checkResourceMetrics(t *testing.T, ns, pod string) {
	raw, err := f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/kip/proxy/metrics/resource").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf(`container_cpu_usage_seconds_total{container="burn",namespace=%q,pod=%q} `, ns, pod),
		fmt.Sprintf(`container_memory_working_set_bytes{container="burn",namespace=%q,pod=%q} `, ns, pod),
		fmt.Sprintf(`container_start_time_seconds{container="burn",namespace=%q,pod=%q} `, ns, pod),
		"node_cpu_usage_seconds_total ", "resource_scrape_error 0\n",
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics/resource has no %q:\n%.3000s", want, raw)
		}
	}
}

// checkTopPod waits for metrics-server to have the pod's metrics, then
// runs kubectl top pod.
func checkTopPod(t *testing.T, ns, pod string) {
	// metrics-server has a pod's CPU after two scrapes (15 s apart).
	metricsPath := fmt.Sprintf("/apis/metrics.k8s.io/v1beta1/namespaces/%s/pods/%s", ns, pod)
	var last string
	err := framework.Poll(t.Context(), 3*time.Minute, func(ctx context.Context) (bool, error) {
		raw, err := f.Client.CoreV1().RESTClient().Get().AbsPath(metricsPath).DoRaw(ctx)
		last = fmt.Sprintf("%s %v", raw, err)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for metrics-server to have the pod's metrics: %v; the last answer of %s: %.2000s", err, metricsPath, last)
	}
	out, code := kubectl(t, "top", "pod", "-n", ns, "--no-headers")
	cols := strings.Fields(out)
	if code != 0 || len(cols) != 3 || cols[0] != pod {
		t.Fatalf("kubectl top pod = %d:\n%s", code, out)
	}
	cpu, err := resource.ParseQuantity(cols[1])
	if err != nil || cpu.MilliValue() < 20 {
		t.Errorf("kubectl top pod CPU = %q (%v), want the burner's (up to 200m)", cols[1], err)
	}
	mem, err := resource.ParseQuantity(cols[2])
	if err != nil || mem.Value() == 0 {
		t.Errorf("kubectl top pod memory = %q (%v), want more than 0", cols[2], err)
	}
	t.Logf("kubectl top pod: %s", strings.TrimSpace(out))
}

// checkHPA makes an HPA on 50 % CPU for Deployment burn and waits for it
// to scale up to 2.
func checkHPA(t *testing.T, ns string) {
	_, err := f.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(t.Context(), &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "burn"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "burn"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    2,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var status autoscalingv2.HorizontalPodAutoscalerStatus
	err = framework.Poll(t.Context(), 4*time.Minute, func(ctx context.Context) (bool, error) {
		hpa, err := f.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "burn", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = hpa.Status
		return status.DesiredReplicas >= 2, nil
	})
	if err != nil {
		t.Fatalf("waiting for the HorizontalPodAutoscaler to scale burn up: %v; its status: %+v", err, status)
	}
	if m := status.CurrentMetrics; len(m) > 0 && m[0].Resource != nil {
		t.Logf("HPA: %d%% of the request (target 50%%), desired replicas %d", ptr.Deref(m[0].Resource.Current.AverageUtilization, 0), status.DesiredReplicas)
	}
	f.WaitForPods(t, ns, "app=burn", 2, 90*time.Second, "Running on kip", func(p *corev1.Pod) bool {
		return p.Spec.NodeName == "kip" && running(p)
	})
}

// podNodes lists "pod@node" for each pod of list (nil: none).
func podNodes(list *corev1.PodList) []string {
	if list == nil {
		return nil
	}
	var out []string
	for i := range list.Items {
		out = append(out, list.Items[i].Name+"@"+list.Items[i].Spec.NodeName)
	}
	return out
}
