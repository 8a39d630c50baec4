package cell_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/runtime"
	"github.com/kipcell/kip/test/containerdtest"
)

// cellCgroup makes a cell's cgroup as the local plugin does
// (plugins/local/cgroup.go): /kip-test-<random>/<cell> limited to memory
// bytes, holding the agent's group. It returns the agent's group (the
// directory to join) and the pod's group that the agent makes beside it
// (kip-cell's --cgroup-parent). The tree goes when the test ends, after
// the agents (register it before starting them).
func cellCgroup(t *testing.T, cellID string, memory int64) (agentDir, podGroup string) {
	t.Helper()
	const root = "/sys/fs/cgroup"
	parent := "kip-test-" + containerdtest.Random(6)
	limit := []byte(strconv.FormatInt(memory, 10))
	write := func(file string, data []byte) {
		t.Helper()
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cellDir := filepath.Join(root, "memory", parent, cellID)
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil { // v2
		cellDir = filepath.Join(root, parent, cellID)
		write(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu +memory"))
		mkdir(cellDir)
		write(filepath.Join(root, parent, "cgroup.subtree_control"), []byte("+cpu +memory"))
		write(filepath.Join(cellDir, "memory.max"), limit)
		write(filepath.Join(cellDir, "cgroup.subtree_control"), []byte("+cpu +memory"))
	} else {
		mkdir(cellDir)
		write(filepath.Join(cellDir, "memory.limit_in_bytes"), limit)
	}
	agentDir = filepath.Join(cellDir, "agent")
	mkdir(agentDir)
	t.Cleanup(func() {
		// Deepest first, in every hierarchy runc made groups in; what a
		// test that failed left running in them is killed first.
		dirs, _ := filepath.Glob(filepath.Join(root, "*", parent))
		dirs = append(dirs, filepath.Join(root, parent))
		for _, d := range dirs {
			var tree []string
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					tree = append(tree, p)
				}
				return nil
			})
			for i := len(tree) - 1; i >= 0; i-- {
				removeCgroup(t, tree[i])
			}
		}
	})
	return agentDir, "/" + parent + "/" + cellID + "/pod"
}

// removeCgroup removes the group dir, killing its processes until it can.
func removeCgroup(t *testing.T, dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("removing cgroup %s: %v", dir, err)
			return
		}
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			if pid, _ := strconv.Atoi(f); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newCellAgent is a process agent of a new cell of memory bytes, in its
// cell's agent group, its pod's containers in the pod's group (the local
// plugin's layout), with kip-cell's OOM score adjustment.
func (e *env) newCellAgent(t *testing.T, podIP string, memory int64) *processAgent {
	t.Helper()
	p := e.newProcessAgent(t, podIP, "")
	agentDir, podGroup := cellCgroup(t, p.conf.Bootstrap.CellID, memory)
	p.conf.JoinCgroups, p.conf.CgroupParent, p.conf.OOMScoreAdj = []string{agentDir}, podGroup, cell.DefaultOOMScoreAdj
	return p
}

// alive checks that the agent p started as its first process still runs
// and answers, with the OOM score adjustment of kip-cell where it may
// lower its own (CAP_SYS_RESOURCE), then stops it.
func alive(t *testing.T, p *processAgent, a *agent) {
	t.Helper()
	if p.n != 1 || p.cmd.ProcessState != nil || p.cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("agent %d (pid %d) is not the first, or is gone", p.n, p.cmd.Process.Pid)
	}
	watch(t, a, "the agent answering", func(*corev1.PodStatus) bool { return true })
	adj, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "oom_score_adj"))
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(cell.DefaultOOMScoreAdj)
	if runtime.OOMScoreAdjFloor() > cell.DefaultOOMScoreAdj {
		want = "0" // no CAP_SYS_RESOURCE here: left as it was
	}
	if got := strings.TrimSpace(string(adj)); got != want {
		t.Errorf("the agent's oom_score_adj = %s, want %s", got, want)
	}
	p.stop(t)
}

