//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func execProbe(period, failures int32, cmd ...string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: period, FailureThreshold: failures}
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := f.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestReadinessProbe: a pod whose readiness probe fails runs but is never
// Ready, and its Service's EndpointSlice lists it as not ready (no
// traffic), while a pod whose probe succeeds is Ready and ready there.
func TestReadinessProbe(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	for name, cmd := range map[string]string{"ready": "true", "unready": "false"} {
		ctr := sleeper()
		ctr.ReadinessProbe = execProbe(1, 1, cmd)
		spec := onKip(ctr)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "probed"}}, Spec: spec}
		f.CreatePod(t, ns, pod)
	}
	_, err := f.Client.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probed"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "probed"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitForPods(t, ns, "app=probed", 2, 90*time.Second, "both running, one Ready", func(p *corev1.Pod) bool {
		return running(p) && (p.Name == "unready" || podReady(p))
	})
	f.WaitFor(t, 30*time.Second, "an Unhealthy event of the unready pod", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "unready"), "Warning Unhealthy Readiness probe failed"), nil
	})
	// Several probe periods later it is still not Ready.
	time.Sleep(5 * time.Second)
	if p := getPod(t, ns, "unready"); podReady(p) || p.Status.ContainerStatuses[0].Ready {
		t.Errorf("the pod whose readiness probe fails is Ready: %+v", p.Status.Conditions)
	}
	var slices *discoveryv1.EndpointSliceList
	f.WaitFor(t, 30*time.Second, "the Service's EndpointSlice with both pods", func(ctx context.Context) (bool, error) {
		slices, err = f.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=probed"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, s := range slices.Items {
			n += len(s.Endpoints)
		}
		return n == 2, nil
	})
	got := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			got[e.TargetRef.Name] = e.Conditions.Ready != nil && *e.Conditions.Ready
		}
	}
	if diff := cmp.Diff(map[string]bool{"ready": true, "unready": false}, got); diff != "" {
		t.Errorf("endpoint readiness (-want +got):\n%s", diff)
	}
}

// TestLivenessProbeRestarts: a failing liveness probe kills the container,
// which restarts with a rising restart count, Unhealthy and Killing
// events in the kubelet's words.
func TestLivenessProbeRestarts(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	ctr := sleeper()
	ctr.LivenessProbe = execProbe(1, 1, "false")
	spec := onKip(ctr)
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	createPod(t, ns, "dying", spec)
	f.WaitForPods(t, ns, "app=dying", 1, 120*time.Second, "restarted twice", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	ev := podEvents(t, ns, "dying")
	for _, want := range []string{"Warning Unhealthy Liveness probe failed", "Normal Killing Container main failed liveness probe, will be restarted"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %q:\n%s", want, ev)
		}
	}
}

// TestStartupProbeGatesLiveness: while the startup probe has not
// succeeded the container is not started and its failing liveness probe
// does not run; once it succeeds the liveness probe restarts it.
func TestStartupProbeGatesLiveness(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	ctr := sleeper()
	ctr.StartupProbe = execProbe(1, 600, "test", "-f", "/tmp/started")
	ctr.LivenessProbe = execProbe(1, 1, "false")
	spec := onKip(ctr)
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	createPod(t, ns, "slow", spec)
	f.WaitForPods(t, ns, "app=slow", 1, 90*time.Second, "running", running)
	time.Sleep(5 * time.Second)
	p := getPod(t, ns, "slow")
	cs := p.Status.ContainerStatuses[0]
	if cs.Started == nil || *cs.Started || cs.Ready || cs.RestartCount != 0 {
		t.Fatalf("before the startup probe succeeds: started %v ready %v restarts %d; want false, false, 0", cs.Started, cs.Ready, cs.RestartCount)
	}
	if out, code := kubectl(t, "exec", "-n", ns, "slow", "--", "touch", "/tmp/started"); code != 0 {
		t.Fatalf("kubectl exec touch: %d %s", code, out)
	}
	f.WaitForPods(t, ns, "app=slow", 1, 60*time.Second, "restarted by its liveness probe once started", func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	if ev := podEvents(t, ns, "slow"); !strings.Contains(ev, "Container main failed liveness probe, will be restarted") {
		t.Errorf("events lack the liveness kill:\n%s", ev)
	}
}

// TestPreStopRunsBeforeSIGTERM: deleting a pod runs its preStop hook (an
// httpGet without a host, so to the pod's own address, where the
// container calls a server of this test before it answers) before the container
// gets SIGTERM (it then asks the same server), in that order. A hook with
// a host is refused (ProbeHostForbidden), as Pod Security's baseline
// refuses it.
func TestPreStopRunsBeforeSIGTERM(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/prestop" {
			time.Sleep(time.Second) // a hook that takes a moment
		}
		fmt.Fprintln(w, "ok")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port

	server := fmt.Sprintf("http://%s:%d", cells.Gateway, port)
	ctr := corev1.Container{Name: "app", Image: cells.Images.Hello.Ref,
		Args: []string{"-on-term", server + "/sigterm", "-forward", server + "/prestop"},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Port: intstr.FromInt(8080), Path: "/prestop",
		}}}}
	spec := onKip(ctr)
	spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	createPod(t, ns, "graceful", spec)
	f.WaitForPods(t, ns, "app=graceful", 1, 90*time.Second, "running", running)
	if err := f.Client.CoreV1().Pods(ns).Delete(t.Context(), "graceful", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 30*time.Second, "the preStop call and the container's SIGTERM call", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"/prestop", "/sigterm"}, got); diff != "" {
		t.Errorf("calls in order (-want +got):\n%s", diff)
	}
}

