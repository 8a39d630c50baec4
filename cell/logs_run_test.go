package cell_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
)

// heapPeak samples the process's HeapInuse until stop is called, which
// returns the highest value seen. The agent runs in this process, so its
// heap is in there.
func heapPeak() (stop func() uint64) {
	done := make(chan struct{})
	var (
		mu   sync.Mutex
		peak uint64
		wg   sync.WaitGroup
	)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		peak = max(peak, ms.HeapInuse)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// logsEnd reads a whole Logs stream, keeping only its size and its last
// keep bytes: the test must not hold what it checks the agent does not.
func logsEnd(t *testing.T, a *agent, req api.LogsOptions, keep int) (size int64, end string) {
	t.Helper()
	stream, err := a.client.Logs(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return size, string(last[max(0, len(last)-keep):])
		}
		if err != nil {
			t.Fatalf("Logs(%v): %v", req, err)
		}
		size += int64(len(c))
		last = append(last, c...)
		if len(last) > 2*keep {
			last = append(last[:0], last[len(last)-keep:]...)
		}
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && !d.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAgentLogsOfAPodThatPrintsALot: a container printing 200 MB, in lines
// or in one line without a newline, neither grows the agent's heap with
// its output nor fills the disk beyond the rotation's bound, and the end of
// its log stays readable (issue 29: the agent was OOM-killed and every
// line was lost).
func TestAgentLogsOfAPodThatPrintsALot(t *testing.T) {
	const (
		output = 200_000_000
		// What the agent's heap may grow by while it captures and serves
		// the output: a few buffers per stream, not the output.
		heapBound = 48 << 20
		// Five files of 10 MiB, each rotated after a write of at most a
		// few records past its limit.
		diskBound = 5*(10<<20) + 1<<20
	)
	line := strings.Repeat("0123456789", 10) // 101 bytes with its newline
	tests := []struct {
		name    string
		script  string
		wantEnd string // the end of the whole log
		// wantTail: the end of --tail=1, which is a record: the last line,
		// or the last piece of MaxLineSize of a long one.
		wantTail string
	}{
		{"lines", "yes " + line + " | head -c " + strconv.Itoa(output/101*101) + "; echo LAST-LINE-KEPT",
			line + "\nLAST-LINE-KEPT\n", "LAST-LINE-KEPT\n"},
		{"one line without a newline", "head -c " + strconv.Itoa(output) + " /dev/zero | tr '\\0' x; printf LAST",
			"xxxxLAST", "xxxxLAST"},
	}
	e := newEnv(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.startAgent(t, "10.251.9."+strconv.Itoa(40+i))
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "loud", Namespace: "default", UID: "uid-loud"},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "loud", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c", tt.script}}},
				},
			}
			// A frequent GC keeps HeapInuse near what is live, not what
			// waits to be collected.
			defer debug.SetGCPercent(debug.SetGCPercent(20))
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			stop := heapPeak()
			e.applyPod(t, a, p, nil)
			watch(t, a, "Succeeded", func(s *corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })

			size, end := logsEnd(t, a, api.LogsOptions{Container: "loud", TailLines: -1}, 256)
			if !strings.HasSuffix(end, tt.wantEnd) {
				t.Errorf("the log (%d bytes) ends with %q, want %q", size, end, tt.wantEnd)
			}
			tailSize, tail := logsEnd(t, a, api.LogsOptions{Container: "loud", TailLines: 1}, 64)
			if !strings.HasSuffix(tail, tt.wantTail) || tailSize > 16<<10 {
				t.Errorf("--tail=1 is %d bytes ending with %q, want at most 16 KiB ending with %q", tailSize, tail, tt.wantTail)
			}
			_, stamped := logsEnd(t, a, api.LogsOptions{Container: "loud", TailLines: 1, Timestamps: true}, 1<<20)
			if !strings.HasPrefix(stamped, time.Now().UTC().Format("2006-01-02T")) || !strings.HasSuffix(stamped, tt.wantTail) {
				t.Errorf("--tail=1 --timestamps = %.40q…%q", stamped, stamped[max(0, len(stamped)-20):])
			}
			grown := int64(stop()) - int64(base.HeapInuse)
			if grown > heapBound {
				t.Errorf("the heap grew by %d MiB while the container printed %d MB, want at most %d MiB",
					grown>>20, output/1_000_000, heapBound>>20)
			}
			n := dirSize(t, filepath.Join(e.d.Dir, a.cellID, "logs", "loud"))
			if n > diskBound {
				t.Errorf("the container's log files hold %d MiB, want at most %d MiB", n>>20, diskBound>>20)
			}
			t.Logf("the heap grew by %d MiB at most; the log files hold %d MiB, %d MiB of it served", grown>>20, n>>20, size>>20)
		})
	}
}

// TestAgentRotatesLogsAsTheNodeSays: the rotation the host sends with the
// pod (kip's cells.containerLogMaxBytes and containerLogMaxFiles) bounds a
// container's log files, and the log's end stays readable.
func TestAgentRotatesLogsAsTheNodeSays(t *testing.T) {
	const maxSize, maxFiles = 64 << 10, 3
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.50")
	line := strings.Repeat("0123456789", 10)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rotated", Namespace: "default", UID: "uid-rotated"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c",
				"yes " + line + " | head -c 2020000; echo LAST-LINE-KEPT"}}},
		},
	}
	e.applyPodWith(t, a, p, &api.PodRequest{LogRotation: &api.LogRotation{MaxSizeBytes: maxSize, MaxFiles: maxFiles}})
	watch(t, a, "Succeeded", func(s *corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })
	dir := filepath.Join(e.d.Dir, a.cellID, "logs", "c")
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	// Each file is rotated after the write that takes it past the size: a
	// write is at most a few records past it.
	if n := dirSize(t, dir); len(files) != maxFiles || n > maxFiles*(maxSize+64<<10) {
		t.Errorf("the container's log is %d files of %d bytes in all, want %d files of about %d bytes", len(files), n, maxFiles, maxSize)
	}
	if _, end := logsEnd(t, a, api.LogsOptions{Container: "c", TailLines: 2}, 256); end != line+"\nLAST-LINE-KEPT\n" {
		t.Errorf("--tail=2 = %q", end)
	}
}
