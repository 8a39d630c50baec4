package pod

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

var testBackoff = Backoff{Initial: 40 * time.Millisecond, Max: 160 * time.Millisecond, Reset: time.Hour}

func newManager(t *testing.T, rt *fakeRuntime) *Manager {
	t.Helper()
	return New(Config{
		Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
		NetNSPath: "/var/run/netns/test", Backoff: testBackoff,
	})
}

func testPod(policy corev1.RestartPolicy, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec:       corev1.PodSpec{RestartPolicy: policy},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "reg/" + c + ":v1"})
	}
	return p
}

func apply(t *testing.T, m *Manager, gen int64, p *corev1.Pod) {
	t.Helper()
	got, err := m.Apply(t.Context(), Desired{Generation: gen, Pod: p})
	if err != nil || got != gen {
		t.Fatalf("Apply(gen %d) = %d, %v", gen, got, err)
	}
}

// waitStatus waits until cond holds for the published status.
func waitStatus(t *testing.T, m *Manager, what string, cond func(corev1.PodStatus) bool) corev1.PodStatus {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		_, _, _, changed := m.Status()
		st := m.PodStatus()
		if cond(st) {
			return st
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; status: %+v", what, st)
		}
	}
}

func deletePod(t *testing.T, m *Manager, grace time.Duration) {
	t.Helper()
	if err := m.Delete(t.Context(), &grace); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func TestRunToCompletion(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.exitAfter(10*time.Millisecond, 0) }
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyNever, "app"))
	st := waitStatus(t, m, "Succeeded", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })

	cs := st.ContainerStatuses[0]
	if term := cs.State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("state = %+v, want Terminated 0 Completed", cs.State)
	}
	if cs.ContainerID != "containerd://app-0" || cs.ImageID != "reg/app:v1@sha256:0000" || cs.Image != "reg/app:v1" {
		t.Errorf("ids = %q %q %q", cs.ContainerID, cs.ImageID, cs.Image)
	}
	if st.PodIP != "10.0.0.7" || len(st.PodIPs) != 1 || st.HostIP != "10.0.0.7" || st.StartTime == nil {
		t.Errorf("addresses = %q %v %q, startTime %v", st.PodIP, st.PodIPs, st.HostIP, st.StartTime)
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady && (c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted") {
			t.Errorf("Ready = %+v, want False PodCompleted", c)
		}
	}
	if len(rt.startedNames()) != 1 {
		t.Errorf("started %v, want one attempt", rt.startedNames())
	}
	spec := rt.startedSpecs()[0]
	if spec.NetNSPath != "/var/run/netns/test" || spec.Hostname != "p" {
		t.Errorf("spec netns %q hostname %q", spec.NetNSPath, spec.Hostname)
	}
	deletePod(t, m, time.Second)
	if rt.cleanups != 1 {
		t.Errorf("cleanups = %d, want 1", rt.cleanups)
	}
}

func TestRunningIsReady(t *testing.T) {
	rt := newFakeRuntime()
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyAlways, "a", "b"))
	st := waitStatus(t, m, "Running and ready", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodRunning && s.ContainerStatuses[0].Ready && s.ContainerStatuses[1].Ready
	})
	want := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodInitialized: corev1.ConditionTrue, corev1.ContainersReady: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionTrue,
	}
	got := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		got[c.Type] = c.Status
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("QOS = %s", st.QOSClass)
	}
	deletePod(t, m, time.Second)
}

