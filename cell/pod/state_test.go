package pod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

// newAgentManager returns a manager keeping its state, logs, volumes and
// /etc files under dir, as an agent does under its state directory: a
// second one on the same dir is the agent after a restart.
func newAgentManager(t *testing.T, rt *fakeRuntime, dir string) *Manager {
	t.Helper()
	return New(Config{
		Runtime: rt, Logs: logs.NewStore(filepath.Join(dir, "logs")), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
		NetNSPath: "/var/run/netns/test", Backoff: testBackoff, StatePath: filepath.Join(dir, "pod.json"),
		VolumesDir: filepath.Join(dir, "volumes"), EtcDir: filepath.Join(dir, "etc"), TerminationDir: filepath.Join(dir, "termination"),
	})
}

// task returns the task a fake agent was given for id: the first (the
// one Start made) or the last (a Reattach).
func (f *fakeRuntime) task(id string, last bool) *fakeTask {
	f.mu.Lock()
	defer f.mu.Unlock()
	var found *fakeTask
	for _, t := range f.tasks {
		if t.id == id {
			found = t
			if !last {
				break
			}
		}
	}
	return found
}

func restore(t *testing.T, m *Manager, uid string) bool {
	t.Helper()
	ok, err := m.Restore(t.Context(), uid)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return ok
}

func readyApp(s corev1.PodStatus) bool {
	return s.Phase == corev1.PodRunning && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].Ready
}

