package cells

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/test/syncbuf"
)

// fakeAgent is an in-process cell agent: it reports Running once a pod is
// applied, and whatever phase the test pushes afterwards.
type fakeAgent struct {
	cellapi.UnimplementedCell
	mu      sync.Mutex
	applied []int64
	creds   []cellapi.RegistryCredential   // of the last ApplyPod
	volumes map[string]cellapi.VolumeFiles // of the last ApplyPod taken
	// gen is the generation the agent works towards: it ignores a lower
	// or equal one, as a real agent does (set it to play an agent that an
	// earlier kip process talked to).
	gen     int64
	deleted int
	graces  []int64 // of the DeletePod calls, in whole seconds as sent
	phases  chan corev1.PodPhase
	// notices are sent, each in an update of its own with the last phase,
	// as the agent's instance-metadata watch reports them.
	notices chan []cellapi.InstanceNotice
	// calls are the agent's ApplyPod and ApplyServices calls in order:
	// "pod 1" (generation), "services 3" (revision).
	calls []string
	// uid is the pod the agent runs (its first ApplyPod's), which its
	// status updates carry.
	uid string
	// podAddress is the pod's own address the last ApplyPod sent, and
	// seccompDefault its node's seccomp default.
	podAddress     string
	seccompDefault bool
	// logRotation is its node's container log rotation.
	logRotation *cellapi.LogRotation
	// first is the phase it reports first; empty: Running.
	first corev1.PodPhase
	// noPodNetwork plays an agent that gives no pod a namespace of its
	// own (a light cell's): it refuses a pod address, Unimplemented.
	noPodNetwork bool
	// env is the environment of the last ApplyPod taken.
	env map[string][]cellapi.EnvVar
	// disks are the disks of the last ApplyPod.
	disks map[string]cellapi.Disk
	// podJSON is the pod of the last ApplyPod.
	podJSON []byte
}

func (a *fakeAgent) ApplyPod(_ context.Context, req *cellapi.PodRequest) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprintf("pod %d", req.Generation))
	if a.noPodNetwork && req.PodAddress != "" {
		return 0, status.Error(codes.Unimplemented, "applying pod: this cell gives no pod a network namespace of its own")
	}
	a.applied = append(a.applied, req.Generation)
	a.env = req.Env
	a.disks = req.Disks
	a.podJSON = req.PodJSON
	a.creds = req.RegistryCredentials
	a.podAddress = req.PodAddress
	a.seccompDefault = req.SeccompDefault
	a.logRotation = req.LogRotation
	if a.uid == "" {
		var p corev1.Pod
		if err := json.Unmarshal(req.PodJSON, &p); err == nil {
			a.uid = string(p.UID)
		}
	}
	if req.Generation > a.gen {
		a.gen = req.Generation
		a.volumes = req.Volumes
	}
	return a.gen, nil
}

func (a *fakeAgent) ApplyServices(_ context.Context, u *cellapi.ServicesUpdate) (cellapi.ServicesApplied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprintf("services %d", u.Revision))
	return cellapi.ServicesApplied{Table: u.Table, Revision: u.Revision}, nil
}

func (a *fakeAgent) WatchStatus(ctx context.Context, sendUpdate func(*cellapi.StatusUpdate) error) error {
	send := func(phase corev1.PodPhase) error {
		st := corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: phase == corev1.PodRunning}}}
		a.mu.Lock()
		// The pod's IP once its network is up, which a real agent has
		// made before any container ran.
		if ip := a.podAddress; ip != "" && phase != corev1.PodPending {
			st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		}
		data, _ := json.Marshal(st)
		u := &cellapi.StatusUpdate{StatusJSON: data, PodUID: a.uid}
		a.mu.Unlock()
		if phase == corev1.PodRunning {
			u.Events = []cellapi.PodEvent{{Type: "Normal", Reason: "Started", Message: "Started container main", Container: "main"}}
		}
		return sendUpdate(u)
	}
	a.mu.Lock()
	first := a.first
	a.mu.Unlock()
	if first == "" {
		first = corev1.PodRunning
	}
	if err := send(first); err != nil {
		return err
	}
	for {
		select {
		case p := <-a.phases:
			if err := send(p); err != nil {
				return err
			}
		case n := <-a.notices:
			data, _ := json.Marshal(corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true}}})
			if err := sendUpdate(&cellapi.StatusUpdate{StatusJSON: data, Notices: n}); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func (a *fakeAgent) DeletePod(_ context.Context, grace time.Duration) error {
	a.mu.Lock()
	a.deleted++
	a.graces = append(a.graces, int64(grace/time.Second))
	a.mu.Unlock()
	return nil
}

type fakeIdentity struct{}

// fakeTokens numbers the join tokens fakeIdentity issues.
var fakeTokens atomic.Int64

func (fakeIdentity) Bootstrap(cellID, clusterID, nodeName, podUID string, _ time.Duration) (*cellapi.Bootstrap, error) {
	return &cellapi.Bootstrap{Version: cellapi.BootstrapVersion, CellID: cellID, ClusterID: clusterID, NodeName: nodeName, PodUID: podUID,
		CACert: "ca", JoinToken: fmt.Sprintf("token-%d", fakeTokens.Add(1))}, nil
}

func (fakeIdentity) JoinTLSConfig(string) (*tls.Config, error) {
	return &tls.Config{MinVersion: tls.VersionTLS13}, nil
}

func (fakeIdentity) Join(context.Context, string, cellapi.JoinRequest, func(context.Context) error) ([]byte, error) {
	return nil, errors.New("the fake identity joins no cell")
}

func (fakeIdentity) SawJoined(string, crypto.PublicKey) {}

func (fakeIdentity) Renew(context.Context, string, cellapi.RenewRequest, func(context.Context) error) ([]byte, error) {
	return nil, errors.New("the fake identity renews no cell")
}

