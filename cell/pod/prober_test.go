package pod

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipcell/kip/cell/api/logs"
)

// probeManager is newManager with probe seconds of 20ms and the pod IP
// on loopback, where the tests' servers listen.
func probeManager(t *testing.T, rt *fakeRuntime) *Manager {
	t.Helper()
	m := New(Config{Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "127.0.0.1", HostIP: "127.0.0.1", Backoff: testBackoff})
	m.probeUnit = 20 * time.Millisecond
	t.Cleanup(func() {
		grace := time.Duration(0)
		_ = m.Delete(context.Background(), &grace) //nolint:usetesting // a Cleanup: t.Context() has ended
	})
	return m
}

func execProbe(cmd ...string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 1, FailureThreshold: 1}
}

// hasEvent reports whether an event with reason and a message containing
// msg is pending.
func hasEvent(m *Manager, reason, msg string) bool {
	for _, e := range m.Events() {
		if e.Reason == reason && strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

func TestReadinessProbe(t *testing.T) {
	rt := newFakeRuntime()
	var ready atomic.Bool
	rt.onExec = func(_ context.Context, _ string, args []string) (string, int32) {
		if ready.Load() {
			return "ok", 0
		}
		return "not yet: " + strings.Join(args, " "), 1
	}
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	probe := execProbe("check", "$(WHO)")
	probe.FailureThreshold = 3 // after one failure the container is unready because it never was ready
	p.Spec.Containers[0].ReadinessProbe = probe
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WHO", Value: "me"}}
	apply(t, m, 1, p)
	waitEvent(t, m, "Unhealthy", "Readiness probe failed: not yet: check me")
	st := m.PodStatus()
	if cs := st.ContainerStatuses[0]; cs.State.Running == nil || cs.Ready || cs.Started == nil || !*cs.Started {
		t.Fatalf("a running container whose readiness probe fails: state %+v ready %v started %v, want Running, started, not ready", cs.State, cs.Ready, cs.Started)
	}
	for _, c := range st.Conditions {
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && (c.Status != corev1.ConditionFalse || c.Reason != "ContainersNotReady") {
			t.Errorf("condition %s = %s %s, want False ContainersNotReady", c.Type, c.Status, c.Reason)
		}
	}
	ready.Store(true)
	waitStatus(t, m, "ready once the probe succeeds", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].Ready })
	ready.Store(false)
	waitStatus(t, m, "unready once it fails again", func(s corev1.PodStatus) bool { return !s.ContainerStatuses[0].Ready })
	if n := len(rt.startedNames()); n != 1 {
		t.Errorf("a readiness failure restarted the container: %d attempts", n)
	}
}

func TestLivenessProbeRestarts(t *testing.T) {
	tests := []struct {
		policy  corev1.RestartPolicy
		message string
	}{
		{corev1.RestartPolicyAlways, "Container app failed liveness probe, will be restarted"},
		{corev1.RestartPolicyNever, "Container app failed liveness probe"},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			rt := newFakeRuntime()
			rt.onExec = func(context.Context, string, []string) (string, int32) { return "dead", 1 }
			m := probeManager(t, rt)
			p := testPod(tt.policy, "app")
			grace := int64(1)
			p.Spec.TerminationGracePeriodSeconds = &grace
			probe := execProbe("alive")
			probe.TerminationGracePeriodSeconds = new(int64) // the probe's grace wins: SIGKILL at once
			p.Spec.Containers[0].LivenessProbe = probe
			apply(t, m, 1, p)
			evs := waitEvent(t, m, "Killing", tt.message)
			if !hasEvent(m, "Unhealthy", "Liveness probe failed: dead") {
				t.Errorf("no Unhealthy event; have %v", summary(evs))
			}
			if tt.policy == corev1.RestartPolicyNever {
				st := waitStatus(t, m, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
				if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 137 {
					t.Errorf("state %+v, want Terminated 137", st.ContainerStatuses[0].State)
				}
				return
			}
			waitStatus(t, m, "restart count rising", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].RestartCount >= 2 })
			if h := rt.history(); !strings.Contains(strings.Join(h, "\n"), "signal app 9") {
				t.Errorf("the probe's grace 0 should SIGKILL at once; history %v", h)
			}
		})
	}
}

func TestStartupProbeGatesLiveness(t *testing.T) {
	rt := newFakeRuntime()
	var up atomic.Bool
	rt.onExec = func(_ context.Context, _ string, args []string) (string, int32) {
		if args[0] == "started" && up.Load() {
			return "", 0
		}
		return args[0] + " failed", 1
	}
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	startup := execProbe("started")
	startup.FailureThreshold = 1000
	p.Spec.Containers[0].StartupProbe = startup
	p.Spec.Containers[0].LivenessProbe = execProbe("live")
	apply(t, m, 1, p)
	waitEvent(t, m, "Unhealthy", "Startup probe failed: started failed")
	time.Sleep(10 * m.probeUnit)
	st := m.PodStatus()
	if cs := st.ContainerStatuses[0]; cs.Started == nil || *cs.Started || cs.Ready {
		t.Errorf("before its startup probe succeeds: started %v ready %v, want false false", cs.Started, cs.Ready)
	}
	for _, h := range rt.history() {
		if strings.HasPrefix(h, "exec app live") {
			t.Fatalf("the liveness probe ran before the container started: %v", rt.history())
		}
	}
	up.Store(true)
	waitStatus(t, m, "started and ready", func(s corev1.PodStatus) bool {
		cs := s.ContainerStatuses[0]
		return cs.Started != nil && *cs.Started && cs.Ready
	})
	// Now liveness runs, fails once and restarts the container.
	waitEvent(t, m, "Killing", "Container app failed liveness probe, will be restarted")
}

