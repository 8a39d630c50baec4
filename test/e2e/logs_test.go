//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hostcells "github.com/kipcell/kip/host/cells"
)

// TestLoudPodKeepsItsLog: on a cell of 512 MiB, one container prints
// 2 GB in lines and another one line of 200 MB without a newline; both
// fail, are restarted and print again. Each run's end is readable by
// kubectl logs: the first one's with --previous while the
// second runs, the second one's after the pod ended, from what kip kept.
// The cell's agent is never restarted. Issue 29: the agent read a whole
// log into memory to serve it and was OOM-killed at 200 MB, losing the
// pod's log; kip kept nothing of a line longer than what it keeps.
func TestLoudPodKeepsItsLog(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	line := strings.Repeat("0123456789", 10)
	// run prints a run's output (first, then second), then its last line,
	// RUN<n>-END; the first run fails, the second waits for /m/stop and
	// succeeds.
	run := func(name, first, second string) corev1.Container {
		return corev1.Container{Name: name, Image: cells.Images.Busybox.Ref,
			VolumeMounts: []corev1.VolumeMount{{Name: "m", MountPath: "/m"}},
			Command: []string{"sh", "-c", "if [ -e /m/" + name + " ]; then n=2; " + second + "; else n=1; touch /m/" + name + "; " + first + "; fi" +
				"; echo RUN$n-END; [ $n = 1 ] && exit 1; until [ -e /m/stop ]; do sleep 0.2; done"}}
	}
	lines := func(n int) string { return "yes " + line + " | head -c " + strconv.Itoa(n/101*101) }
	oneLine := "yes " + line + " | tr -d '\\n' | head -c 200000000"
	// The second run of lines prints less: what kip keeps of a log is
	// bounded by the agent's rotation (50 MB) whatever came before.
	spec := onKip(run("lines", lines(2_000_000_000), lines(200_000_000)), run("oneline", oneLine, oneLine))
	spec.RestartPolicy = corev1.RestartPolicyOnFailure
	spec.Volumes = []corev1.Volume{{Name: "m", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loud", Labels: map[string]string{"app": "loud"},
			Annotations: map[string]string{"kipcell.io/instance-type": "local.small"}},
		Spec: spec,
	}
	created := f.CreatePod(t, ns, pod)
	// The last record of each log: a line, or the end of the long one.
	lastRecord := func(c string, previous bool) string {
		args := []string{"logs", "-n", ns, "loud", "-c", c, "--tail=1"}
		if previous {
			args = append(args, "--previous")
		}
		out, code := kubectl(t, args...)
		if code != 0 {
			t.Errorf("kubectl %s: exit %d, %.300q", strings.Join(args, " "), code, out)
		}
		return out
	}
	f.WaitForPods(t, ns, "app=loud", 1, 10*time.Minute, "both containers in their second run, done printing", func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount != 1 || c.State.Running == nil {
				return false
			}
		}
		return len(p.Status.ContainerStatuses) == 2 &&
			strings.HasSuffix(lastRecord("lines", false), "RUN2-END\n") && strings.HasSuffix(lastRecord("oneline", false), "RUN2-END\n")
	})
	if got := lastRecord("lines", true); got != "RUN1-END\n" {
		t.Errorf("lines --previous --tail=1 = %.200q, want RUN1-END", got)
	}
	if got := lastRecord("oneline", true); !strings.HasSuffix(got, "0123456789RUN1-END\n") {
		t.Errorf("oneline --previous --tail=1 = %.200q, want the long line's end and RUN1-END", got)
	}
	t.Logf("the cell's %s", agentNotRestarted(t, created.UID))
	if out, code := kubectl(t, "exec", "-n", ns, "loud", "-c", "lines", "--", "touch", "/m/stop"); code != 0 {
		t.Fatalf("kubectl exec: exit %d, %s", code, out)
	}
	f.WaitForPods(t, ns, "app=loud", 1, 5*time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if out, code := kubectl(t, "logs", "-n", ns, "loud", "-c", "lines", "--tail=2"); code != 0 || out != line+"\nRUN2-END\n" {
		t.Errorf("kubectl logs -c lines --tail=2 of the ended pod: exit %d, %.200q; want %q", code, out, line+"\nRUN2-END\n")
	}
	// What kip kept of the long line: its newest part, RUN2-END on it.
	if out, code := kubectl(t, "logs", "-n", ns, "loud", "-c", "oneline", "--limit-bytes=100"); code != 0 || len(out) != 100 || !strings.Contains(line+line, out) {
		t.Errorf("kubectl logs -c oneline --limit-bytes=100 of the ended pod: exit %d, %.200q; want the kept part of the long line", code, out)
	}
	if out, _ := kubectl(t, "logs", "-n", ns, "loud", "-c", "oneline", "--tail=1"); !strings.HasSuffix(out, "0123456789RUN2-END\n") {
		t.Errorf("kubectl logs -c oneline --tail=1 of the ended pod: %.200q, want the long line's end", out)
	}
	if ev := podEvents(t, ns, "loud"); strings.Contains(ev, hostcells.ReasonLogsNotKept) {
		t.Errorf("the pod's log was not kept:\n%s", ev)
	}
}

