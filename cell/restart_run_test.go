package cell_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/pod"
	"github.com/kipcell/kip/cell/runtime"
	"github.com/kipcell/kip/test/containerdtest"
)

// envAgentConfig makes the test binary a cell agent (agentMain): the
// value is the agent's cell.Config as JSON (without Logger and Ready).
const envAgentConfig = "KIP_TEST_CELL_AGENT"

func TestMain(m *testing.M) {
	if conf := os.Getenv(envAgentConfig); conf != "" {
		os.Exit(agentMain(conf))
	}
	os.Exit(m.Run())
}

// agentConfig is what a subprocess agent runs with; it writes its
// address to AddrFile once it serves.
type agentConfig struct {
	Bootstrap                                               *api.Bootstrap
	ContainerdAddress, NetNSPath, StateDir, PodIP, RuncRoot string
	SharedNamespace                                         string
	AddrFile                                                string
	// CgroupParent and OOMScoreAdj are cell.Config's; the agent first
	// joins the groups of JoinCgroups (directories), as the local plugin
	// puts its agent in the cell's agent group.
	CgroupParent string
	OOMScoreAdj  int
	JoinCgroups  []string
}

// agentMain runs cell.Run until SIGTERM, as kip-cell does.
func agentMain(conf string) int {
	var c agentConfig
	if err := json.Unmarshal([]byte(conf), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, dir := range c.JoinCgroups {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg := cell.Config{
		CgroupParent: c.CgroupParent, OOMScoreAdj: c.OOMScoreAdj,
		Bootstrap: c.Bootstrap, ContainerdAddress: c.ContainerdAddress, NetNSPath: c.NetNSPath,
		StateDir: c.StateDir, PodIP: c.PodIP, Listen: "127.0.0.1:0", RuncRoot: c.RuncRoot, SharedNamespace: c.SharedNamespace, StopGrace: 2 * time.Second,
		Backoff: pod.Backoff{Initial: 300 * time.Millisecond, Max: 600 * time.Millisecond, Reset: time.Hour},
		Ready: func(addr net.Addr) {
			_ = os.WriteFile(c.AddrFile+".tmp", []byte(addr.String()), 0o600)
			_ = os.Rename(c.AddrFile+".tmp", c.AddrFile)
		},
	}
	if err := cell.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// processAgent is a cell agent in a process of its own, which the test
// may kill -9 and start again on the same state directory.
type processAgent struct {
	e    *env
	conf agentConfig
	dir  string
	n    int
	cmd  *exec.Cmd
}

// newProcessAgent makes an agent of a new cell; sharedNamespace is
// cell.Config.SharedNamespace.
func (e *env) newProcessAgent(t *testing.T, podIP, sharedNamespace string) *processAgent {
	t.Helper()
	cellID := "c-" + containerdtest.Random(8)
	netns := containerdtest.NewNetns(t, podIP)
	dir := t.TempDir()
	return &processAgent{e: e, dir: dir, conf: agentConfig{
		Bootstrap: &api.Bootstrap{Version: api.BootstrapVersion, CellID: cellID, PodUID: "uid-restart",
			CACert: string(e.ca.PEM), JoinToken: "token-" + cellID},
		ContainerdAddress: e.d.Socket, NetNSPath: netns.Path,
		StateDir: filepath.Join(e.d.Dir, cellID), PodIP: podIP, RuncRoot: e.d.RuncRoot, SharedNamespace: sharedNamespace,
	}}
}

// start starts the agent process and returns a client of it.
func (p *processAgent) start(t *testing.T) *agent {
	t.Helper()
	p.n++
	p.conf.AddrFile = filepath.Join(p.dir, "addr-"+strconv.Itoa(p.n))
	conf, err := json.Marshal(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(p.dir, "agent-"+strconv.Itoa(p.n)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	p.cmd = exec.Command(os.Args[0]) //nolint:gosec // the test binary itself, as an agent
	p.cmd.Env = append(os.Environ(), envAgentConfig+"="+string(conf))
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := p.cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		addr, err := os.ReadFile(p.conf.AddrFile)
		if err == nil {
			// Only the first agent is joined: the next ones serve the
			// certificate it saved.
			if p.n == 1 {
				p.e.ca.Join(t, string(addr), p.conf.Bootstrap.CellID)
			}
			return &agent{cellID: p.conf.Bootstrap.CellID, client: p.e.dial(t, p.conf.Bootstrap.CellID, string(addr))}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logFile.Name())
			t.Fatalf("agent %d did not start:\n%s", p.n, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the agent process with SIGKILL: it stops nothing.
func (p *processAgent) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// stop ends the agent process with SIGTERM: it stops its pod and removes
// it.
func (p *processAgent) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		out, _ := os.ReadFile(filepath.Join(p.dir, "agent-"+strconv.Itoa(p.n)+".log"))
		t.Errorf("agent %d: %v\n%s", p.n, err, out)
	}
}

var tickLine = regexp.MustCompile(`(?m)^tick (\d+)$`)

// ticks returns the tick numbers in a log.
func ticks(log string) []int {
	var out []int
	for _, m := range tickLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

func TestAgentRestartKeepsThePodRunning(t *testing.T) {
	e := newEnv(t)
	// A cloud cell has its namespace; the local plugin's share one, where
	// a neighbour cell runs the same image.
	shared := "kip-cells-" + containerdtest.Random(6)
	neighbour := e.newProcessAgent(t, "10.251.9.42", shared)
	n := neighbour.start(t)
	e.applyPod(t, n, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "neighbour", Namespace: "default", UID: "uid-restart"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Image: e.img.Busybox.Ref, Command: []string{"sleep", "1000"}},
		}},
	}, nil)
	watch(t, n, "the neighbour running", func(s *corev1.PodStatus) bool { return containerStatus(s, "main").State.Running != nil })
	t.Cleanup(func() { neighbour.stop(t) })
	for _, tc := range []struct{ name, sharedNamespace string }{{"own namespace", ""}, {"shared namespace", shared}} {
		t.Run(tc.name, func(t *testing.T) {
			p := e.newProcessAgent(t, "10.251.9.41", tc.sharedNamespace)
			testAgentRestart(t, e, p, n)
		})
	}
}

// testAgentRestart kills the agent p with SIGKILL while its pod runs,
// starts it again and checks that it took the pod over; then stops it
// with SIGTERM and checks that it removed what was its cell's and no more
// (the neighbour agent n's pod, in a shared namespace, runs on).
func testAgentRestart(t *testing.T, e *env, p *processAgent, n *agent) {
	a := p.start(t)
	grace := int64(2)
	spec := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: "default", UID: "uid-restart"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{
				{Name: "main", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c",
					`i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.1; done`},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1}},
				{Name: "brief", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c", `echo brief; sleep 3; exit 7`}},
			},
		},
	}
	e.applyPod(t, a, spec, nil)
	before := watch(t, a, "both running, main ready", func(s *corev1.PodStatus) bool {
		return containerStatus(s, "main").Ready && containerStatus(s, "brief").State.Running != nil
	})
	main := containerStatus(before, "main")
	execPID := func(a *agent) string {
		out, _, code := execute(t, a, &api.ExecStart{Container: "main", Command: []string{"sh", "-c", "cut -d' ' -f22 /proc/1/stat"}})
		if code != 0 {
			t.Fatalf("exec = %d", code)
		}
		return strings.TrimSpace(out)
	}
	startBefore := execPID(a)
	logBefore := readLogs(t, a, api.LogsOptions{Container: "main", TailLines: -1})

	p.kill(t)
	// brief exits while no agent runs: its exit must still be seen.
	ns, briefID := cell.Namespace(a.cellID), "brief-0"
	if shared := p.conf.SharedNamespace; shared != "" {
		ns, briefID = shared, a.cellID+".brief-0"
	}
	ctx := namespaces.WithNamespace(t.Context(), ns)
	ctr, err := e.d.Client.LoadContainer(ctx, briefID)
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-exited

	a = p.start(t)
	after := watch(t, a, "main running, brief restarted after its exit 7", func(s *corev1.PodStatus) bool {
		b := containerStatus(s, "brief")
		lt := b.LastTerminationState.Terminated
		return containerStatus(s, "main").Ready && b.RestartCount == 1 && lt != nil && lt.ExitCode == 7
	})
	if got := containerStatus(after, "main"); got.RestartCount != 0 || got.ContainerID != main.ContainerID ||
		got.State.Running == nil || !got.State.Running.StartedAt.Equal(&main.State.Running.StartedAt) {
		t.Errorf("main after the restart = %+v, want %+v", got, main)
	}
	if after.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", after.Phase)
	}
	// The same process, whose log goes on in the same file.
	if got := execPID(a); got != startBefore {
		t.Errorf("main's process started at %s, before the restart at %s", got, startBefore)
	}
	last := ticks(logBefore)
	if len(last) == 0 {
		t.Fatalf("no ticks before the restart:\n%s", logBefore)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := ticks(readLogs(t, a, api.LogsOptions{Container: "main", TailLines: -1}))
		if got[0] != 0 {
			t.Fatalf("the log starts at tick %d, want 0", got[0])
		}
		if got[len(got)-1] > last[len(last)-1]+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log stopped at tick %d (before the restart: %d)", got[len(got)-1], last[len(last)-1])
		}
		time.Sleep(100 * time.Millisecond)
	}

	p.stop(t)
	if p.conf.SharedNamespace != "" {
		checkNeighbourSurvives(ctx, t, e, a.cellID, n)
	}
	nss, err := e.d.Client.NamespaceService().List(namespaces.WithNamespace(t.Context(), "default"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		if ns == cell.Namespace(a.cellID) {
			t.Errorf("namespace %s left behind after SIGTERM", ns)
		}
	}
	if _, err := os.Stat(filepath.Join(p.conf.StateDir, cell.StateFile)); !os.IsNotExist(err) {
		t.Errorf("state file after SIGTERM: %v, want none", err)
	}
}

// checkNeighbourSurvives checks, after cell cellID's agent stopped, that
// none of its containers is left in the shared namespace of ctx and that
// the neighbour n's container runs on.
func checkNeighbourSurvives(ctx context.Context, t *testing.T, e *env, cellID string, n *agent) {
	t.Helper()
	ctrs, err := e.d.Client.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ctrs {
		if labels, _ := c.Labels(ctx); labels[runtime.CellLabel] == cellID {
			t.Errorf("container %s of the cell left behind after SIGTERM", c.ID())
		}
	}
	st := watch(t, n, "the neighbour still running", func(*corev1.PodStatus) bool { return true })
	if main := containerStatus(st, "main"); main.State.Running == nil || main.RestartCount != 0 {
		t.Errorf("the neighbour's container after the cell's SIGTERM: %+v", main)
	}
}