func TestStartupProbeFailureRestarts(t *testing.T) {
	rt := newFakeRuntime()
	rt.onExec = func(context.Context, string, []string) (string, int32) { return "", 1 }
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	startup := execProbe("started")
	startup.FailureThreshold = 2
	p.Spec.Containers[0].StartupProbe = startup
	apply(t, m, 1, p)
	waitEvent(t, m, "Killing", "Container app failed startup probe, will be restarted")
	waitStatus(t, m, "restarted", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].RestartCount >= 1 })
}

func TestProbeInitialDelayAndThresholds(t *testing.T) {
	rt := newFakeRuntime()
	var calls atomic.Int32
	rt.onExec = func(context.Context, string, []string) (string, int32) {
		calls.Add(1)
		return "", 0
	}
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	probe := execProbe("ready")
	probe.InitialDelaySeconds = 10 // 200ms here
	probe.SuccessThreshold = 3
	p.Spec.Containers[0].ReadinessProbe = probe
	apply(t, m, 1, p)
	start := time.Now()
	waitStatus(t, m, "ready", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].Ready })
	if took := time.Since(start); took < 10*m.probeUnit {
		t.Errorf("ready after %v, before the initial delay of %v", took, 10*m.probeUnit)
	}
	if n := calls.Load(); n < 3 {
		t.Errorf("ready after %d successful probes, want successThreshold 3", n)
	}
}

func TestExecProbeTimeout(t *testing.T) {
	rt := newFakeRuntime()
	rt.onExec = func(ctx context.Context, _ string, _ []string) (string, int32) {
		<-ctx.Done()
		return "", 0
	}
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe("hang")
	apply(t, m, 1, p)
	waitEvent(t, m, "Unhealthy", "Readiness probe failed: command timed out")
}

// podPort returns the port of a server on 127.0.0.1 (the test pod's IP).
func podPort(t *testing.T, addr string) intstr.IntOrString {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return intstr.FromInt32(int32(n))
}

func TestHTTPProbe(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusInternalServerError)
	var gotHeader, gotAgent atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader.Store(r.Header.Get("X-Probe"))
		gotAgent.Store(r.UserAgent())
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	rt := newFakeRuntime()
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: podPort(t, srv.Listener.Addr().String()).IntVal}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString("http"), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}},
		}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	apply(t, m, 1, p)
	waitEvent(t, m, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500")
	status.Store(http.StatusOK)
	waitStatus(t, m, "ready", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].Ready })
	if gotHeader.Load() != "yes" || gotAgent.Load() != "kube-probe/"+kubeVersion {
		t.Errorf("request header X-Probe %q, User-Agent %q", gotHeader.Load(), gotAgent.Load())
	}
}

func TestHTTPSProbeSkipsVerification(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	req, err := httpRequest(t.Context(), &corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Port: podPort(t, srv.Listener.Addr().String())},
		target{c: &corev1.Container{}, podIP: "127.0.0.1"}, "probe")
	if err != nil {
		t.Fatal(err)
	}
	if res, out, err := httpProbe(req, target{}, time.Second); res != probeSuccess || err != nil {
		t.Errorf("https probe of a self-signed server = %s %q %v, want success", res, out, err)
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := podPort(t, l.Addr().String())
	tgt := target{c: &corev1.Container{}, podIP: "127.0.0.1"}
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}}
	if res, out, err := runProbe(t.Context(), p, tgt, time.Second); res != probeSuccess || err != nil {
		t.Errorf("tcp probe of a listener = %s %q %v", res, out, err)
	}
	_ = l.Close()
	if res, out, _ := runProbe(t.Context(), p, tgt, time.Second); res != probeFailure || !strings.Contains(out, "connection refused") {
		t.Errorf("tcp probe of a closed port = %s %q, want failure, connection refused", res, out)
	}
	bad := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("nope")}}}
	if res, _, err := runProbe(t.Context(), bad, tgt, time.Second); res != probeUnknown || err == nil || err.Error() != "port nope not found" {
		t.Errorf("tcp probe of an unknown port name = %s %v, want unknown, port nope not found", res, err)
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	port := podPort(t, l.Addr().String()).IntVal
	tgt := target{c: &corev1.Container{}, podIP: "127.0.0.1"}
	svc := "db"
	tests := []struct {
		name    string
		status  healthpb.HealthCheckResponse_ServingStatus
		service *string
		want    probeResult
		out     string
	}{
		{"serving", healthpb.HealthCheckResponse_SERVING, nil, probeSuccess, "service healthy"},
		{"not serving", healthpb.HealthCheckResponse_NOT_SERVING, nil, probeFailure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", healthpb.HealthCheckResponse_SERVING, &svc, probeFailure, "error: health rpc probe failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs.SetServingStatus("", tt.status)
			p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: tt.service}}}
			res, out, err := runProbe(t.Context(), p, tgt, time.Second)
			if res != tt.want || err != nil || !strings.HasPrefix(out, tt.out) {
				t.Errorf("grpc probe = %s %q %v, want %s %q", res, out, err, tt.want, tt.out)
			}
		})
	}
}