// TestAgentSurvivesAContainerOverItsLimit: a container that allocates past
// its own memory limit is OOM-killed and reported OOMKilled (exit code
// 137), its restart policy applies (restartCount grows under Always and
// OnFailure), and the agent is untouched: the same process, still
// answering. The pod's other container, which asks for nothing, gets the
// kubelet's OOM score adjustment for a Burstable pod's container without
// a memory request (999), so that the kernel takes the pod's processes
// before the agent's (-998).
func TestAgentSurvivesAContainerOverItsLimit(t *testing.T) {
	e := newEnv(t)
	for i, policy := range []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure} {
		t.Run(string(policy), func(t *testing.T) {
			p := e.newCellAgent(t, "10.251.9."+strconv.Itoa(71+i), 512<<20)
			a := p.start(t)
			e.applyPod(t, a, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default", UID: "uid-restart"},
				Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{
					{Name: "hog", Image: e.img.Busybox.Ref,
						Command:   []string{"sh", "-c", "head -c 200000000 /dev/zero | tail >/dev/null && echo finished"},
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}},
					{Name: "steady", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c", "cat /proc/self/oom_score_adj; sleep 1000"}},
				}},
			}, nil)
			st := watch(t, a, "hog restarted twice after OOM kills", func(s *corev1.PodStatus) bool {
				return containerStatus(s, "hog").RestartCount >= 2
			})
			hog := containerStatus(st, "hog")
			if lt := hog.LastTerminationState.Terminated; lt == nil || lt.Reason != "OOMKilled" || lt.ExitCode != 137 {
				t.Errorf("hog's last termination = %+v, want OOMKilled, exit code 137", lt)
			}
			if log := readLogs(t, a, api.LogsOptions{Container: "hog", Previous: true, TailLines: -1}); strings.Contains(log, "finished") {
				t.Errorf("hog allocated 200 MB under a 32 MiB limit and finished: %q", log)
			}
			if log := readLogs(t, a, api.LogsOptions{Container: "steady", TailLines: -1}); strings.TrimSpace(log) != "999" {
				t.Errorf("steady's oom_score_adj = %q, want 999 (Burstable, no memory request)", log)
			}
			alive(t, p, a)
		})
	}
}

// TestAgentSurvivesAPodOverTheCell: a pod without memory limits of its own
// that allocates past its cell's memory in many processes, each smaller
// than the agent, is OOM-killed within its own group, reported OOMKilled,
// and the agent, which shares the cell's memory, is untouched. Before, the
// agent and the pod shared the cell's group, and the kernel's OOM killer
// chose the largest process in it: the agent (issue 29).
func TestAgentSurvivesAPodOverTheCell(t *testing.T) {
	e := newEnv(t)
	p := e.newCellAgent(t, "10.251.9.73", 192<<20)
	a := p.start(t)
	// Forty processes of 8 MB each, held (tail keeps what has no newline
	// until its input ends), then one that grows without end.
	script := `for i in $(seq 40); do (head -c 8000000 /dev/zero; sleep 1000) | tail >/dev/null & done; sleep 2; ` +
		`head -c 1000000000 /dev/zero | tail >/dev/null && echo finished`
	e.applyPod(t, a, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crowd", Namespace: "default", UID: "uid-restart"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
			{Name: "crowd", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c", script}},
		}},
	}, nil)
	st := watch(t, a, "the pod ended", func(s *corev1.PodStatus) bool {
		return s.Phase == corev1.PodFailed || s.Phase == corev1.PodSucceeded
	})
	term := containerStatus(st, "crowd").State.Terminated
	if st.Phase != corev1.PodFailed || term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("the pod ended %s, its container %+v; want Failed, OOMKilled, exit code 137", st.Phase, term)
	}
	// The pod's group: the cell's memory less the agent's part.
	file := filepath.Join("/sys/fs/cgroup/memory", p.conf.CgroupParent, "memory.limit_in_bytes")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		file = filepath.Join("/sys/fs/cgroup", p.conf.CgroupParent, "memory.max")
	}
	if limit, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(limit)) != strconv.Itoa(192<<20-runtime.DefaultAgentMemory) {
		t.Errorf("the pod's group's limit = %q, %v; want %d", limit, err, 192<<20-runtime.DefaultAgentMemory)
	}
	alive(t, p, a)
}