func (fakeIdentity) CertPEM() []byte { return []byte("ca") }

func (fakeIdentity) ClientTLSConfig(string) (*tls.Config, error) {
	return &tls.Config{MinVersion: tls.VersionTLS13}, nil
}

type harness struct {
	m        *Manager
	plugin   *pluginfake.Provider
	agent    *fakeAgent
	indexer  cache.Indexer
	recorder *record.FakeRecorder
	notified chan *corev1.Pod
	dialed   chan string
}

func newHarness(t *testing.T, opts ...pluginfake.Option) *harness {
	t.Helper()
	h := newHarnessDeferred(t, opts...)
	h.start(t)
	return h
}

// newHarnessDeferred builds everything but does not run the Manager, so a
// test can seed pods first.
func newHarnessDeferred(t *testing.T, opts ...pluginfake.Option) *harness {
	t.Helper()
	return newHarnessSetup(t, setup{plugin: opts})
}

// setup changes what newHarnessSetup builds, before the Manager is made.
type setup struct {
	plugin []pluginfake.Option
	// config changes the test's Config.
	config func(*Config)
	// wrap stands between the Manager and the fake plugin.
	wrap func(*pluginfake.Provider) pluginapi.Client
	// opts are the Manager's options.
	opts []Option
	// source replaces the empty fake API the pods' references are read
	// from.
	source podrefs.Source
	// agentGen is the generation the fake agent starts at.
	agentGen int64
	// agentPhase is the phase the fake agent reports first; empty:
	// Running.
	agentPhase corev1.PodPhase
	// noPodNetwork: the fake agent refuses a pod address.
	noPodNetwork bool
	// silent, when set, says which cells' agents never answer.
	silent func(cellID string) bool
	// log receives the Manager's log; nil discards it.
	log *syncbuf.Buffer
}

// newHarnessSetup is newHarnessDeferred with a setup.
func newHarnessSetup(t testing.TB, s setup) *harness {
	t.Helper()
	plugin := pluginfake.New(s.plugin...)
	if _, err := plugin.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
		t.Fatal(err)
	}
	agent := &fakeAgent{phases: make(chan corev1.PodPhase, 4), notices: make(chan []cellapi.InstanceNotice, 4), gen: s.agentGen, first: s.agentPhase, noPodNetwork: s.noPodNetwork}
	lis := serveAgent(t, agent)

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	recorder := record.NewFakeRecorder(100)
	h := &harness{plugin: plugin, agent: agent, indexer: indexer, recorder: recorder,
		notified: make(chan *corev1.Pod, 100), dialed: make(chan string, 10)}
	src := s.source
	if src == nil {
		src = podrefs.ClientSource(fake.NewClientset())
	}
	podLogsDir := t.TempDir()
	cfg := Config{ClusterID: "test", NodeName: "kip", GCInterval: 100 * time.Millisecond, PodLogsDir: podLogsDir,
		Match: match.DefaultConfig(), RefusedRetry: 50 * time.Millisecond, RematchInterval: time.Hour,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	if s.config != nil {
		s.config(&cfg)
	}
	var client pluginapi.Client = plugin
	if s.wrap != nil {
		client = s.wrap(plugin)
	}
	log := slog.New(slog.DiscardHandler)
	if s.log != nil {
		log = slog.New(slog.NewTextHandler(s.log, nil))
	}
	h.m = New(cfg, client, fakeIdentity{}, src, corev1listers.NewPodLister(indexer), recorder, log, s.opts...)
	// The fake agent has joined: no join is asked of it.
	h.m.deps.join = func(context.Context, string, string, *tls.Config, []byte, cellclient.JoinSigner) (cellclient.Joined, error) {
		return cellclient.Joined{}, nil
	}
	h.m.deps.dial = func(cellID, address string, _ *tls.Config) (*cellclient.Agent, error) {
		h.dialed <- cellID + "@" + address
		if s.silent != nil && s.silent(cellID) {
			gone := bufconn.Listen(1 << 10)
			_ = gone.Close() // every connection is refused
			return dialAgent(cellID, gone)
		}
		return dialAgent(cellID, lis)
	}
	h.m.NotifyPods(t.Context(), func(p *corev1.Pod) { h.notified <- p })
	return h
}

// serveAgent serves agent over an in-memory listener until the test ends.
func serveAgent(t testing.TB, agent cellapi.Cell) *bufconn.Listener {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	cellapi.RegisterCell(srv, agent)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis
}

// dialAgent connects to the agent serveAgent serves on lis.
func dialAgent(cellID string, lis *bufconn.Listener) (*cellclient.Agent, error) {
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return cellclient.NewAgent(cellID, cc), nil
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	adopted, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = h.m.Run(t.Context(), adopted)
	}()
	// Cleanups run last in first: Run (and a cell being ended, writing
	// kept logs) returns before the temporary directories go.
	t.Cleanup(func() { <-done })
	<-adopted
}

func newPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec:       corev1.PodSpec{NodeName: "kip", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

// waitNotified waits for a pushed status satisfying ok.
func (h *harness) waitNotified(t *testing.T, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p := <-h.notified:
			if ok(p) {
				return p
			}
		case <-deadline:
			t.Fatalf("no status update showing %s", what)
		}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) events() string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// The node's settings for the pod's containers (cells.seccompDefault,