// TestActiveDeadline: a pod past activeDeadlineSeconds is Failed with
// reason DeadlineExceeded, as on a kubelet, and its cell ends.
func TestActiveDeadline(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := onKip(sleeper())
	spec.ActiveDeadlineSeconds = ptr.To[int64](5)
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	createPod(t, ns, "late", spec)
	p := f.WaitForPods(t, ns, "app=late", 1, 120*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })[0]
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("status reason %q message %q; want DeadlineExceeded and the kubelet's message", p.Status.Reason, p.Status.Message)
	}
	if ev := podEvents(t, ns, "late"); !strings.Contains(ev, "DeadlineExceeded Pod was active on the node longer than the specified deadline") {
		t.Errorf("no DeadlineExceeded event:\n%s", ev)
	}
}

// TestPreviousLogsAfterCrash: kubectl logs --previous shows the output of
// the attempt before the running (or waiting) one.
func TestPreviousLogsAfterCrash(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	createPod(t, ns, "crasher", onKip(corev1.Container{Name: "crash", Image: cells.Images.Crash.Ref}))
	f.WaitForPods(t, ns, "app=crasher", 1, 90*time.Second, "restarted once", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	out, code := kubectl(t, "logs", "-n", ns, "crasher", "--previous")
	if code != 0 || !strings.Contains(out, "crash: stdout") || !strings.Contains(out, "crash: stderr") {
		t.Errorf("kubectl logs --previous: exit %d, %q; want the crashed attempt's output", code, out)
	}
}

// TestTerminationMessage: what a container writes to its
// terminationMessagePath is its Terminated state's message; with
// FallbackToLogsOnError a failed container's last log lines are.
func TestTerminationMessage(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	written := corev1.Container{Name: "main", Image: cells.Images.Busybox.Ref,
		Command: []string{"sh", "-c", "echo -n all done > /dev/termination-log"}}
	fallback := corev1.Container{Name: "main", Image: cells.Images.Busybox.Ref,
		Command: []string{"sh", "-c", "echo first; echo it broke; exit 3"}, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	for name, ctr := range map[string]corev1.Container{"written": written, "fallback": fallback} {
		spec := onKip(ctr)
		spec.RestartPolicy = corev1.RestartPolicyNever
		createPod(t, ns, name, spec)
	}
	for name, want := range map[string]string{"written": "all done", "fallback": "first\nit broke\n"} {
		p := f.WaitForPods(t, ns, "app="+name, 1, 90*time.Second, "ended", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})[0]
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.Message != want {
			t.Errorf("pod %s: terminated state %+v, want message %q", name, term, want)
		}
	}
}

// TestSidecarInitContainer: an init container with restartPolicy Always
// starts first, keeps running beside the app container, and does not
// keep a finished pod alive: the pod Succeeds when its app container has.
func TestSidecarInitContainer(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	side := sleeper()
	side.Name = "sidecar"
	side.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	spec := onKip(corev1.Container{Name: "job", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c", "sleep 8; echo done"}})
	spec.InitContainers = []corev1.Container{side}
	spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, ns, "withsidecar", spec)
	f.WaitForPods(t, ns, "app=withsidecar", 1, 90*time.Second, "Running and Ready with its sidecar", func(p *corev1.Pod) bool {
		return running(p) && podReady(p) && len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].State.Running != nil
	})
	p := f.WaitForPods(t, ns, "app=withsidecar", 1, 60*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })[0]
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 {
		t.Errorf("app container state %+v, want Terminated 0", p.Status.ContainerStatuses[0].State)
	}
}

// TestReadinessGates: a pod with a readiness gate is not Ready until
// another party sets the gate's condition True (reason
// ReadinessGatesNotReady with the kubelet's message), and the condition it
// set stays when kip writes the pod's status.
func TestReadinessGates(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	const gate = corev1.PodConditionType("example.com/load-balancer")
	spec := onKip(sleeper())
	spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	createPod(t, ns, "gated", spec)
	f.WaitForPods(t, ns, "app=gated", 1, 90*time.Second, "running, containers ready, not Ready for its gate", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return running(p) && c.Status == corev1.ConditionFalse && c.Reason == "ReadinessGatesNotReady" &&
					c.Message == `corresponding condition of pod readiness gate "example.com/load-balancer" does not exist.`
			}
		}
		return false
	})
	f.WaitFor(t, 30*time.Second, "the gate's condition set", func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, "gated", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		_, err = f.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil // a conflict with kip's own write: try again
	})
	f.WaitForPods(t, ns, "app=gated", 1, 30*time.Second, "Ready with the gate's condition kept", func(p *corev1.Pod) bool {
		kept := false
		for _, c := range p.Status.Conditions {
			kept = kept || (c.Type == gate && c.Status == corev1.ConditionTrue)
		}
		return podReady(p) && kept
	})
}
