//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkLogVolume measures what a pod's output costs the cell's agent
// and kip, with the run's plugin's local cells: one pod per case on a
// local.small cell (512 MiB), whose container prints the case's bytes
// (lines of 100 characters, or one line without a newline), then
// LOG-END, and waits until the benchmark has read the agent's peak RSS;
// then it ends and kip keeps its log. Per case:
//
//   - agent-peak-MB: the agent's VmHWM while the pod ran (it printed
//     everything and the benchmark read the last line through kubectl);
//   - kip-peak-MB: kip's VmHWM after it kept the log (kip's whole life, so
//     the cases run from the smallest);
//   - MB/s: the bytes over the time from the pod's Running to LOG-END in
//     kubectl logs.
//
// Run it with programs built without the race detector:
//
//	KIP_E2E_RACE=0 go test -tags e2e -run '^$' -bench LogVolume -benchtime=1x -timeout 30m ./test/e2e/
func BenchmarkLogVolume(b *testing.B) {
	line := strings.Repeat("0123456789", 10)
	for _, c := range []struct {
		name  string
		bytes int
		print string
	}{
		{"lines=10MB", 10e6, "yes " + line + " | head -c 10000000"},
		{"lines=100MB", 100e6, "yes " + line + " | head -c 100000000"},
		{"oneline=200MB", 200e6, "yes " + line + " | tr -d '\\n' | head -c 200000000"},
		{"lines=1GB", 1e9, "yes " + line + " | head -c 1000000000"},
		{"lines=2GB", 2e9, "yes " + line + " | head -c 2000000000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				logVolume(b, c.bytes, c.print)
			}
		})
	}
}

func logVolume(b *testing.B, bytes int, print string) {
	ns := f.Namespace(b)
	spec := onKip(corev1.Container{Name: "loud", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c",
		print + "; echo; echo LOG-END; until [ -e /tmp/stop ]; do sleep 0.2; done"}})
	spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loud", Labels: map[string]string{"app": "loud"},
			Annotations: map[string]string{"kipcell.io/instance-type": "local.small"}},
		Spec: spec,
	}
	created := f.CreatePod(b, ns, pod)
	f.WaitForPods(b, ns, "app=loud", 1, 5*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	start := time.Now()
	deadline := start.Add(20 * time.Minute)
	for {
		out, _ := kubectl(b, "logs", "-n", ns, "loud", "--tail=1")
		if out == "LOG-END\n" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no LOG-END after 20 minutes: %q", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	elapsed := time.Since(start)
	pid, _ := localAgent(b, created.UID)
	agent, err := peakKB(pid)
	if err != nil {
		b.Fatal(err)
	}
	if out, code := kubectl(b, "exec", "-n", ns, "loud", "--", "touch", "/tmp/stop"); code != 0 {
		b.Fatalf("kubectl exec: exit %d, %s", code, out)
	}
	f.WaitForPods(b, ns, "app=loud", 1, 5*time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if out, code := kubectl(b, "logs", "-n", ns, "loud", "--tail=1"); code != 0 || out != "LOG-END\n" {
		b.Fatalf("the kept log: exit %d, %q", code, out)
	}
	b.ReportMetric(float64(agent)/1024, "agent-peak-MB")
	kipPeak, err := peakKB(kip.PID())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(kipPeak)/1024, "kip-peak-MB")
	b.ReportMetric(float64(bytes)/1e6/elapsed.Seconds(), "MB/s")
}