// cells.containerLogMaxBytes and containerLogMaxFiles) reach the agent
// with the pod, as they are set or by default.
func TestNodeDefaultsReachTheAgent(t *testing.T) {
	for _, tt := range []struct {
		name     string
		config   func(*Config)
		seccomp  bool
		rotation *cellapi.LogRotation
	}{
		{name: "defaults", config: func(*Config) {}, seccomp: true, rotation: &cellapi.LogRotation{MaxSizeBytes: 10 << 20, MaxFiles: 5}},
		{name: "seccompDefault false", config: func(c *Config) { c.SeccompDefault = false }, seccomp: false, rotation: &cellapi.LogRotation{MaxSizeBytes: 10 << 20, MaxFiles: 5}},
		{name: "log rotation set", config: func(c *Config) { c.ContainerLogMaxBytes, c.ContainerLogMaxFiles = 1<<20, 3 },
			seccomp: true, rotation: &cellapi.LogRotation{MaxSizeBytes: 1 << 20, MaxFiles: 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessSetup(t, setup{config: func(c *Config) { c.SeccompDefault = true; tt.config(c) }})
			h.start(t)
			h.runningPod(t, "web", "uid-1")
			h.agent.mu.Lock()
			defer h.agent.mu.Unlock()
			if h.agent.seccompDefault != tt.seccomp {
				t.Errorf("the agent was sent seccomp default %v, want %v", h.agent.seccompDefault, tt.seccomp)
			}
			if !reflect.DeepEqual(h.agent.logRotation, tt.rotation) {
				t.Errorf("the agent was sent log rotation %v, want %v", h.agent.logRotation, tt.rotation)
			}
		})
	}
}

// TestPodIPIsTheAgents: the pod's IP in the API is the one its agent
// reports, which it reports once the pod's network is up (as a kubelet
// once the sandbox has its network); the host fills in none from the
// plugin's addresses before, while it does fill in the host's.
func TestPodIPIsTheAgents(t *testing.T) {
	h := newHarnessSetup(t, setup{agentPhase: corev1.PodPending})
	h.start(t)
	h.create(t, newPod("web", "uid-1"))
	pending := h.waitNotified(t, "the agent's Pending", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && p.Status.HostIP != ""
	})
	insts := h.plugin.Store().Instances()
	if len(insts) != 1 || insts[0].PodAddress() == "" {
		t.Fatalf("instances %+v, want one with a pod address", insts)
	}
	if st := pending.Status; st.PodIP != "" || st.PodIPs != nil || st.HostIP != insts[0].PrivateAddress() {
		t.Errorf("pending: podIP %q %v, hostIP %q; want no pod IP yet and the cell's %s as the host's",
			st.PodIP, st.PodIPs, st.HostIP, insts[0].PrivateAddress())
	}
	h.agent.phases <- corev1.PodRunning
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if st := running.Status; st.PodIP != insts[0].PodAddress() || len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP {
		t.Errorf("running: podIP %q %v, want the agent's %s", st.PodIP, st.PodIPs, insts[0].PodAddress())
	}
}

// TestDownwardAPIPodIP: the pod's IP the host resolves the downward API
// with (fieldRef status.podIP) is the address the pod has: its own, on a
// cell that gives it one; the cell's for a hostNetwork pod, and on a cell
// whose agent gives no pod a namespace of its own (a light cell's), which
// refuses the pod address: the pod is sent again without it.
func TestDownwardAPIPodIP(t *testing.T) {
	tests := []struct {
		name         string
		noPodNetwork bool
		hostNetwork  bool
		wantOwn      bool // the pod's own address; else the cell's
	}{
		{name: "own address", wantOwn: true},
		{name: "hostNetwork", hostNetwork: true},
		{name: "cell without pod network", noPodNetwork: true},
		{name: "hostNetwork, cell without pod network", noPodNetwork: true, hostNetwork: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessSetup(t, setup{noPodNetwork: tt.noPodNetwork, config: func(c *Config) { c.AllowHostNetwork = true }})
			h.start(t)
			pod := newPod("web", "uid-1")
			pod.Spec.HostNetwork = tt.hostNetwork
			pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MY_POD_IP",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			if err := h.m.CreatePod(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			insts := h.plugin.Store().Instances()
			if len(insts) != 1 || insts[0].PodAddress() == "" {
				t.Fatalf("instances %+v, want one with a pod address", insts)
			}
			want, wantSent := insts[0].PrivateAddress(), insts[0].PodAddress()
			if tt.wantOwn {
				want = insts[0].PodAddress()
			}
			if tt.noPodNetwork {
				wantSent = ""
			}
			h.agent.mu.Lock()
			defer h.agent.mu.Unlock()
			got := h.agent.env["main"]
			if len(got) != 1 || got[0].Name != "MY_POD_IP" || got[0].Value != want {
				t.Errorf("the agent took env %v, want MY_POD_IP=%s", got, want)
			}
			if h.agent.podAddress != wantSent {
				t.Errorf("the agent took pod address %q, want %q", h.agent.podAddress, wantSent)
			}
		})
	}
}