func TestCrashLoopBackOff(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.exit(1) }
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyAlways, "app"))

	st := waitStatus(t, m, "CrashLoopBackOff", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff" && s.ContainerStatuses[0].RestartCount >= 1
	})
	cs := st.ContainerStatuses[0]
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 || lt.Reason != "Error" {
		t.Errorf("lastState = %+v, want Terminated 1 Error", cs.LastTerminationState)
	}
	if st.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running (restartPolicy Always)", st.Phase)
	}
	if !strings.Contains(cs.State.Waiting.Message, "back-off") {
		t.Errorf("message = %q", cs.State.Waiting.Message)
	}
	waitStatus(t, m, "four restarts", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].RestartCount >= 4 })
	deletePod(t, m, time.Second)

	// The gaps between attempts grow: 40, 80, 160, 160 ms.
	rt.mu.Lock()
	tasks := append([]*fakeTask(nil), rt.tasks...)
	rt.mu.Unlock()
	want := []time.Duration{40, 80, 160, 160}
	for i := 1; i < len(tasks) && i <= len(want); i++ {
		gap := tasks[i].started.Sub(tasks[i-1].started)
		if w := want[i-1] * time.Millisecond; gap < w || gap > w+150*time.Millisecond {
			t.Errorf("gap before attempt %d = %v, want about %v", i, gap, w)
		}
	}
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name      string
		policy    corev1.RestartPolicy
		codes     []int32 // exit code of each attempt; the last repeats
		wantPhase corev1.PodPhase
		wantRuns  int
	}{
		{"Never, success", corev1.RestartPolicyNever, []int32{0}, corev1.PodSucceeded, 1},
		{"Never, failure", corev1.RestartPolicyNever, []int32{3}, corev1.PodFailed, 1},
		{"OnFailure, success", corev1.RestartPolicyOnFailure, []int32{0}, corev1.PodSucceeded, 1},
		{"OnFailure, fails then succeeds", corev1.RestartPolicyOnFailure, []int32{2, 2, 0}, corev1.PodSucceeded, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			n := 0
			rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) {
				code := tt.codes[min(n, len(tt.codes)-1)]
				n++
				task.exit(code)
			}
			m := newManager(t, rt)
			apply(t, m, 1, testPod(tt.policy, "app"))
			st := waitStatus(t, m, string(tt.wantPhase), func(s corev1.PodStatus) bool { return s.Phase == tt.wantPhase })
			// Nothing restarts afterwards.
			time.Sleep(3 * testBackoff.Initial)
			if got := len(rt.startedNames()); got != tt.wantRuns {
				t.Errorf("attempts = %d, want %d", got, tt.wantRuns)
			}
			if got := st.ContainerStatuses[0].RestartCount; got != int32(tt.wantRuns-1) {
				t.Errorf("restartCount = %d, want %d", got, tt.wantRuns-1)
			}
			deletePod(t, m, time.Second)
		})
	}
}

func TestInitContainers(t *testing.T) {
	t.Run("run in order before the app", func(t *testing.T) {
		rt := newFakeRuntime()
		initRuns := 0
		rt.onStart = func(spec runtime.ContainerSpec, task *fakeTask) {
			switch spec.Name {
			case "init1":
				initRuns++
				if initRuns == 1 {
					task.exit(1) // fails once, is restarted
					return
				}
				task.exitAfter(20*time.Millisecond, 0)
			case "init2":
				task.exitAfter(20*time.Millisecond, 0)
			}
		}
		m := newManager(t, rt)
		p := testPod(corev1.RestartPolicyAlways, "app")
		p.Spec.InitContainers = []corev1.Container{{Name: "init1", Image: "reg/i1"}, {Name: "init2", Image: "reg/i2"}}
		apply(t, m, 1, p)
		pending := waitStatus(t, m, "pending while initializing", func(s corev1.PodStatus) bool {
			return len(s.InitContainerStatuses) == 2 && s.InitContainerStatuses[0].State.Running != nil
		})
		if pending.Phase != corev1.PodPending {
			t.Errorf("phase while initializing = %s", pending.Phase)
		}
		if w := pending.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
			t.Errorf("app state while initializing = %+v, want Waiting PodInitializing", pending.ContainerStatuses[0].State)
		}
		st := waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
		if diff := cmp.Diff([]string{"init1", "init1", "init2", "app"}, rt.startedNames()); diff != "" {
			t.Errorf("start order (-want +got):\n%s", diff)
		}
		if st.InitContainerStatuses[0].RestartCount != 1 || st.InitContainerStatuses[1].State.Terminated == nil {
			t.Errorf("init statuses = %+v", st.InitContainerStatuses)
		}
		deletePod(t, m, time.Second)
	})
	t.Run("failure under Never fails the pod", func(t *testing.T) {
		rt := newFakeRuntime()
		rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.exit(5) }
		m := newManager(t, rt)
		p := testPod(corev1.RestartPolicyNever, "app")
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "reg/i"}}
		apply(t, m, 1, p)
		waitStatus(t, m, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
		time.Sleep(50 * time.Millisecond)
		if diff := cmp.Diff([]string{"init"}, rt.startedNames()); diff != "" {
			t.Errorf("started (-want +got):\n%s", diff)
		}
		deletePod(t, m, time.Second)
	})
}