// agentNotRestarted fails the test if the local plugin restarted the
// agent of the pod's cell (the local pass), and returns the agent's PID and
// peak memory so far.
func agentNotRestarted(t *testing.T, uid types.UID) string {
	t.Helper()
	pid, restarts := localAgent(t, uid)
	if restarts != 0 {
		t.Errorf("the cell's agent was restarted %d times", restarts)
	}
	peak := "unknown"
	if kb, err := peakKB(pid); err == nil {
		peak = strconv.Itoa(kb) + " KiB"
	}
	return "agent pid " + strconv.Itoa(pid) + ", peak RSS " + peak
}

// localAgent reads the local plugin's record of the pod's cell: the
// agent's PID and how often the plugin restarted it.
func localAgent(t testing.TB, uid types.UID) (pid, restarts int) {
	t.Helper()
	dir := cellDirOf(t, uid)
	if dir == "" {
		t.Fatalf("no local cell for pod %s", uid)
	}
	data, err := os.ReadFile(filepath.Join(dir, "instance.json"))
	if err != nil {
		t.Fatalf("reading the local plugin's record: %v", err)
	}
	var r struct {
		PID      int `json:"pid"`
		Restarts int `json:"restarts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.PID, r.Restarts
}

// peakKB reads a process's peak RSS (VmHWM) in KiB.
func peakKB(pid int) (int, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for l := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}

// TestPodPastItsEphemeralStorageIsEvicted: a pod whose output passes its
// ephemeral-storage limit is evicted as a kubelet evicts it: Failed,
// reason Evicted, the kubelet's message, a Warning event Evicted, its
// container not restarted although its restartPolicy is Always; and
// kubectl logs still shows the end of what it printed. Its output counts
// against its storage (issue 29: a pod could print without bound into
// the cell's disk, this machine's with the local plugin), and the Kip
// node lists ephemeral-storage, without which the scheduler placed no
// pod with such a limit here.
func TestPodPastItsEphemeralStorageIsEvicted(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := onKip(corev1.Container{Name: "loud", Image: cells.Images.Busybox.Ref,
		Command:   []string{"sh", "-c", "yes 0123456789abcdef | head -c 16777216; echo; echo END-OF-OUTPUT; exec sleep 3600"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("8Mi")}}})
	spec.RestartPolicy = corev1.RestartPolicyAlways
	createPod(t, ns, "hoard", spec)
	p := f.WaitForPods(t, ns, "app=hoard", 1, 3*time.Minute, "Failed", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed
	})[0]
	const msg = "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. "
	if p.Status.Reason != "Evicted" || p.Status.Message != msg {
		t.Errorf("status reason %q message %q, want Evicted %q", p.Status.Reason, p.Status.Message, msg)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("container %s restarted %d times after its eviction", cs.Name, cs.RestartCount)
		}
	}
	if ev := podEvents(t, ns, "hoard"); !strings.Contains(ev, "Warning Evicted "+msg) {
		t.Errorf("events of the pod:\n%s\nwant Warning Evicted %q", ev, msg)
	}
	if out, code := kubectl(t, "-n", ns, "logs", "hoard", "--tail=1"); code != 0 || strings.TrimSpace(out) != "END-OF-OUTPUT" {
		t.Errorf("kubectl logs --tail=1 of the evicted pod (exit %d) = %q, want END-OF-OUTPUT", code, out)
	}
}
