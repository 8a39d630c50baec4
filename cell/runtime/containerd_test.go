package runtime_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/kipcell/kip/cell/runtime"
	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
	"github.com/kipcell/kip/test/syncbuf"
)

// waitExited fails the test with msg unless task exits within d.
func waitExited(t *testing.T, task interface{ Exited() <-chan struct{} }, d time.Duration, msg string) {
	t.Helper()
	select {
	case <-task.Exited():
	case <-time.After(d):
		t.Fatal(msg)
	}
}

func TestContainerd(t *testing.T) {
	containerdtest.Require(t)
	ctx := t.Context()
	d := containerdtest.StartDaemon(t)
	// A private registry: pulls need the credentials.
	reg, err := registry.Start(ctx, registry.Options{Username: "puller", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	set, err := images.PushAll(ctx, reg)
	if err != nil {
		t.Fatalf("pushing test images: %v", err)
	}
	netns := containerdtest.NewNetns(t, "10.251.3.7")
	ns := "kip-rt-" + containerdtest.Random(6)
	rt, err := runtime.NewContainerd(d.Client, runtime.ContainerdConfig{Namespace: ns, StateDir: filepath.Join(d.Dir, "agent"), RuncRoot: d.RuncRoot})
	if err != nil {
		t.Fatal(err)
	}
	creds := []runtime.Credential{{Server: "http://" + reg.Host() + "/v2/", Username: "puller", Password: "s3cret"}}

	t.Run("pull without credentials fails", func(t *testing.T) {
		_, err := rt.EnsureImage(ctx, set.Busybox.Ref, runtime.PullAlways, nil)
		if !errors.Is(err, runtime.ErrImagePull) {
			t.Fatalf("EnsureImage = %v, want ErrImagePull", err)
		}
		t.Logf("message: %v", err)
	})
	img, err := rt.EnsureImage(ctx, set.Busybox.Ref, runtime.PullIfNotPresent, creds)
	if err != nil {
		t.Fatalf("EnsureImage: %v", err)
	}
	if !strings.HasSuffix(img.ID, set.Busybox.Digest) {
		t.Errorf("image ID %q, want one ending in %s", img.ID, set.Busybox.Digest)
	}
	if _, err := rt.EnsureImage(ctx, set.Busybox.Ref, runtime.PullNever, nil); err != nil {
		t.Errorf("EnsureImage(Never) of a present image: %v", err)
	}
	if _, err := rt.EnsureImage(ctx, set.Hello.Ref, runtime.PullNever, nil); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("EnsureImage(Never) of an absent image = %v, want ErrImageNeverPull", err)
	}

	t.Run("runs in the netns with the pod IP, limits and exit code", func(t *testing.T) {
		var out, errOut syncbuf.Buffer
		task, err := rt.Start(ctx, runtime.ContainerSpec{
			ID: "ip-0", Name: "ip", Image: img, NetNSPath: netns.Path, Hostname: "mypod",
			Args:      []string{"sh", "-c", "ip -4 addr; hostname; echo $GREETING; cat /sys/fs/cgroup/memory/memory.limit_in_bytes; echo oops >&2; exit 7"},
			Env:       []string{"GREETING=hello-cell"},
			Resources: runtime.Resources{MemoryLimitBytes: 64 << 20, CPUQuotaMillis: 500, CPUShares: 512},
			Stdout:    &out, Stderr: &errOut,
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		waitExited(t, task, 20*time.Second, "container did not exit")
		if code := task.Status().Code; code != 7 {
			t.Errorf("exit code = %d, want 7", code)
		}
		if err := task.Delete(ctx); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		for _, want := range []string{"10.251.3.7", "mypod", "hello-cell", "67108864"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("stdout lacks %q:\n%s", want, out.String())
			}
		}
		if errOut.String() != "oops\n" {
			t.Errorf("stderr = %q", errOut.String())
		}
	})

	// An ephemeral container with a target (kubectl debug --target) joins
	// the target's PID namespace: its ps shows the target's process, as
	// PID 1; without PIDNSPath it sees only its own.
	t.Run("joins another container's PID namespace", func(t *testing.T) {
		target, err := rt.Start(ctx, runtime.ContainerSpec{
			ID: "target-0", Name: "target", Image: img, NetNSPath: netns.Path, Args: []string{"sleep", "4242"},
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer func() { _ = target.Delete(ctx) }()
		for _, tt := range []struct {
			name, pidns string
			want        bool
		}{
			{"debugger", "/proc/" + strconv.Itoa(int(target.Pid())) + "/ns/pid", true},
			{"loner", "", false},
		} {
			var out syncbuf.Buffer
			task, err := rt.Start(ctx, runtime.ContainerSpec{
				ID: tt.name + "-0", Name: tt.name, Image: img, NetNSPath: netns.Path, PIDNSPath: tt.pidns,
				Args: []string{"ps", "-o", "pid,args"}, Stdout: &out, Stderr: &out,
			})
			if err != nil {
				t.Fatalf("Start %s: %v", tt.name, err)
			}
			waitExited(t, task, 20*time.Second, tt.name+" did not exit")
			_ = task.Delete(ctx)
			got := false
			for _, l := range strings.Split(out.String(), "\n") {
				if f := strings.Fields(l); len(f) == 3 && f[0] == "1" && f[1] == "sleep" && f[2] == "4242" {
					got = true
				}
			}
			if got != tt.want {
				t.Errorf("%s (PID namespace %q) sees the target's sleep as PID 1: %v, want %v; ps:\n%s", tt.name, tt.pidns, got, tt.want, out.String())
			}
		}
	})

	t.Run("exec, TTY, stdin and stop", func(t *testing.T) {
		task, err := rt.Start(ctx, runtime.ContainerSpec{
			ID: "sleeper-0", Name: "sleeper", Image: img, NetNSPath: netns.Path,
			Args: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"},
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer func() { _ = task.Delete(ctx) }()

		var out, errOut syncbuf.Buffer
		p, err := task.Exec(ctx, runtime.ExecSpec{Args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: &out, Stderr: &errOut})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 3 {
			t.Errorf("exec Wait = %d, %v; want 3", code, err)
		}
		if out.String() != "out\n" || errOut.String() != "err\n" {
			t.Errorf("exec output = %q / %q", out.String(), errOut.String())
		}
		// Wait returns with the whole output, however quickly the
		// process exits: none of it is left unread in the FIFOs.
		for i := range 100 {
			var out syncbuf.Buffer
			p, err := task.Exec(ctx, runtime.ExecSpec{Args: []string{"sh", "-c", "seq 1000"}, Stdout: &out})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if _, err := p.Wait(ctx); err != nil {
				t.Fatalf("exec Wait: %v", err)
			}
			if got := out.String(); !strings.HasSuffix(got, "\n1000\n") {
				t.Fatalf("exec %d: output of %d bytes ends %q, want all of seq 1000", i, len(got), got[max(0, len(got)-20):])
			}
		}

		var tty syncbuf.Buffer
		inR, inW := io.Pipe()
		p, err = task.Exec(ctx, runtime.ExecSpec{Args: []string{"sh"}, TTY: true, Stdin: inR, Stdout: &tty})
		if err != nil {
			t.Fatalf("Exec TTY: %v", err)
		}
		if err := p.Resize(ctx, 132, 43); err != nil {
			t.Fatalf("Resize: %v", err)
		}
		if _, err := io.WriteString(inW, "stty size; tty; exit 4\n"); err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 4 {
			t.Errorf("TTY exec Wait = %d, %v; want 4", code, err)
		}
		_ = inW.Close()
		if !strings.Contains(tty.String(), "43 132") || !strings.Contains(tty.String(), "/dev/pts/") {
			t.Errorf("TTY output = %q, want the size and a pts", tty.String())
		}

		var wc syncbuf.Buffer
		inR, inW = io.Pipe()
		p, err = task.Exec(ctx, runtime.ExecSpec{Args: []string{"wc", "-c"}, Stdin: inR, Stdout: &wc})
		if err != nil {
			t.Fatalf("Exec stdin: %v", err)
		}
		_, _ = io.WriteString(inW, "seventeen bytes!\n")
		_ = inW.Close()
		time.Sleep(50 * time.Millisecond)
		if err := p.CloseStdin(ctx); err != nil {
			t.Fatalf("CloseStdin: %v", err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 || strings.TrimSpace(wc.String()) != "17" {
			t.Errorf("stdin exec = %d, %v, %q; want 0 and 17", code, err, wc.String())
		}

		m, err := task.Metrics(ctx)
		if err != nil || m.MemoryUsageBytes == 0 || m.CPUUsageNanos == 0 {
			t.Errorf("Metrics = %+v, %v", m, err)
		}

		if err := task.Signal(ctx, syscall.SIGTERM, false); err != nil {
			t.Fatal(err)
		}
		waitExited(t, task, 10*time.Second, "SIGTERM did not stop the container")
		if code := task.Status().Code; code != 0 {
			t.Errorf("exit after SIGTERM trap = %d, want 0", code)
		}
	})

	t.Run("cleanup removes the namespace", func(t *testing.T) {
		if _, err := rt.Start(ctx, runtime.ContainerSpec{ID: "left-0", Name: "left", Image: img, Args: []string{"sleep", "1000"}}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Cleanup(ctx); err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
		list, err := d.Client.NamespaceService().List(namespaces.WithNamespace(ctx, "default"))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range list {
			if n == ns {
				t.Errorf("namespace %s still exists", ns)
			}
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", ns)); err == nil {
			t.Errorf("cgroup parent of %s left behind", ns)
		}
	})
}

// runtimeInCellCgroup makes a cgroup standing for a local cell's, with
// the limit files v1 (in the hierarchy of controller) or v2 (cgroup v2's
// unified one), as this machine has, removed when the test ends; and
// returns a runtime on a containerd of the test's whose containers'
// cgroups are made inside it (CgroupParent), the busybox image, and the
// cgroup's path.
func runtimeInCellCgroup(t *testing.T, controller string, v1, v2 map[string]string) (*runtime.Containerd, runtime.Image, string) {
	t.Helper()
	containerdtest.Require(t)
	ctx := t.Context()
	d := containerdtest.StartDaemon(t)
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	set, err := images.PushAll(ctx, reg)
	if err != nil {
		t.Fatalf("pushing test images: %v", err)
	}
	parent := "/kip-rt-cell-" + containerdtest.Random(6)
	const root = "/sys/fs/cgroup"
	dir, files := filepath.Join(root, controller, parent), v1
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		dir, files = filepath.Join(root, parent), v2
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join(root, "*", parent))
		for _, dir := range append(dirs, filepath.Join(root, parent)) {
			_ = syscall.Rmdir(dir)
		}
	})
	for name, value := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := runtime.NewContainerd(d.Client, runtime.ContainerdConfig{
		Namespace: "kip-rt-" + containerdtest.Random(6), StateDir: filepath.Join(d.Dir, "agent"), RuncRoot: d.RuncRoot, CgroupParent: parent,
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := rt.EnsureImage(ctx, set.Busybox.Ref, runtime.PullIfNotPresent, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt, img, parent
}

// TestContainerdCPULimitAboveTheCell: a container whose CPU limit is above
// its cell's CPU (the CgroupParent's quota, 500m here) runs, at the cell's
// CPU, as a pod whose limit is above its node's runs on a kubelet. cgroup
// v1 refuses a child's quota above its parent's: asked for as is, runc
// fails to create the container ("invalid argument").
func TestContainerdCPULimitAboveTheCell(t *testing.T) {
	ctx := t.Context()
	rt, img, _ := runtimeInCellCgroup(t,
		"cpu", map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"},
		map[string]string{"cpu.max": "50000 100000"})
	var out syncbuf.Buffer
	task, err := rt.Start(ctx, runtime.ContainerSpec{
		ID: "limited-0", Name: "limited", Image: img, Args: []string{"echo", "ran"},
		Resources: runtime.Resources{CPUQuotaMillis: 1250},
		Stdout:    &out, Stderr: &out,
	})
	if err != nil {
		t.Fatalf("Start with limits.cpu 1250m in a 500m cell: %v", err)
	}
	waitExited(t, task, 60*time.Second, "the container did not end")
	st := task.Status()
	if err := task.Delete(ctx); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if st.Code != 0 || strings.TrimSpace(out.String()) != "ran" {
		t.Errorf("the container: %+v, output %q; want it to run", st, out.String())
	}
}

// TestContainerdCgroupParent: with CgroupParent (a local cell's cgroup),
// a container's cgroup is made inside it, so the parent's memory limit
// bounds a container that has none of its own, as an instance's size
// does: it allocates past the parent's 64 MiB and is killed, OOMKilled.
// Without CgroupParent it would run in containerd's /<namespace>/<id>,
// beside the cell rather than in it, and finish.
func TestContainerdCgroupParent(t *testing.T) {
	ctx := t.Context()
	limit := strconv.Itoa(64 << 20)
	rt, img, parent := runtimeInCellCgroup(t,
		"memory", map[string]string{"memory.limit_in_bytes": limit},
		map[string]string{"memory.max": limit})
	var out syncbuf.Buffer
	// tail holds its whole input when it has no newline: 200 MB.
	task, err := rt.Start(ctx, runtime.ContainerSpec{
		ID: "hog-0", Name: "hog", Image: img,
		Args:   []string{"sh", "-c", "cat /proc/self/cgroup; head -c 200000000 /dev/zero | tail >/dev/null && echo finished"},
		Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitExited(t, task, 60*time.Second, "the container did not end")
	st := task.Status()
	if err := task.Delete(ctx); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if !strings.Contains(out.String(), parent+"/") {
		t.Errorf("the container's cgroups are not under %s:\n%s", parent, out.String())
	}
	if strings.Contains(out.String(), "finished") {
		t.Errorf("the container allocated 200 MB inside a 64 MiB parent and finished:\n%s", out.String())
	}
	if !st.OOMKilled {
		t.Errorf("the container's status = %+v, want OOMKilled", st)
	}
}