func TestRestoreTakesOverRunningContainers(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	rt.onStart = func(spec runtime.ContainerSpec, task *fakeTask) {
		if spec.Name == "init" {
			task.exit(0)
			return
		}
		_, _ = io.WriteString(spec.Stdout, "before the restart\n")
	}
	rt.onExec = func(context.Context, string, []string) (string, int32) { return "ok", 0 }
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "reg/init:v1"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}

	first := newAgentManager(t, rt, dir)
	if _, err := first.Apply(t.Context(), Desired{Generation: 2, Pod: p, Volumes: map[string]VolumeFiles{"cfg": {Files: map[string][]byte{"k": []byte("v")}}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, first, "Running and ready", readyApp)
	before, _, _, _ := first.Status()
	// The first agent dies here (it is left alone; its view of the
	// container never ends). The second one starts on the same disk.
	second := newAgentManager(t, rt, dir)
	if !restore(t, second, "uid-1") {
		t.Fatal("Restore found nothing to resume")
	}
	waitStatus(t, second, "Running and ready", readyApp)
	// The host sees the same status: restart count 0, the same container
	// ID and start time, the conditions' times.
	after, gen, _, _ := second.Status()
	if diff := cmp.Diff(string(before), string(after)); diff != "" || gen != 2 {
		t.Errorf("generation %d, status after the restart (-before +after):\n%s", gen, diff)
	}
	if got := rt.startedNames(); !slices.Equal(got, []string{"init", "app"}) {
		t.Errorf("started %v, want init and app once", got)
	}
	re := rt.reattachedSpecs()
	if len(re) != 1 || re[0].ID != "app-0" || !re[0].StartedAt.Equal(rt.task("app-0", false).started) {
		t.Fatalf("reattached %+v, want app-0 with its start time", re)
	}

	// Its output goes on into the same attempt's log.
	_, _ = io.WriteString(re[0].Stdout, "after the restart\n")
	path, err := second.LogPath("app", false)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "before the restart") || !strings.Contains(string(data), "after the restart") {
		t.Errorf("log %s = %q, want both lines", path, data)
	}
	// Exec reaches it; the volumes are still there and not written again.
	task, err := second.Task("app")
	if err != nil || task.ID() != "app-0" {
		t.Fatalf("Task(app) = %v, %v", task, err)
	}
	proc, err := task.Exec(t.Context(), runtime.ExecSpec{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(t.Context()); err != nil || code != 0 {
		t.Errorf("exec = %d, %v", code, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "volumes", "cfg", "k")); string(got) != "v" {
		t.Errorf("configMap file = %q, want v", got)
	}
	mounts := rt.startedSpecs()[1].Mounts
	// The same generation is not applied again; another pod is refused.
	if gen, err := second.Apply(t.Context(), Desired{Generation: 2, Pod: p}); gen != 2 || err != nil {
		t.Errorf("Apply(gen 2) = %d, %v", gen, err)
	}
	other := testPod(corev1.RestartPolicyAlways, "app")
	other.UID = "uid-2"
	if _, err := second.Apply(t.Context(), Desired{Generation: 3, Pod: other}); !errors.Is(err, ErrAnotherPod) {
		t.Errorf("Apply(another pod) = %v, want ErrAnotherPod", err)
	}

	// Its exit is the new agent's to see, and the restart policy applies.
	rt.task("app-0", true).exit(3)
	st := waitStatus(t, second, "restarted", func(s corev1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount == 1 && s.ContainerStatuses[0].State.Running != nil
	})
	if term := st.ContainerStatuses[0].LastTerminationState.Terminated; term == nil || term.ExitCode != 3 {
		t.Errorf("last state = %+v, want Terminated 3", st.ContainerStatuses[0].LastTerminationState)
	}
	specs := rt.startedSpecs()
	if last := specs[len(specs)-1]; last.ID != "app-1" || !slices.Equal(last.Mounts, mounts) {
		t.Errorf("restarted %s with mounts %v, want app-1 with %v", last.ID, last.Mounts, mounts)
	}
	deletePod(t, second, 0)
	if _, err := os.Stat(filepath.Join(dir, "pod.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after Delete: %v, want none", err)
	}
}

func TestRestoreContainersThatEndedWithoutAnAgent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		end    func(*fakeTask)
		want   func(corev1.ContainerStatus) bool
		starts []string
	}{{
		name:   "exited while no agent ran",
		policy: corev1.RestartPolicyNever,
		end:    func(t *fakeTask) { t.endUnseen(5) },
		want: func(s corev1.ContainerStatus) bool {
			term := s.State.Terminated
			return term != nil && term.ExitCode == 5 && term.Reason == "Error" && s.RestartCount == 0
		},
		starts: []string{"app"},
	}, {
		name:   "gone",
		policy: corev1.RestartPolicyAlways,
		end:    (*fakeTask).removeUnseen,
		want: func(s corev1.ContainerStatus) bool {
			term := s.LastTerminationState.Terminated
			return s.State.Running != nil && s.RestartCount == 1 && term != nil && term.Reason == "ContainerStatusUnknown" && term.ExitCode == 137
		},
		starts: []string{"app", "app"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rt := newFakeRuntime()
			first := newAgentManager(t, rt, dir)
			apply(t, first, 1, testPod(tc.policy, "app"))
			waitStatus(t, first, "Running", readyApp)
			tc.end(rt.task("app-0", false))

			second := newAgentManager(t, rt, dir)
			if !restore(t, second, "uid-1") {
				t.Fatal("Restore found nothing to resume")
			}
			st := waitStatus(t, second, "the container's end", func(s corev1.PodStatus) bool { return tc.want(s.ContainerStatuses[0]) })
			if tc.policy == corev1.RestartPolicyNever && st.Phase != corev1.PodFailed {
				t.Errorf("phase = %s, want Failed", st.Phase)
			}
			if got := rt.startedNames(); !slices.Equal(got, tc.starts) {
				t.Errorf("started %v, want %v", got, tc.starts)
			}
			deletePod(t, second, 0)
		})
	}
}

func TestRestoreStartsAfresh(t *testing.T) {
	for _, tc := range []struct {
		name string
		uid  string
		save bool
	}{
		{name: "no state", uid: "uid-1"},
		{name: "another pod's state", uid: "uid-2", save: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rt := newFakeRuntime()
			if tc.save {
				first := newAgentManager(t, rt, dir)
				apply(t, first, 1, testPod(corev1.RestartPolicyAlways, "app"))
				waitStatus(t, first, "Running", readyApp)
			}
			second := newAgentManager(t, rt, dir)
			if restore(t, second, tc.uid) {
				t.Fatal("Restore resumed a pod")
			}
			if re := rt.reattachedSpecs(); len(re) != 0 {
				t.Errorf("reattached %v", re)
			}
			// The manager takes a new pod as if nothing had been.
			p := testPod(corev1.RestartPolicyAlways, "app")
			p.UID = "uid-2"
			apply(t, second, 1, p)
			waitStatus(t, second, "Running", readyApp)
		})
	}
}

func TestRestoreRefusesABrokenStateFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pod.json"), []byte(`{"version":1,"desired":`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newAgentManager(t, newFakeRuntime(), dir)
	if ok, err := m.Restore(t.Context(), ""); ok || err == nil {
		t.Errorf("Restore = %v, %v; want false and an error", ok, err)
	}
}

// TestStandbyIsBoundByItsFirstPod: a standby cell's agent (its bootstrap
// names no pod) runs none until the first Apply, which binds it for good:
// its PodUID says so, another pod is refused, and an agent restarted on
// the same disk, still knowing no pod from its bootstrap, resumes it.
func TestStandbyIsBoundByItsFirstPod(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	first := newAgentManager(t, rt, dir)
	if restore(t, first, "") {
		t.Fatal("Restore of a new standby resumed a pod")
	}
	if uid := first.PodUID(); uid != "" {
		t.Fatalf("PodUID of a standby = %q, want empty", uid)
	}
	apply(t, first, 1, testPod(corev1.RestartPolicyAlways, "app"))
	waitStatus(t, first, "Running", readyApp)
	if uid := first.PodUID(); uid != "uid-1" {
		t.Fatalf("PodUID after the first Apply = %q, want uid-1", uid)
	}
	other := testPod(corev1.RestartPolicyAlways, "app")
	other.UID = "uid-2"
	if _, err := first.Apply(t.Context(), Desired{Generation: 2, Pod: other}); !errors.Is(err, ErrAnotherPod) {
		t.Fatalf("Apply(another pod) = %v, want ErrAnotherPod", err)
	}
	second := newAgentManager(t, rt, dir)
	if !restore(t, second, "") {
		t.Fatal("a restarted standby agent did not resume the pod it was given")
	}
	if uid := second.PodUID(); uid != "uid-1" {
		t.Errorf("PodUID after the restart = %q, want uid-1", uid)
	}
	waitStatus(t, second, "Running", readyApp)
}

// TestRestoredPodKeepsTheNodesDefaults: the node's settings that came with
// the pod (seccompDefault, the containers' log rotation) hold for the
// containers a restarted agent starts, as for those the first one
// started: a restart of the agent must not run a pod's next attempt
// without the default seccomp profile.
func TestRestoredPodKeepsTheNodesDefaults(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	rt.onStart = func(spec runtime.ContainerSpec, _ *fakeTask) {
		for range 5 {
			_, _ = io.WriteString(spec.Stdout, strings.Repeat("x", 599)+"\n")
		}
	}
	p := testPod(corev1.RestartPolicyAlways, "app")
	first := newAgentManager(t, rt, dir)
	if _, err := first.Apply(t.Context(), Desired{Generation: 1, Pod: p, SeccompDefault: true, LogRotation: logs.Rotation{MaxSize: 1000, MaxFiles: 2}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, first, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	second := newAgentManager(t, rt, dir)
	if !restore(t, second, "uid-1") {
		t.Fatal("Restore found nothing to resume")
	}
	rt.task("app-0", true).exit(1)
	waitStatus(t, second, "restarted", func(s corev1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount == 1 && s.ContainerStatuses[0].State.Running != nil
	})
	specs := rt.startedSpecs()
	for _, s := range specs {
		if s.Security.Seccomp != runtime.SeccompRuntimeDefault {
			t.Errorf("attempt %s started with seccomp %q, want the node's default %q", s.ID, s.Security.Seccomp, runtime.SeccompRuntimeDefault)
		}
	}
	// 3,000 bytes a run, rotated past 1,000 bytes, two files kept: the
	// current one and one rotated.
	for attempt := range 2 {
		rotated, _ := filepath.Glob(filepath.Join(dir, "logs", "app", fmt.Sprintf("%d.log.rotated-*", attempt)))
		if len(rotated) != 1 {
			t.Errorf("attempt %d: rotated files %v, want one (the node's rotation, 1000 bytes and 2 files)", attempt, rotated)
		}
	}
	deletePod(t, second, 0)
}