func TestImagePullFailure(t *testing.T) {
	rt := newFakeRuntime()
	rt.setPullErr("reg/app:v1", errors.New("401 Unauthorized"))
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyAlways, "app"))

	st := waitStatus(t, m, "ErrImagePull", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "ErrImagePull"
	})
	if msg := st.ContainerStatuses[0].State.Waiting.Message; msg != "401 Unauthorized" {
		t.Errorf("ErrImagePull message = %q", msg)
	}
	if st.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", st.Phase)
	}
	st = waitStatus(t, m, "ImagePullBackOff", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "ImagePullBackOff"
	})
	if msg := st.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "401 Unauthorized") || !strings.Contains(msg, "reg/app:v1") {
		t.Errorf("ImagePullBackOff message = %q", msg)
	}
	rt.setPullErr("reg/app:v1", nil)
	waitStatus(t, m, "Running after the registry recovers", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	deletePod(t, m, time.Second)
}

func TestGenerations(t *testing.T) {
	rt := newFakeRuntime()
	m := newManager(t, rt)
	apply(t, m, 2, testPod(corev1.RestartPolicyAlways, "app"))
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })

	old := testPod(corev1.RestartPolicyAlways, "app")
	old.Spec.Containers[0].Image = "reg/app:old"
	if gen, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: old}); err != nil || gen != 2 {
		t.Fatalf("Apply(older) = %d, %v; want 2, nil", gen, err)
	}
	if gen, err := m.Apply(t.Context(), Desired{Generation: 2, Pod: old}); err != nil || gen != 2 {
		t.Fatalf("Apply(same) = %d, %v; want 2, nil", gen, err)
	}
	other := testPod(corev1.RestartPolicyAlways, "app")
	other.UID = "uid-2"
	if _, err := m.Apply(t.Context(), Desired{Generation: 9, Pod: other}); !errors.Is(err, ErrAnotherPod) {
		t.Fatalf("Apply(other pod) = %v, want ErrAnotherPod", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(rt.startedNames()); n != 1 {
		t.Fatalf("attempts after ignored applies = %d, want 1", n)
	}

	newer := testPod(corev1.RestartPolicyAlways, "app")
	newer.Spec.Containers[0].Image = "reg/app:v2"
	apply(t, m, 3, newer)
	st := waitStatus(t, m, "running v2", func(s corev1.PodStatus) bool {
		return s.ContainerStatuses[0].Image == "reg/app:v2" && s.ContainerStatuses[0].State.Running != nil
	})
	if _, gen, _, _ := m.Status(); gen != 3 {
		t.Errorf("status generation = %d, want 3", gen)
	}
	if st.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("restartCount = %d, want 1", st.ContainerStatuses[0].RestartCount)
	}
	specs := rt.startedSpecs()
	if got := specs[len(specs)-1].Image.Ref; got != "reg/app:v2" {
		t.Errorf("last attempt image = %q", got)
	}
	deletePod(t, m, time.Second)
}

