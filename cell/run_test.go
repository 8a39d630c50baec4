package cell_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/apitest"
	"github.com/kipcell/kip/cell/pod"
	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
)

// env is what every agent test shares: one containerd, one registry.
type env struct {
	d   *containerdtest.Daemon
	reg *registry.Registry
	img images.Set
	ca  *apitest.CA
}

func newEnv(t testing.TB) *env {
	t.Helper()
	containerdtest.Require(t)
	e := &env{d: containerdtest.StartDaemon(t), ca: apitest.NewCA(t)}
	var err error
	e.reg, err = registry.Start(t.Context(), registry.Options{Username: "puller", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.reg.Close() })
	if e.img, err = images.PushAll(t.Context(), e.reg); err != nil {
		t.Fatalf("pushing images: %v", err)
	}
	return e
}

// agent is one running kip-cell and a host-side client of it.
type agent struct {
	cellID string
	client *api.Client
	netns  *containerdtest.Netns
	done   chan error
}

// startAgent runs cell.Run in this process (in the root network namespace,
// where the registry on 127.0.0.1 is reachable) with the containers in a
// network namespace of their own holding podIP.
func (e *env) startAgent(t testing.TB, podIP string) *agent {
	t.Helper()
	a := &agent{cellID: "c-" + containerdtest.Random(8), netns: containerdtest.NewNetns(t, podIP), done: make(chan error, 1)}
	b := &api.Bootstrap{Version: api.BootstrapVersion, CellID: a.cellID, PodUID: "uid-" + a.cellID,
		CACert: string(e.ca.PEM), JoinToken: "token-" + a.cellID}
	ready := make(chan net.Addr, 1)
	// The agent runs until t.Context() ends, just before the Cleanups; the
	// one below checks how it ended.
	go func() {
		a.done <- cell.Run(t.Context(), cell.Config{
			Bootstrap: b, ContainerdAddress: e.d.Socket, NetNSPath: a.netns.Path,
			StateDir: filepath.Join(e.d.Dir, a.cellID), PodIP: podIP, Listen: "127.0.0.1:0",
			RuncRoot: e.d.RuncRoot, StopGrace: 2 * time.Second, StorageInterval: 500 * time.Millisecond,
			Backoff: pod.Backoff{Initial: 300 * time.Millisecond, Max: 600 * time.Millisecond, Reset: time.Hour},
			Ready:   func(addr net.Addr) { ready <- addr },
		})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-a.done:
		t.Fatalf("cell.Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not start")
	}
	t.Cleanup(func() {
		select {
		case err := <-a.done:
			if err != nil {
				t.Errorf("cell.Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("agent did not stop")
		}
		// The agent removed its namespace on the way out.
		nss, err := e.d.Client.NamespaceService().List(namespaces.WithNamespace(context.Background(), "default")) //nolint:usetesting // a Cleanup: t.Context() has ended
		if err != nil {
			t.Error(err)
		}
		for _, ns := range nss {
			if ns == cell.Namespace(a.cellID) {
				t.Errorf("namespace %s left behind", ns)
			}
		}
	})

	e.ca.Join(t, addr.String(), a.cellID)
	a.client = e.dial(t, a.cellID, addr.String())
	return a
}

// dial is the host's client of the agent of cellID at addr.
func (e *env) dial(t testing.TB, cellID, addr string) *api.Client {
	t.Helper()
	hostPEM, hostKey := e.ca.Issue(t, api.HostCommonName, x509.ExtKeyUsageClientAuth)
	hostCert, err := tls.X509KeyPair(hostPEM, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf, err := api.ClientTLSConfig(e.ca.PEM, hostCert, cellID)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return api.NewClient(cc)
}

func (e *env) applyPod(t testing.TB, a *agent, p *corev1.Pod, envs map[string][]api.EnvVar) {
	t.Helper()
	e.applyPodWith(t, a, p, &api.PodRequest{Env: envs})
}

// applyPodWith is applyPod with req's other fields (the node's settings):
// it sets the pod, generation 1 and the registry's credentials in req.
func (e *env) applyPodWith(t testing.TB, a *agent, p *corev1.Pod, req *api.PodRequest) {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	user, pass := e.reg.Credentials()
	req.PodJSON, req.Generation = data, 1
	req.RegistryCredentials = []api.RegistryCredential{{Server: e.reg.Host(), Username: user, Password: pass}}
	gen, err := a.client.ApplyPod(t.Context(), req)
	if err != nil || gen != 1 {
		t.Fatalf("ApplyPod = %v, %v", gen, err)
	}
}

// watch follows WatchStatus until cond holds.
func watch(t testing.TB, a *agent, what string, cond func(*corev1.PodStatus) bool) *corev1.PodStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	stream, err := a.client.WatchStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last corev1.PodStatus
	var lastSeq uint64
	for {
		u, err := stream.Recv()
		if err != nil {
			b, _ := json.MarshalIndent(last, "", " ")
			t.Fatalf("waiting for %s: %v; last status:\n%s", what, err, b)
		}
		if u.Seq <= lastSeq {
			t.Fatalf("seq went from %d to %d", lastSeq, u.Seq)
		}
		lastSeq = u.Seq
		last = corev1.PodStatus{}
		if err := json.Unmarshal(u.StatusJSON, &last); err != nil {
			t.Fatal(err)
		}
		if cond(&last) {
			return &last
		}
	}
}

func containerStatus(st *corev1.PodStatus, name string) corev1.ContainerStatus {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

func readLogs(t *testing.T, a *agent, req api.LogsOptions) string {
	t.Helper()
	stream, err := a.client.Logs(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatalf("Logs(%v): %v", req, err)
		}
		b.Write(c)
	}
}

// execute runs an exec and returns stdout, stderr and the exit code.
func execute(t *testing.T, a *agent, start *api.ExecStart, input ...*api.ExecInput) (string, string, int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := a.client.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&api.ExecInput{Start: start}); err != nil {
		t.Fatal(err)
	}
	for _, in := range input {
		if err := stream.Send(in); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut strings.Builder
	for {
		o, err := stream.Recv()
		if err != nil {
			t.Fatalf("exec %v: %v (output so far %q)", start.Command, err, out.String())
		}
		out.Write(o.Stdout)
		errOut.Write(o.Stderr)
		if o.Exit != nil {
			return out.String(), errOut.String(), o.Exit.Code
		}
	}
}

func TestAgentEndToEnd(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.21")
	grace := int64(10)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{
				{Name: "main", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c",
					`echo "started as $(hostname) with $GREETING"; ip -4 addr show eth0; trap 'echo bye; exit 0' TERM; while true; do sleep 0.1; done`}},
				{Name: "crasher", Image: e.img.Crash.Ref},
				{Name: "hello", Image: e.img.Hello.Ref},
			},
			// Mounted nowhere: its directory is there for the stats.
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	e.applyPod(t, a, p, map[string][]api.EnvVar{
		"main":    {{Name: "GREETING", Value: "resolved-by-host"}},
		"crasher": {{Name: "EXIT_CODE", Value: "3"}},
	})

	st := watch(t, a, "main running, crasher in CrashLoopBackOff after restarts", func(s *corev1.PodStatus) bool {
		c := containerStatus(s, "crasher")
		return containerStatus(s, "main").State.Running != nil && containerStatus(s, "hello").State.Running != nil &&
			c.RestartCount >= 2 && c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff"
	})
	if st.Phase != corev1.PodRunning || st.PodIP != "10.251.9.21" {
		t.Errorf("phase %s podIP %s, want Running 10.251.9.21", st.Phase, st.PodIP)
	}
	crasher := containerStatus(st, "crasher")
	if lt := crasher.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
		t.Errorf("crasher lastState = %+v, want Terminated 3 Error", crasher.LastTerminationState)
	}
	main := containerStatus(st, "main")
	if !strings.HasPrefix(main.ContainerID, "containerd://") || !strings.Contains(main.ImageID, "@sha256:") || !main.Ready {
		t.Errorf("main status = %+v", main)
	}

	t.Run("logs", func(t *testing.T) {
		got := readLogs(t, a, api.LogsOptions{Container: "main", TailLines: -1})
		for _, want := range []string{"started as web with resolved-by-host", "inet 10.251.9.21/24"} {
			if !strings.Contains(got, want) {
				t.Errorf("main logs lack %q:\n%s", want, got)
			}
		}
		if got := readLogs(t, a, api.LogsOptions{Container: "main", TailLines: 1}); strings.Count(got, "\n") != 1 {
			t.Errorf("tail 1 = %q", got)
		}
		if got := readLogs(t, a, api.LogsOptions{Container: "main", TailLines: -1, Timestamps: true}); !strings.HasPrefix(got, time.Now().UTC().Format("2006-01-02T")) {
			t.Errorf("timestamps = %q", got)
		}
		if got := readLogs(t, a, api.LogsOptions{Container: "main", TailLines: -1, LimitBytes: 7}); got != "started" {
			t.Errorf("limit 7 = %q", got)
		}
		prev := readLogs(t, a, api.LogsOptions{Container: "crasher", Previous: true, TailLines: -1})
		if !strings.Contains(prev, "crash: stdout") || !strings.Contains(prev, "crash: stderr") {
			t.Errorf("crasher previous logs = %q", prev)
		}
		stream, err := a.client.Logs(t.Context(), api.LogsOptions{Container: "nope"})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.NotFound {
			t.Errorf("Logs of an unknown container = %v, want NotFound", err)
		}
	})

	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		stream, err := a.client.Logs(ctx, api.LogsOptions{Container: "main", Follow: true, TailLines: 0})
		if err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 10)
		go func() {
			var buf strings.Builder
			for {
				c, err := stream.Recv()
				if err != nil {
					close(lines)
					return
				}
				buf.Write(c)
				sc := bufio.NewScanner(strings.NewReader(buf.String()))
				for sc.Scan() {
					lines <- sc.Text()
				}
				buf.Reset()
			}
		}()
		time.Sleep(200 * time.Millisecond)
		if _, _, code := execute(t, a, &api.ExecStart{Container: "main", Command: []string{"sh", "-c", "echo followed-line > /proc/1/fd/1"}}); code != 0 {
			t.Fatalf("exec exit %d", code)
		}
		select {
		case l := <-lines:
			if l != "followed-line" {
				t.Errorf("followed %q, want followed-line", l)
			}
		case <-ctx.Done():
			t.Fatal("follow saw nothing")
		}
	})

	t.Run("exec", func(t *testing.T) {
		out, errOut, code := execute(t, a, &api.ExecStart{Container: "main", Command: []string{"sh", "-c", "echo $((6*7)); echo warn >&2; exit 3"}, Stdout: true, Stderr: true})
		if out != "42\n" || errOut != "warn\n" || code != 3 {
			t.Errorf("exec = %q %q %d, want 42, warn, 3", out, errOut, code)
		}
		out, _, code = execute(t, a, &api.ExecStart{Container: "main", Command: []string{"sh"}, TTY: true, Stdin: true, Stdout: true},
			&api.ExecInput{Resize: &api.TerminalSize{Width: 100, Height: 30}},
			&api.ExecInput{Stdin: []byte("stty size; exit 5\n")})
		if !strings.Contains(out, "30 100") || code != 5 {
			t.Errorf("TTY exec = %q %d, want the size 30 100 and exit 5", out, code)
		}
		out, _, code = execute(t, a, &api.ExecStart{Container: "main", Command: []string{"wc", "-c"}, Stdin: true, Stdout: true},
			&api.ExecInput{Stdin: []byte("12345")}, &api.ExecInput{CloseStdin: true})
		if strings.TrimSpace(out) != "5" || code != 0 {
			t.Errorf("stdin exec = %q %d, want 5 and 0", out, code)
		}
	})

	t.Run("port-forward into the pod netns", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		var body string
		for range 50 { // the server may still be starting
			stream, err := a.client.PortForward(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = stream.Send(&api.PortForwardFrame{Port: 8080, Data: []byte("GET / HTTP/1.0\r\nHost: x\r\n\r\n")})
			var b strings.Builder
			for {
				f, err := stream.Recv()
				if err != nil || f.Close {
					break
				}
				b.Write(f.Data)
			}
			if body = b.String(); strings.Contains(body, "hello from") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(body, "200 OK") || !strings.Contains(body, "hello from web") {
			t.Errorf("port-forward response = %q", body)
		}
	})

	t.Run("stats", func(t *testing.T) {
		resp, err := a.client.Stats(t.Context(), false)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, c := range resp.Containers {
			names[c.Name] = c.MemoryUsageBytes > 0
		}
		if !names["main"] || !names["hello"] {
			t.Errorf("stats = %+v", resp.Containers)
		}
		for _, c := range resp.Containers {
			if c.StartTime.IsZero() || c.Rootfs == nil || !c.Rootfs.HasUsage || c.Logs == nil || c.Logs.UsedBytes == 0 {
				t.Errorf("container %s: start time, writable layer or logs missing: %+v", c.Name, c)
			}
		}
		var ifaces []string
		for _, i := range resp.Interfaces {
			ifaces = append(ifaces, i.Name)
		}
		if !slices.Contains(ifaces, "eth0") || slices.Contains(ifaces, "lo") {
			t.Errorf("interfaces = %v, want eth0 of the pod's namespace and no lo", ifaces)
		}
		if v := resp.Volumes; len(v) != 1 || v[0].Name != "scratch" || v[0].Fs == nil || !v[0].Fs.HasFilesystem || v[0].Fs.InodesUsed == 0 {
			t.Errorf("volumes = %+v, want scratch with its filesystem and usage", v)
		}
		if d, etc := resp.Disk, resp.EtcFiles; d == nil || d.CapacityBytes == 0 || etc == nil || !etc.HasUsage {
			t.Errorf("disk = %+v, etc files = %+v", d, etc)
		}

		// The second sample has a CPU rate; CPU and memory only leaves the rest out.
		again, err := a.client.Stats(t.Context(), true)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range again.Containers {
			if !c.CPURateKnown || c.Rootfs != nil || c.Logs != nil {
				t.Errorf("second sample of %s = %+v, want a CPU rate and no disk figures", c.Name, c)
			}
		}
		if again.Interfaces != nil || again.Volumes != nil || again.Disk != nil {
			t.Errorf("CPU and memory only = %+v", again)
		}
	})

	t.Run("delete within grace", func(t *testing.T) {
		start := time.Now()
		if err := a.client.DeletePod(t.Context(), -1); err != nil {
			t.Fatalf("DeletePod: %v", err)
		}
		// main traps TERM; hello (a Go server) dies of it: all well within 10s.
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("DeletePod took %v", took)
		}
		st := watch(t, a, "terminated", func(s *corev1.PodStatus) bool {
			return containerStatus(s, "main").State.Terminated != nil
		})
		if m := containerStatus(st, "main").State.Terminated; m.ExitCode != 0 {
			t.Errorf("main after delete = %+v, want exit 0 from its TERM trap", m)
		}
		if st.Phase != corev1.PodFailed {
			t.Errorf("phase after delete = %s, want Failed (crasher and hello did not exit 0)", st.Phase)
		}
		logs := readLogs(t, a, api.LogsOptions{Container: "main", TailLines: 1})
		if logs != "bye\n" {
			t.Errorf("main's last log line = %q, want bye", logs)
		}
		nss, _ := e.d.Client.NamespaceService().List(namespaces.WithNamespace(t.Context(), "default"))
		for _, ns := range nss {
			if ns == cell.Namespace(a.cellID) {
				t.Errorf("namespace %s still there after DeletePod", ns)
			}
		}
	})
}