func TestPodRunsOnItsCell(t *testing.T) {
	h := newHarness(t)
	pod := newPod("web", "uid-1")
	pod.Annotations = map[string]string{match.AnnotationInstanceType: "fake.medium"}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	insts := h.plugin.Store().Instances()
	if len(insts) != 1 || insts[0].PodAddress() == "" {
		t.Fatalf("instances %+v, want one with a pod address", insts)
	}
	if st := running.Status; st.PodIP != insts[0].PodAddress() || st.HostIP != insts[0].PrivateAddress() || st.StartTime == nil {
		t.Errorf("running status = %+v, want the pod's address %s as its IP, the cell's %s as its host's, and a start time",
			st, insts[0].PodAddress(), insts[0].PrivateAddress())
	}
	h.agent.mu.Lock()
	if h.agent.podAddress != insts[0].PodAddress() {
		t.Errorf("the agent was sent pod address %q, want %s", h.agent.podAddress, insts[0].PodAddress())
	}
	h.agent.mu.Unlock()
	reqs := h.plugin.Requests()
	var launch *pluginapi.LaunchRequest
	for _, r := range reqs {
		if r.Method == "Launch" {
			launch = r.Request.(*pluginapi.LaunchRequest)
		}
	}
	if launch == nil || launch.CellID != "kip-uid-1" || launch.InstanceType != "fake.medium" || launch.PodUID != "uid-1" {
		t.Fatalf("launch = %+v, want cell kip-uid-1 of fake.medium for uid-1", launch)
	}
	if dialed := <-h.dialed; !strings.HasPrefix(dialed, "kip-uid-1@") || dialed == "kip-uid-1@" {
		t.Errorf("dialed %q, want the cell at its address", dialed)
	}
	ev := h.events()
	for k, v := range map[string]string{AnnotationPlacedType: "fake.medium", AnnotationPlacedZone: "fake-a",
		AnnotationPlacedCapacityType: "on-demand", AnnotationPlacedPrice: "0.1", match.AnnotationInstanceType: "fake.medium"} {
		if got := running.Annotations[k]; got != v {
			t.Errorf("annotation %s = %q, want %q", k, got, v)
		}
	}
	for _, want := range []string{"LaunchingCell launching cell kip-uid-1 on fake.medium in fake-a (on-demand, $0.1000/h)", "CellRunning cell kip-uid-1 running after", "Normal Started Started container main"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %q:\n%s", want, ev)
		}
	}
	// Creating again (virtual-kubelet's resync) launches nothing new.
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if n := h.plugin.Calls("Launch"); n != 1 {
		t.Errorf("Launch called %d times, want 1", n)
	}
	// An update reaches the agent as a new generation.
	updated := pod.DeepCopy()
	updated.Labels = map[string]string{"v": "2"}
	if err := h.m.UpdatePod(t.Context(), updated); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation 2 applied", func() bool {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		return len(h.agent.applied) >= 2 && h.agent.applied[len(h.agent.applied)-1] == 2
	})
	// Deleting stops the pod on the agent and terminates the instance.
	grace := int64(1)
	updated.DeletionGracePeriodSeconds = &grace
	if err := h.m.DeletePod(t.Context(), updated); err != nil {
		t.Fatal(err)
	}
	eventually(t, "instance terminated and pod forgotten", func() bool {
		_, err := h.m.GetPod(t.Context(), "default", "web")
		return len(h.plugin.Store().Instances()) == 0 && err != nil
	})
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	if h.agent.deleted != 1 {
		t.Errorf("agent DeletePod called %d times, want 1", h.agent.deleted)
	}
}

// TestPodEndedByItsDeletionKeepsNoLogs: a pod whose containers end
// because it is being deleted (the agent's DeletePod stops them) keeps no
// logs and gets no LogsNotKept warning, though delete closes the agent
// while the end is reported.
func TestPodEndedByItsDeletionKeepsNoLogs(t *testing.T) {
	h := newHarness(t)
	h.runningPod(t, "deleted", "uid-deleted")
	pod, err := h.m.GetPod(t.Context(), "default", "deleted")
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	pod.DeletionGracePeriodSeconds = &grace
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	// The containers end under the deletion, as the agent's stop ends them.
	h.agent.phases <- corev1.PodSucceeded
	eventually(t, "instance terminated and pod forgotten", func() bool {
		_, err := h.m.GetPod(t.Context(), "default", "deleted")
		return len(h.plugin.Store().Instances()) == 0 && err != nil
	})
	if ev := h.events(); strings.Contains(ev, ReasonLogsNotKept) {
		t.Errorf("a pod ended by its deletion got a %s warning:\n%s", ReasonLogsNotKept, ev)
	}
}

func TestFinishedPodTerminatesCellButKeepsStatus(t *testing.T) {
	var log syncbuf.Buffer
	h := newHarnessSetup(t, setup{log: &log})
	h.start(t)
	pod := newPod("job", "uid-2")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	h.agent.phases <- corev1.PodSucceeded
	h.waitNotified(t, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	eventually(t, "cell terminated", func() bool { return len(h.plugin.Store().Instances()) == 0 })
	got, err := h.m.GetPod(t.Context(), "default", "job")
	if err != nil || got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("GetPod after the cell ended = %v, %v; want the Succeeded pod until it is deleted", got, err)
	}
	// Deleting the ended pod only forgets it: its agent, whose pod ended
	// and whose instance is gone, is not asked to stop it again (it was:
	// through the closed connection, with a warning for every such pod).
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ended pod forgotten", func() bool {
		_, err := h.m.GetPod(t.Context(), "default", "job")
		return err != nil && strings.Contains(log.String(), "cell already terminated")
	})
	if strings.Contains(log.String(), "stopping the pod on its cell") {
		t.Errorf("deleting the ended pod asked its agent to stop it:\n%s", log.String())
	}
}

func TestDeleteWhileLaunchingLeavesNoCell(t *testing.T) {
	h := newHarness(t, pluginfake.WithBootDelay(time.Hour))
	pod := newPod("slow", "uid-3")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	eventually(t, "launch", func() bool { return h.plugin.Calls("Launch") == 1 })
	_ = h.m.DeletePod(t.Context(), pod)
	eventually(t, "no instance left", func() bool { return len(h.plugin.Store().Instances()) == 0 })
}

func TestRefusedLaunchSaysWhy(t *testing.T) {
	h := newHarness(t)
	h.plugin.FailNext("Launch", pluginapi.NewQuotaExceeded("vCPU limit of 32 reached"))
	pod := newPod("big", "uid-4")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	eventually(t, "a LaunchFailed event", func() bool {
		return strings.Contains(h.events(), "LaunchFailed launching cell kip-uid-4 on fake.small in fake-a (on-demand, $0.0500/h): quota exceeded: vCPU limit of 32 reached")
	})
	// The quota is a refusal, not a capacity shortage: after the back-off
	// the same cheapest type is launched again, and runs.
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if n := h.plugin.Calls("Launch"); n != 2 {
		t.Errorf("Launch called %d times, want 2", n)
	}
	if h.m.deps.placement.unavailable.Len() != 0 {
		t.Errorf("a quota refusal marked %d offerings unavailable", h.m.deps.placement.unavailable.Len())
	}
}

