package pod

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

func TestTerminationMessage(t *testing.T) {
	long := strings.Repeat("x", 5000) + "END"
	tests := []struct {
		name   string
		policy corev1.TerminationMessagePolicy
		write  string // to the termination message file
		log    string // to stdout
		exit   int32
		want   string
	}{
		{"from the file", corev1.TerminationMessageReadFile, "all done", "noise\n", 0, "all done"},
		{"the file's last 4 KiB", corev1.TerminationMessageReadFile, long, "", 0, long[len(long)-4096:]},
		{"no fallback without the policy", corev1.TerminationMessageReadFile, "", "boom\n", 1, ""},
		{"fallback to the log on error", corev1.TerminationMessageFallbackToLogsOnError, "", "line 1\nboom\n", 1, "line 1\nboom\n"},
		{"no fallback on success", corev1.TerminationMessageFallbackToLogsOnError, "", "fine\n", 0, ""},
		{"the file wins over the log", corev1.TerminationMessageFallbackToLogsOnError, "written", "boom\n", 1, "written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			var mode os.FileMode
			rt.onStart = func(spec runtime.ContainerSpec, task *fakeTask) {
				for _, mt := range spec.Mounts {
					if mt.Destination == "/dev/termination-log" {
						if fi, err := os.Stat(mt.Source); err == nil {
							mode = fi.Mode().Perm()
						}
						if err := os.WriteFile(mt.Source, []byte(tt.write), 0o666); err != nil {
							t.Error(err)
						}
					}
				}
				_, _ = io.WriteString(spec.Stdout, tt.log)
				task.exitAfter(10*time.Millisecond, tt.exit)
			}
			m := New(Config{Runtime: rt, Logs: logs.NewStore(t.TempDir()), TerminationDir: t.TempDir(), Backoff: testBackoff})
			p := testPod(corev1.RestartPolicyNever, "app")
			p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
			p.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			apply(t, m, 1, p)
			st := waitStatus(t, m, "ended", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Terminated != nil })
			if got := st.ContainerStatuses[0].State.Terminated.Message; got != tt.want {
				t.Errorf("message = %q, want %q", got, tt.want)
			}
			if mode != 0o666 {
				t.Errorf("termination file mode %v, want 0666 (writable by a non-root container)", mode)
			}
			deletePod(t, m, 0)
		})
	}
}