func TestAgentJobSucceeds(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.22")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job"},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{Name: "init", Image: e.img.Busybox.Ref, Command: []string{"sh", "-c", "echo init done"}}},
			Containers:     []corev1.Container{{Name: "echo", Image: e.img.Busybox.Ref, Command: []string{"echo", "hello from a job"}}},
		},
	}
	e.applyPod(t, a, p, nil)
	st := watch(t, a, "Succeeded", func(s *corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })
	if term := containerStatus(st, "echo").State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("echo state = %+v", containerStatus(st, "echo").State)
	}
	if got := readLogs(t, a, api.LogsOptions{Container: "echo", TailLines: -1}); got != "hello from a job\n" {
		t.Errorf("logs = %q", got)
	}
	if got := readLogs(t, a, api.LogsOptions{Container: "init", TailLines: -1}); got != "init done\n" {
		t.Errorf("init logs = %q", got)
	}
}

func TestAgentImagePullFailure(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.23")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default", UID: "uid-bad"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: e.reg.Ref("kip-e2e/missing", "v1")}}},
	}
	e.applyPod(t, a, p, nil)
	st := watch(t, a, "ErrImagePull", func(s *corev1.PodStatus) bool {
		w := containerStatus(s, "c").State.Waiting
		return w != nil && w.Reason == "ErrImagePull"
	})
	if msg := containerStatus(st, "c").State.Waiting.Message; !strings.Contains(msg, "not found") {
		t.Errorf("message = %q, want the registry's not found", msg)
	}
	watch(t, a, "ImagePullBackOff", func(s *corev1.PodStatus) bool {
		w := containerStatus(s, "c").State.Waiting
		return w != nil && w.Reason == "ImagePullBackOff" && s.Phase == corev1.PodPending
	})
}