func TestDeleteWithGrace(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(spec runtime.ContainerSpec, task *fakeTask) {
		task.ignoreTerm = spec.Name == "stubborn"
	}
	m := newManager(t, rt)
	apply(t, m, 1, testPod(corev1.RestartPolicyAlways, "polite", "stubborn"))
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodRunning && s.ContainerStatuses[0].State.Running != nil && s.ContainerStatuses[1].State.Running != nil
	})
	start := time.Now()
	deletePod(t, m, 300*time.Millisecond)
	took := time.Since(start)
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("Delete took %v, want about the 300ms grace", took)
	}
	rt.mu.Lock()
	tasks := append([]*fakeTask(nil), rt.tasks...)
	rt.mu.Unlock()
	want := map[string][]syscall.Signal{"polite-0": {syscall.SIGTERM}, "stubborn-0": {syscall.SIGTERM, syscall.SIGKILL}}
	got := map[string][]syscall.Signal{}
	for _, task := range tasks {
		got[task.id] = task.gotSignals()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	st := m.PodStatus()
	if st.Phase != corev1.PodFailed {
		t.Errorf("phase after delete = %s, want Failed (non-zero exits)", st.Phase)
	}
	if code := st.ContainerStatuses[1].State.Terminated.ExitCode; code != 137 {
		t.Errorf("stubborn exit = %d, want 137", code)
	}
	if rt.cleanups != 1 {
		t.Errorf("cleanups = %d", rt.cleanups)
	}
	if _, err := m.Apply(t.Context(), Desired{Generation: 5, Pod: testPod(corev1.RestartPolicyAlways, "polite")}); !errors.Is(err, ErrDeleted) {
		t.Errorf("Apply after delete = %v, want ErrDeleted", err)
	}
}

func TestDeleteUsesPodGrace(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.ignoreTerm = true }
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	g := int64(0)
	p.Spec.TerminationGracePeriodSeconds = &g
	apply(t, m, 1, p)
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	if err := m.Delete(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	sigs := rt.tasks[0].gotSignals()
	rt.mu.Unlock()
	if diff := cmp.Diff([]syscall.Signal{syscall.SIGKILL}, sigs); diff != "" {
		t.Errorf("signals with grace 0 (-want +got):\n%s", diff)
	}
}

func TestContainerRuntimeSpec(t *testing.T) {
	img := runtime.Image{Ref: "r", Config: runtime.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"default"}}}
	tests := []struct {
		name     string
		c        corev1.Container
		env      map[string][]EnvVar
		wantArgs []string
		wantEnv  []string
	}{
		{name: "image defaults", c: corev1.Container{Name: "c"}, wantArgs: []string{"/entry", "default"}},
		{name: "args replace cmd", c: corev1.Container{Name: "c", Args: []string{"x"}}, wantArgs: []string{"/entry", "x"}},
		{name: "command replaces both", c: corev1.Container{Name: "c", Command: []string{"sh"}, Args: []string{"-c", "echo"}}, wantArgs: []string{"sh", "-c", "echo"}},
		{
			name:     "resolved env and expansion",
			c:        corev1.Container{Name: "c", Command: []string{"echo", "$(GREETING)", "$(MISSING)", "$$(GREETING)"}},
			env:      map[string][]EnvVar{"c": {{"GREETING", "hi"}}},
			wantArgs: []string{"echo", "hi", "$(MISSING)", "$(GREETING)"},
			wantEnv:  []string{"GREETING=hi"},
		},
		{
			name:    "literal env without resolution",
			c:       corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)2"}, {Name: "S", ValueFrom: &corev1.EnvVarSource{}}}},
			wantEnv: []string{"A=1", "B=12"}, wantArgs: []string{"/entry", "default"},
		},
	}
	m := newManager(t, newFakeRuntime())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod(corev1.RestartPolicyAlways)
			p.Spec.Containers = []corev1.Container{tt.c}
			spec := m.containerRuntimeSpec(&containerState{name: "c"}, &tt.c, &Desired{Pod: p, Env: tt.env}, img, 2)
			if diff := cmp.Diff(tt.wantArgs, spec.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEnv, spec.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if spec.ID != "c-2" {
				t.Errorf("ID = %q", spec.ID)
			}
		})
	}
	c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("640Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("400Mi"), corev1.ResourceCPU: resource.MustParse("250m")},
	}}
	p := testPod(corev1.RestartPolicyAlways)
	p.Spec.Containers = []corev1.Container{c}
	m.cfg.MemoryCapacity = 4000 << 20
	spec := m.containerRuntimeSpec(&containerState{name: "c"}, &c, &Desired{Pod: p}, img, 0)
	// Burstable, asking for a tenth of the cell's memory.
	if want := (runtime.Resources{MemoryLimitBytes: 640 << 20, CPUQuotaMillis: 500, CPUShares: 256, OOMScoreAdj: 900}); spec.Resources != want {
		t.Errorf("resources = %+v, want %+v", spec.Resources, want)
	}
}

func TestStopSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"": syscall.SIGTERM, "SIGQUIT": syscall.SIGQUIT, "int": syscall.SIGINT, "9": syscall.SIGKILL, "bogus": syscall.SIGTERM} {
		if got := stopSignal(in); got != want {
			t.Errorf("stopSignal(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestSidecarInitContainer(t *testing.T) {
	rt := newFakeRuntime()
	var sidecarRuns atomic.Int32
	rt.onStart = func(spec runtime.ContainerSpec, task *fakeTask) {
		switch spec.Name {
		case "proxy":
			if sidecarRuns.Add(1) == 1 {
				task.exitAfter(20*time.Millisecond, 0) // exits 0 once: restarted all the same
			}
		case "setup":
			task.exitAfter(10*time.Millisecond, 0)
		case "app":
			task.exitAfter(300*time.Millisecond, 0)
		}
	}
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyNever, "app")
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "reg/proxy", RestartPolicy: &always}, {Name: "setup", Image: "reg/setup"}}
	apply(t, m, 1, p)
	running := waitStatus(t, m, "app running beside its sidecar", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodRunning && s.InitContainerStatuses[0].State.Running != nil && s.InitContainerStatuses[0].RestartCount >= 1
	})
	for _, c := range running.Conditions {
		if c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s = %s (%s), want True with a running, ready sidecar", c.Type, c.Status, c.Message)
		}
	}
	if got := rt.startedNames(); got[0] != "proxy" || !slices.Contains(got, "setup") || slices.Index(got, "setup") > slices.Index(got, "app") {
		t.Errorf("start order %v: want the sidecar first, the init container before the app", got)
	}
	waitStatus(t, m, "Succeeded once the app ended", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })
	waitStatus(t, m, "the sidecar stopped after the app", func(s corev1.PodStatus) bool {
		return s.InitContainerStatuses[0].State.Terminated != nil
	})
	if s := m.PodStatus(); s.Phase != corev1.PodSucceeded {
		t.Errorf("phase after the sidecar was stopped = %s, want Succeeded (a sidecar's exit code does not count)", s.Phase)
	}
	deletePod(t, m, time.Second)
}

// TestConditionsOfAFailedInit: a pod whose init container failed under
// restartPolicy Never has the kubelet's conditions: Initialized False
// ContainersNotInitialized naming it, ContainersReady and Ready False
// PodFailed.
func TestConditionsOfAFailedInit(t *testing.T) {
	rt := newFakeRuntime()
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) { task.exit(5) }
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyNever, "app")
	p.Spec.InitContainers = []corev1.Container{{Name: "init1", Image: "reg/i"}}
	apply(t, m, 1, p)
	st := waitStatus(t, m, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
	got := map[corev1.PodConditionType]string{}
	for _, c := range st.Conditions {
		got[c.Type] = string(c.Status) + " " + c.Reason + " " + c.Message
	}
	want := map[corev1.PodConditionType]string{
		corev1.PodInitialized:  "False ContainersNotInitialized containers with incomplete status: [init1]",
		corev1.ContainersReady: "False PodFailed ",
		corev1.PodReady:        "False PodFailed ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	deletePod(t, m, time.Second)
}