// deleteWithPreStop runs a pod whose container has an exec preStop hook
// ("drain") answering out and code, and deletes it.
func deleteWithPreStop(t *testing.T, out string, code int32) (*Manager, *fakeRuntime) {
	t.Helper()
	rt := newFakeRuntime()
	rt.onExec = func(context.Context, string, []string) (string, int32) { return out, code }
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
	apply(t, m, 1, p)
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	deletePod(t, m, 5*time.Second)
	return m, rt
}

func TestPreStopRunsBeforeTheStopSignal(t *testing.T) {
	_, rt := deleteWithPreStop(t, "", 0)
	want := []string{"exec app drain", fmt.Sprintf("signal app %d", 15)}
	if diff := cmp.Diff(want, rt.history()); diff != "" {
		t.Errorf("what happened on delete (-want +got):\n%s", diff)
	}
}

func TestPreStopFailureIsAnEvent(t *testing.T) {
	m, _ := deleteWithPreStop(t, "secret output", 1)
	if !hasEvent(m, "FailedPreStopHook", "PreStopHook failed") {
		t.Errorf("no FailedPreStopHook event: %v", summary(m.Events()))
	}
	for _, e := range m.Events() {
		if strings.Contains(e.Message, "secret output") {
			t.Errorf("an event shows the hook's output: %s", e.Message)
		}
	}
}

func TestPostStart(t *testing.T) {
	rt := newFakeRuntime()
	var fail atomic.Bool
	fail.Store(true)
	rt.onExec = func(context.Context, string, []string) (string, int32) {
		if fail.Load() {
			return "", 1
		}
		return "", 0
	}
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"init"}}}}
	apply(t, m, 1, p)
	waitEvent(t, m, "FailedPostStartHook", "PostStartHook failed")
	waitEvent(t, m, "Killing", "FailedPostStartHook")
	fail.Store(false)
	st := waitStatus(t, m, "Running after a hook that succeeds", func(s corev1.PodStatus) bool {
		return s.ContainerStatuses[0].State.Running != nil
	})
	if st.ContainerStatuses[0].RestartCount < 1 {
		t.Errorf("restart count %d after a failed hook, want >= 1", st.ContainerStatuses[0].RestartCount)
	}
}

func TestActiveDeadline(t *testing.T) {
	rt := newFakeRuntime()
	m := probeManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	long := int64(3600)
	p.Spec.ActiveDeadlineSeconds = &long
	grace := int64(0)
	p.Spec.TerminationGracePeriodSeconds = &grace
	apply(t, m, 1, p)
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	// The API server lets activeDeadlineSeconds be shortened on a running
	// pod; the new deadline counts from the start time, so it has passed.
	p2 := p.DeepCopy()
	short := int64(1)
	p2.Spec.ActiveDeadlineSeconds = &short
	time.Sleep(time.Second)
	apply(t, m, 2, p2)
	st := waitStatus(t, m, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
	if st.Reason != "DeadlineExceeded" || st.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", st.Reason, st.Message)
	}
	waitEvent(t, m, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
	waitStatus(t, m, "container stopped", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Terminated != nil })
	if n := len(rt.startedNames()); n != 1 {
		t.Errorf("%d attempts: the container was restarted after the deadline", n)
	}
}

func TestHTTPSHookFallsBackToHTTP(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got.Store(r.URL.Path) }))
	defer srv.Close()
	var warned []string
	tgt := target{c: &corev1.Container{Name: "app"}, podIP: "127.0.0.1", warn: func(reason, msg string) { warned = append(warned, reason+": "+msg) }}
	h := &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Path: "/hook", Port: podPort(t, srv.Listener.Addr().String())}}
	if msg, err := runHook(t.Context(), h, tgt, "p_ns(uid)"); err != nil {
		t.Fatalf("hook = %v (%s), want it retried over HTTP", err, msg)
	}
	if got.Load() != "/hook" || len(warned) != 1 || !strings.HasPrefix(warned[0], "LifecycleHTTPFallback: request to HTTPS lifecycle hook 127.0.0.1:") {
		t.Errorf("server saw %v; events %v", got.Load(), warned)
	}
}