func TestPodGetsTheCheapestTypeThatFits(t *testing.T) {
	tests := []struct {
		name string
		cpu  string
		mem  string
		want string
	}{
		{"no requests", "", "", "fake.small"},
		{"fits small with the agent reserve", "1900m", "3Gi", "fake.small"},
		{"reserve pushes it up", "2", "1Gi", "fake.medium"},
		{"memory decides", "1", "20Gi", "fake.large"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			pod := newPod("p", types.UID(fmt.Sprintf("uid-fit-%d", i)))
			if tt.cpu != "" {
				pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(tt.cpu), corev1.ResourceMemory: resource.MustParse(tt.mem),
				}
			}
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			_ = h.m.CreatePod(t.Context(), pod)
			running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			if got := running.Annotations[AnnotationPlacedType]; got != tt.want {
				t.Errorf("placed on %q, want %q", got, tt.want)
			}
			if got := h.launches(); len(got) != 1 || got[0].InstanceType != tt.want {
				t.Errorf("launches = %+v, want one of %s", got, tt.want)
			}
		})
	}
}

// launches returns the Launch requests the plugin received, in order.
func (h *harness) launches() []*pluginapi.LaunchRequest {
	var out []*pluginapi.LaunchRequest
	for _, r := range h.plugin.Requests() {
		if r.Method == "Launch" {
			out = append(out, r.Request.(*pluginapi.LaunchRequest))
		}
	}
	return out
}

func TestInsufficientCapacityFallsDownTheList(t *testing.T) {
	h := newHarness(t)
	h.plugin.FailNext("Launch", pluginapi.NewInsufficientCapacity("fake.small", "fake-a", pluginapi.CapacityOnDemand, "no capacity"))
	pod := newPod("first", "uid-ic-1")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	var got []string
	for _, l := range h.launches() {
		got = append(got, l.InstanceType+"@"+strings.Join(l.Zones, ","))
	}
	if strings.Join(got, " ") != "fake.small@fake-a fake.medium@fake-a" {
		t.Errorf("launches = %v, want fake.small then the next candidate fake.medium", got)
	}
	if running.Annotations[AnnotationPlacedType] != "fake.medium" || running.Annotations[AnnotationPlacedPrice] != "0.1" {
		t.Errorf("placement annotations = %v", running.Annotations)
	}
	ev := h.events()
	if !strings.Contains(ev, "Warning InsufficientCapacity fake.small in fake-a (on-demand, $0.0500/h): insufficient capacity") {
		t.Errorf("no InsufficientCapacity event:\n%s", ev)
	}
	// Within the TTL a second pod skips the exhausted offering.
	pod2 := newPod("second", "uid-ic-2")
	if err := h.indexer.Add(pod2); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod2)
	eventually(t, "the second launch", func() bool { return len(h.launches()) == 3 })
	if l := h.launches()[2]; l.InstanceType != "fake.medium" || l.PodUID != "uid-ic-2" {
		t.Errorf("second pod launched %s for %s, want fake.medium: fake.small is marked unavailable", l.InstanceType, l.PodUID)
	}
}

func TestUnsatisfiablePodStaysPendingWithoutACell(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   string
	}{
		{"unknown type", func(p *corev1.Pod) {
			p.Annotations = map[string]string{match.AnnotationElotlInstanceType: "fake.enormous"}
		}, "fake.enormous"},
		{"too big", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
		}, "64 vCPU"},
		{"spot only", func(p *corev1.Pod) { p.Annotations = map[string]string{match.AnnotationCapacityType: "spot"} }, "spot"},
		{"bad capacity type", func(p *corev1.Pod) { p.Annotations = map[string]string{match.AnnotationCapacityType: "cheap"} }, `"cheap"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			pod := newPod("nope", types.UID(fmt.Sprintf("uid-no-%d", i)))
			tt.mutate(pod)
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			_ = h.m.CreatePod(t.Context(), pod)
			p := h.waitNotified(t, "the reason", func(p *corev1.Pod) bool { return p.Status.Reason == ReasonNoInstanceType })
			if p.Status.Phase != corev1.PodPending || !strings.Contains(p.Status.Message, tt.want) {
				t.Errorf("status = %s %q, want Pending with a message containing %q", p.Status.Phase, p.Status.Message, tt.want)
			}
			if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != ReasonNoInstanceType {
				t.Errorf("container state = %+v, want waiting for %s", p.Status.ContainerStatuses[0].State, ReasonNoInstanceType)
			}
			eventually(t, "the event", func() bool {
				return strings.Contains(h.events(), "Warning NoInstanceType ")
			})
			if n := h.plugin.Calls("Launch"); n != 0 {
				t.Errorf("Launch called %d times for a pod nothing fits", n)
			}
			// Fixing the pod places it.
			fixed := newPod("nope", pod.UID)
			if err := h.m.UpdatePod(t.Context(), fixed); err != nil {
				t.Fatal(err)
			}
			running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			if running.Status.Reason != "" || running.Annotations[AnnotationPlacedType] != "fake.small" {
				t.Errorf("after the fix: reason %q, placed on %q", running.Status.Reason, running.Annotations[AnnotationPlacedType])
			}
		})
	}
}

func TestGarbageCollection(t *testing.T) {
	h := newHarness(t)
	pod := newPod("gone", "uid-5")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// The pod vanishes from the API without a DeletePod (virtual-kubelet's
	// force delete of a pod that never ran).
	if err := h.indexer.Delete(pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cell of the vanished pod terminated", func() bool {
		_, err := h.m.GetPod(t.Context(), "default", "gone")
		return err != nil && len(h.plugin.Store().Instances()) == 0
	})
}

func TestAdoptionAndOrphans(t *testing.T) {
	store := pluginfake.NewStore()
	seed := pluginfake.New(pluginfake.WithStore(store))
	if _, err := seed.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"uid-kept", "uid-orphan"} {
		if _, err := seed.Launch(t.Context(), &pluginapi.LaunchRequest{
			CellID: CellID(types.UID(uid)), NodeName: "kip", PodUID: uid, InstanceType: "fake.small", CapacityType: pluginapi.CapacityOnDemand,
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Only uid-kept's pod still exists when kip starts again.
	hh := newHarnessWithPods(t, store, newPod("kept", "uid-kept"))
	eventually(t, "the orphan terminated and the kept cell adopted", func() bool {
		insts := hh.plugin.Store().Instances()
		return len(insts) == 1 && insts[0].CellID == CellID("uid-kept")
	})
	if n := hh.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times; an adopted cell is reconnected, not relaunched", n)
	}
	p := hh.waitNotified(t, "the adopted pod Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if p.UID != "uid-kept" {
		t.Errorf("adopted pod = %s", p.UID)
	}
}

// newHarnessWithPods starts a Manager on store with pods already bound.
func newHarnessWithPods(t *testing.T, store *pluginfake.Store, pods ...*corev1.Pod) *harness {
	t.Helper()
	h := newHarnessDeferred(t, pluginfake.WithStore(store))
	for _, p := range pods {
		_ = h.indexer.Add(p)
	}
	h.start(t)
	return h
}

func TestUnlimitedCreditsReachTheLaunch(t *testing.T) {
	types := append(pluginfake.DefaultInstanceTypes(), pluginapi.InstanceType{
		Name: "fake.burst", MilliCPU: 2000, MemoryBytes: 2 << 30, Arch: pluginapi.ArchAMD64, BurstableBaselineMilliCPU: 400,
		Offerings: []pluginapi.Offering{{Zone: pluginfake.DefaultZone, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.01, PriceKnown: true, Available: true}},
	})
	h := newHarnessSetup(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithInstanceTypes(types)},
		config: func(c *Config) { c.Match.BurstablePolicy = match.BurstableUnlimited },
	})
	h.start(t)
	pod := newPod("bursty", "uid-burst")
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	l := h.launches()
	// 1.1 vCPU on a 0.4-vCPU baseline: 0.7 vCPU-hours of surplus credits at
	// $0.05 make $0.045/h, still below fake.small's $0.05.
	if len(l) != 1 || l[0].InstanceType != "fake.burst" || !l[0].UnlimitedCPUCredits {
		t.Fatalf("launches = %+v, want fake.burst with unlimited CPU credits", l)
	}
	if ev := h.events(); !strings.Contains(ev, "on fake.burst in fake-a (on-demand, $0.0450/h with unlimited CPU credits)") {
		t.Errorf("events lack the unlimited-credit launch:\n%s", ev)
	}
}

// create adds pod to the API's pods and creates it on the node.
func (h *harness) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
}

// runningPod creates a pod, waits until it runs on its cell and returns
// its instance's ID.
func (h *harness) runningPod(t *testing.T, name string, uid types.UID) string {
	t.Helper()
	h.create(t, newPod(name, uid))
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	insts := h.plugin.Store().Instances()
	if len(insts) != 1 {
		t.Fatalf("%d instances, want 1", len(insts))
	}
	return insts[0].ID
}

func TestSpotInterruptionFailsThePodWithTheReason(t *testing.T) {
	h := newHarness(t)
	id := h.runningPod(t, "spotty", "uid-spot")
	// A notice with no time left (EC2 is reclaiming the instance now: the
	// aws plugin's state-reason event) evicts nothing; with time left, see
	// TestSpotInterruptionNoticeEvictsThePod.
	deadline := time.Now()
	eventually(t, "the notice delivered", func() bool {
		// WatchEvents may not be subscribed yet: repeat the notice.
		if err := h.plugin.Store().Notify(id, pluginapi.EventInterruption, "Server.SpotInstanceTermination", deadline); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(h.events(), "Warning SpotInterruption the cloud is reclaiming cell kip-uid-spot (instance "+id+", spot) by ") // …; the pod will fail
	})
	// The agent's status stream is healthy: only the state-change event
	// makes kip look at the instance now.
	if err := h.plugin.Store().SetState(id, pluginapi.StateTerminated, "Server.SpotInstanceTermination: Spot instance termination"); err != nil {
		t.Fatal(err)
	}
	failed := h.waitNotified(t, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if failed.Status.Reason != ReasonCellLost || !strings.Contains(failed.Status.Message, "spot interruption: cell kip-uid-spot (instance "+id+") is terminated") ||
		!strings.Contains(failed.Status.Message, "Server.SpotInstanceTermination") {
		t.Errorf("failed status = %s %q, want CellLost naming the spot interruption", failed.Status.Reason, failed.Status.Message)
	}
}

// TestSpotInterruptionNoticeEvictsThePod: a spot interruption notice with
// time left, from the plugin's events or from the agent's status stream
// (the instance's metadata), fails the pod at once as the kubelet's node
// shutdown does (Failed, Terminated, DisruptionTarget), stops its
// containers within its grace period cut to the time left, and ends the
// cell.
func TestSpotInterruptionNoticeEvictsThePod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		notify func(h *harness, id string, at time.Time) error
		reason string // in the SpotInterruption event
	}{
		{"plugin event", func(h *harness, id string, at time.Time) error {
			return h.plugin.Store().Notify(id, pluginapi.EventInterruption, "instance-action terminate (EventBridge)", at)
		}, ": instance-action terminate (EventBridge)"},
		{"instance metadata", func(h *harness, _ string, at time.Time) error {
			select {
			case h.agent.notices <- []cellapi.InstanceNotice{{Kind: cellapi.NoticeInterruption, Action: "terminate", Time: at}}:
			default: // the cell ended: nobody reads them
			}
			return nil
		}, ": spot/instance-action terminate from the instance's metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := h.runningPod(t, "spotty", "uid-spot")
			at := time.Now().Add(30 * time.Second).Truncate(time.Second)
			var events string
			eventually(t, "the notice delivered", func() bool {
				// WatchEvents may not be subscribed yet: repeat the notice
				// (until the evicted cell's instance is gone).
				_ = tc.notify(h, id, at)
				events += h.events()
				return strings.Contains(events, "Warning SpotInterruption ")
			})
			want := "Warning SpotInterruption the cloud is reclaiming cell kip-uid-spot (instance " + id + ", spot) by " + at.UTC().Format(time.RFC3339) + tc.reason +
				"; the pod is evicted with a grace period of "
			if !strings.Contains(events, want) {
				t.Errorf("events lack %q:\n%s", want, events)
			}
			failed := h.waitNotified(t, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
			wantMsg := "Pod was terminated in response to imminent node shutdown: the cloud reclaims cell kip-uid-spot (spot instance " + id + ") by " + at.UTC().Format(time.RFC3339) + "."
			if failed.Status.Reason != ReasonTerminated || failed.Status.Message != wantMsg {
				t.Errorf("failed status = %s %q, want %s %q", failed.Status.Reason, failed.Status.Message, ReasonTerminated, wantMsg)
			}
			cond := findCondition(failed.Status.Conditions, corev1.DisruptionTarget)
			if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != corev1.PodReasonTerminationByKubelet {
				t.Errorf("DisruptionTarget condition = %+v, want True TerminationByKubelet", cond)
			}
			// The containers stop within the pod's grace (30 s) cut to the
			// 30 s left less the margin, then the cell ends.
			eventually(t, "the instance terminated", func() bool {
				for _, in := range h.plugin.Store().Instances() {
					if in.ID == id && in.State != pluginapi.StateTerminated && in.State != pluginapi.StateTerminating {
						return false
					}
				}
				return true
			})
			h.agent.mu.Lock()
			graces := slices.Clone(h.agent.graces)
			h.agent.mu.Unlock()
			if len(graces) == 0 || graces[0] > 20 || graces[0] < 10 {
				t.Errorf("DeletePod graces %v, want first about 20 s (30 s left less the 10 s margin)", graces)
			}
			// The notice repeated (the agent sends it with every update)
			// is recorded once.
			_ = tc.notify(h, id, at)
			if n := strings.Count(events+h.events(), "Warning SpotInterruption"); n != 1 {
				t.Errorf("%d SpotInterruption events, want 1:\n%s", n, events)
			}
		})
	}
}

func TestCloudNoticesBecomePodEvents(t *testing.T) {
	h := newHarness(t)
	id := h.runningPod(t, "noticed", "uid-notice")
	var seen string
	eventually(t, "rebalance and maintenance events", func() bool {
		_ = h.plugin.Store().Notify(id, pluginapi.EventRebalance, "capacity rebalancing", time.Time{})
		_ = h.plugin.Store().Notify(id, pluginapi.EventMaintenance, "system-reboot", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		seen += h.events()
		return strings.Contains(seen, "Warning RebalanceRecommended the cloud recommends replacing cell kip-uid-notice") &&
			strings.Contains(seen, "Warning ScheduledMaintenance the cloud will stop or move cell kip-uid-notice (instance "+id+") for maintenance by 2026-12-01T00:00:00Z: system-reboot")
	})
	if p, _ := h.m.GetPod(t.Context(), "default", "noticed"); p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase after notices = %s, want Running: notices alone end nothing", p.Status.Phase)
	}
}

func TestCloudRegistryCredentialsReachTheCell(t *testing.T) {
	h := newHarness(t)
	pod := newPod("private", "uid-reg")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: pluginfake.RegistryServer + "/team/init:1"}}
	pod.Spec.Containers[0].Image = pluginfake.RegistryServer + "/team/app:1"
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "public", Image: "docker.io/library/busybox:1"})
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// A second Apply (the pod changed) asks the plugin nothing new.
	updated := pod.DeepCopy()
	updated.Labels = map[string]string{"v": "2"}
	_ = h.m.UpdatePod(t.Context(), updated)
	eventually(t, "generation 2 applied", func() bool {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		return len(h.agent.applied) > 0 && h.agent.applied[len(h.agent.applied)-1] == 2
	})
	h.agent.mu.Lock()
	creds := h.agent.creds
	h.agent.mu.Unlock()
	if len(creds) != 1 || creds[0].Server != pluginfake.RegistryServer || creds[0].Password != "fake-token" {
		t.Fatalf("credentials sent to the cell = %v, want the plugin's for %s only", creds, pluginfake.RegistryServer)
	}
	var asked []string
	for _, r := range h.plugin.Requests() {
		if r.Method == "RegistryAuth" {
			asked = append(asked, r.Request.(*pluginapi.RegistryAuthRequest).Image)
		}
	}
	// One call per registry, answers and refusals cached: docker.io was
	// asked once and refused.
	if len(asked) != 2 || asked[0] != pluginfake.RegistryServer+"/team/init:1" || asked[1] != "docker.io/library/busybox:1" {
		t.Errorf("RegistryAuth asked for %v", asked)
	}
}

func TestRegistryHost(t *testing.T) {
	for image, want := range map[string]string{
		"busybox":                   "",
		"library/busybox:1":         "",
		"docker.io/library/busybox": "docker.io",
		"localhost/app":             "localhost",
		"127.0.0.1:5000/app:v1":     "127.0.0.1:5000",
		"123.dkr.ecr.us-east-1.amazonaws.com/app@sha256:ab": "123.dkr.ecr.us-east-1.amazonaws.com",
	} {
		if got := registryHost(image); got != want {
			t.Errorf("registryHost(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestRunningEventWakesABootingCell(t *testing.T) {
	// Polls that would take far longer than the test: only the event can
	// make the cell look again in time.
	h := newHarnessSetup(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithBootDelay(time.Hour)},
		config: func(c *Config) {
			c.Backoff = func(int) time.Duration { return time.Hour }
			c.BootPoll = time.Hour
		},
	})
	h.start(t)
	pod := newPod("booting", "uid-boot")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	eventually(t, "the launch", func() bool { return len(h.plugin.Store().Instances()) == 1 })
	id := h.plugin.Store().Instances()[0].ID
	if err := h.plugin.Store().SetState(id, pluginapi.StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

func TestLaunchAnnotationsReachThePlugin(t *testing.T) {
	h := newHarness(t)
	pod := newPod("shaped", "uid-shaped")
	pod.Annotations = map[string]string{
		AnnotationSecurityGroups:  "sg-0123456789abcdef0, sg-0fedcba9876543210",
		AnnotationInstanceProfile: "arn:aws:iam::123456789012:instance-profile/cells",
		AnnotationVolumeSize:      "50Gi",
	}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	eventually(t, "the launch", func() bool { return len(h.launches()) == 1 })
	l := h.launches()[0]
	if !slices.Equal(l.SecurityGroups, []string{"sg-0123456789abcdef0", "sg-0fedcba9876543210"}) ||
		l.InstanceProfile != "arn:aws:iam::123456789012:instance-profile/cells" || l.VolumeSizeGiB != 50 {
		t.Errorf("launch = groups %v, profile %q, volume %d GiB", l.SecurityGroups, l.InstanceProfile, l.VolumeSizeGiB)
	}
}

func TestPodLaunchOptions(t *testing.T) {
	tests := []struct {
		ann     map[string]string
		want    launchOptions
		wantErr string
	}{
		{nil, launchOptions{}, ""},
		{map[string]string{AnnotationVolumeSize: "20"}, launchOptions{volumeSizeGiB: 20}, ""},
		{map[string]string{AnnotationVolumeSize: "1500Mi"}, launchOptions{volumeSizeGiB: 2}, ""},
		{map[string]string{AnnotationVolumeSize: "big"}, launchOptions{}, `annotation kipcell.io/volume-size "big" is not a size`},
		{map[string]string{AnnotationVolumeSize: "-5"}, launchOptions{}, "is not a size"},
		{map[string]string{AnnotationVolumeSize: "1e44444422"}, launchOptions{}, "is not a size"},
		{map[string]string{AnnotationSecurityGroups: "sg-1,,sg-2"}, launchOptions{}, "has an empty entry"},
	}
	for _, tt := range tests {
		pod := newPod("p", "u")
		pod.Annotations = tt.ann
		got, err := podLaunchOptions(pod)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: err = %v, want %q", tt.ann, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: got %+v, %v; want %+v", tt.ann, got, err, tt.want)
		}
	}
}

func TestBadLaunchAnnotationLaunchesNothing(t *testing.T) {
	h := newHarness(t)
	pod := newPod("badvol", "uid-badvol")
	pod.Annotations = map[string]string{AnnotationVolumeSize: "big"}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	eventually(t, "a LaunchFailed event", func() bool {
		return strings.Contains(h.events(), `Warning LaunchFailed launching cell kip-uid-badvol: annotation kipcell.io/volume-size "big" is not a size such as 50Gi`)
	})
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times for a pod with a bad annotation", n)
	}
}

// streamCutter is a plugin whose event stream breaks for good once cut is
// closed.
type streamCutter struct {
	pluginapi.Client
	cut chan struct{}
}

func (s *streamCutter) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.cut:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := s.Client.WatchEvents(ctx, req, send)
	select {
	case <-s.cut:
		return errors.New("stream cut")
	default:
		return err
	}
}

// While the plugin's event stream is up, a booting cell leaves the looking
// to the running event (BootPollWatched); once the stream is gone it polls
// at BootPoll again.
func TestBootingCellPollsOnlyWithoutEvents(t *testing.T) {
	cut := make(chan struct{})
	h := newHarnessSetup(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithBootDelay(time.Hour)},
		config: func(c *Config) { c.BootPoll, c.BootPollWatched = 10*time.Millisecond, time.Hour },
		wrap:   func(p *pluginfake.Provider) pluginapi.Client { return &streamCutter{Client: p, cut: cut} },
	})
	h.start(t)
	eventually(t, "the event stream", h.m.watch.watching)
	pod := newPod("booting", "uid-boot")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	eventually(t, "the launch", func() bool { return len(h.plugin.Store().Instances()) == 1 })
	time.Sleep(200 * time.Millisecond) // twenty BootPolls
	if n := h.plugin.Calls("Describe"); n != 0 {
		t.Errorf("%d Describe calls while the event stream was up, want none", n)
	}
	close(cut)
	eventually(t, "polling without the event stream", func() bool { return h.plugin.Calls("Describe") >= 3 })
}

// After a plugin swap the next placement reads the new process's catalog
// and capabilities at once, not when the old catalog's TTL runs out.
func TestRefreshCatalogFetchesAgain(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	if _, err := h.m.catalog.get(ctx); err != nil {
		t.Fatal(err)
	}
	fetched := h.plugin.Calls("ListInstanceTypes")
	if _, err := h.m.catalog.get(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.plugin.Calls("ListInstanceTypes"); n != fetched {
		t.Fatalf("a fresh catalog was fetched again (%d calls, then %d) within its TTL", fetched, n)
	}
	h.m.RefreshCatalog()
	if _, err := h.m.catalog.get(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.plugin.Calls("ListInstanceTypes"); n != fetched+1 {
		t.Errorf("after RefreshCatalog: %d ListInstanceTypes calls, want %d", n, fetched+1)
	}
}
