package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kipcell/kip/host/setting"
)

func TestParseTaint(t *testing.T) {
	tests := []struct {
		in      string
		want    *corev1.Taint
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "none", want: nil},
		{in: DefaultTaint, want: &corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "kip", Effect: corev1.TaintEffectNoSchedule}},
		{in: "kipcell.io/cells:NoExecute", want: &corev1.Taint{Key: "kipcell.io/cells", Effect: corev1.TaintEffectNoExecute}},
		{in: "dedicated=:PreferNoSchedule", want: &corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectPreferNoSchedule}},
		{in: "a=b", wantErr: true},
		{in: "a=b:Never", wantErr: true},
		{in: "bad key!=v:NoSchedule", wantErr: true},
		{in: "k=" + strings.Repeat("v", 64) + ":NoSchedule", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseTaint(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTaint(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" && !tt.wantErr {
			t.Errorf("ParseTaint(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		// wantKey is the key of the *setting.Error expected; wantErr the
		// text of another error (Name, Labels are no settings).
		wantKey string
		wantErr string
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "bad name", mutate: func(c *Config) { c.Name = "Kip_1" }, wantErr: "node name"},
		{name: "no name: New gives the default", mutate: func(c *Config) { c.Name = "" }},
		{name: "bad label", mutate: func(c *Config) { c.Labels = map[string]string{"a b": "c"} }, wantErr: "label key"},
		{name: "negative health grace", mutate: func(c *Config) { c.HealthGrace = -time.Second }, wantErr: "health grace"},
		{name: "no taint", mutate: func(c *Config) { c.Taint = "" }},
		{name: "taint none", mutate: func(c *Config) { c.Taint = "none" }},
		{name: "taint without value", mutate: func(c *Config) { c.Taint = "kipcell.io/cells:NoExecute" }},
		{name: "bad taint effect", mutate: func(c *Config) { c.Taint = "a=b:Never" }, wantKey: "taint"},
		{name: "bad taint form", mutate: func(c *Config) { c.Taint = "a=b" }, wantKey: "taint"},
		{name: "bad taint key", mutate: func(c *Config) { c.Taint = "bad key!=v:NoSchedule" }, wantKey: "taint"},
		{name: "millicores", mutate: func(c *Config) { c.Capacity.CPU = "64500m" }},
		{name: "bad cpu", mutate: func(c *Config) { c.Capacity.CPU = "lots" }, wantKey: "capacity.cpu"},
		{name: "negative cpu", mutate: func(c *Config) { c.Capacity.CPU = "-1" }, wantKey: "capacity.cpu"},
		{name: "bad memory", mutate: func(c *Config) { c.Capacity.Memory = "4 TB" }, wantKey: "capacity.memory"},
		{name: "empty pods", mutate: func(c *Config) { c.Capacity.Pods = "" }, wantKey: "capacity.pods"},
		{name: "bad arch", mutate: func(c *Config) { c.Arch = "x86-64" }, wantKey: "arch"},
		{name: "zone", mutate: func(c *Config) { c.Zone = "us-east-1a" }},
		{name: "bad zone", mutate: func(c *Config) { c.Zone = "us east 1a" }, wantKey: "zone"},
		{name: "bad internal IP", mutate: func(c *Config) { c.InternalIP = "kip.local" }, wantKey: "internalIP"},
		{name: "IPv6 internal IP", mutate: func(c *Config) { c.InternalIP = "fd00::1" }},
		{name: "bad listen address", mutate: func(c *Config) { c.ListenAddress = "10250" }, wantKey: "listenAddress"},
		{name: "cert without key", mutate: func(c *Config) { c.TLSCertFile = "/tls.crt" }, wantKey: "tlsKeyFile"},
		{name: "key without cert", mutate: func(c *Config) { c.TLSKeyFile = "/tls.key" }, wantKey: "tlsCertFile"},
		{name: "short lease", mutate: func(c *Config) { c.LeaseDurationSeconds = 2 }, wantKey: "leaseDurationSeconds"},
		{name: "zero status interval", mutate: func(c *Config) { c.StatusUpdateInterval = 0 }, wantKey: "statusUpdateInterval"},
		{name: "no workers", mutate: func(c *Config) { c.Workers = 0 }, wantKey: "workers"},
		{name: "cluster DNS", mutate: func(c *Config) { c.ClusterDNS = []string{"10.96.0.10", "fd00::a"} }},
		{name: "bad cluster DNS", mutate: func(c *Config) { c.ClusterDNS = []string{"10.96.0.10", "dns.local"} }, wantKey: "clusterDNS"},
		{name: "four cluster DNS servers", mutate: func(c *Config) { c.ClusterDNS = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"} }, wantKey: "clusterDNS"},
		{name: "other cluster domain", mutate: func(c *Config) { c.ClusterDomain = "kip.example" }},
		{name: "bad cluster domain", mutate: func(c *Config) { c.ClusterDomain = "Cluster_Local" }, wantKey: "clusterDomain"},
		{name: "no cluster domain", mutate: func(c *Config) { c.ClusterDomain = "" }, wantKey: "clusterDomain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig("kip")
			tt.mutate(&c)
			err := c.Validate()
			var serr *setting.Error
			switch {
			case tt.wantKey == "" && tt.wantErr == "":
				if err != nil {
					t.Errorf("Validate = %v, want nil", err)
				}
			case tt.wantKey != "":
				if !errors.As(err, &serr) || serr.Key != tt.wantKey {
					t.Errorf("Validate = %v, want a setting error naming %s", err, tt.wantKey)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.As(err, &serr) {
					t.Errorf("Validate = %v, want an error containing %q", err, tt.wantErr)
				}
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("Validate = %q, want one line", err)
			}
		})
	}
}

// New completes a Config to the defaults; kip.yaml's defaults are the same
// (DefaultConfig), so a zero field means the same in both.
func TestWithDefaults(t *testing.T) {
	if diff := cmp.Diff(DefaultConfig(DefaultName), Config{Taint: DefaultTaint}.withDefaults()); diff != "" {
		t.Errorf("a zero Config with the default taint (-DefaultConfig +withDefaults):\n%s", diff)
	}
	set := Config{Name: "n", Taint: "", Capacity: Capacity{CPU: "8"}, Arch: "arm64", LeaseDurationSeconds: 8}.withDefaults()
	if set.Name != "n" || set.Taint != "" || set.Capacity != (Capacity{CPU: "8", Memory: DefaultMemory, Pods: DefaultPods, GPUs: DefaultGPUs, EphemeralStorage: DefaultEphemeralStorage}) || set.Arch != "arm64" || set.LeaseDurationSeconds != 8 {
		t.Errorf("withDefaults overwrote a field that was set: %+v", set)
	}
}

func TestNodeObject(t *testing.T) {
	now := time.Unix(1700000000, 0)
	cfg := DefaultConfig("kip")
	cfg.Labels = map[string]string{"topology.kubernetes.io/region": "local"}
	cfg.Version = "v1.2.3"
	cfg.Annotations = map[string]string{"kipcell.io/kept-logs": `{"identity":"kip-a","url":"http://10.0.0.7:10262"}`}
	n := nodeObject(cfg, "10.0.0.7", 12345, nodeState{}, now)
	if diff := cmp.Diff(cfg.Annotations, n.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}

	wantLabels := map[string]string{
		"type": "virtual-kubelet", "kubernetes.io/hostname": "kip", "kubernetes.io/os": "linux",
		"kubernetes.io/arch": "amd64", "topology.kubernetes.io/region": "local",
	}
	if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if _, ok := cfg.Labels[LabelType]; ok {
		t.Error("nodeObject modified Config.Labels")
	}
	wantTaints := []corev1.Taint{{Key: "virtual-kubelet.io/provider", Value: "kip", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTaints, n.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != 12345 {
		t.Errorf("kubelet port = %d, want 12345", got)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}}
	if diff := cmp.Diff(wantAddrs, n.Status.Addresses); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		want := resource.MustParse(map[corev1.ResourceName]string{corev1.ResourceCPU: DefaultCPU, corev1.ResourceMemory: DefaultMemory, corev1.ResourcePods: DefaultPods}[r])
		if got := n.Status.Capacity[r]; got.Cmp(want) != 0 {
			t.Errorf("capacity %s = %s, want %s", r, got.String(), want.String())
		}
		if got := n.Status.Allocatable[r]; got.Cmp(want) != 0 {
			t.Errorf("allocatable %s = %s, want %s", r, got.String(), want.String())
		}
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != "kip/v1.2.3" {
		t.Errorf("kubelet version = %q, want kip/v1.2.3", got)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
		if c.Type != corev1.NodeReady && c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %s, want False", c.Type, c.Status)
		}
	}
	if !ready {
		t.Error("no Ready=True condition")
	}

	cfg.SetRoleLabel = true
	cfg.Taint = ""
	n = nodeObject(cfg, "10.0.0.7", 1, nodeState{}, now)
	if n.Labels[LabelRole] != LabelRoleKip {
		t.Errorf("SetRoleLabel: labels = %v, want %s=%s", n.Labels, LabelRole, LabelRoleKip)
	}
	if len(n.Spec.Taints) != 0 {
		t.Errorf("no taint configured: taints = %v", n.Spec.Taints)
	}
}

func TestMissingTaint(t *testing.T) {
	taint, _ := ParseTaint(DefaultTaint)
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{*taint}}}
	if missingTaint(n, taint) {
		t.Error("missingTaint = true for a node with the taint")
	}
	other := *taint
	other.Value = "other"
	if !missingTaint(n, &other) {
		t.Error("missingTaint = false for a different value")
	}
	if missingTaint(&corev1.Node{}, nil) {
		t.Error("missingTaint = true with no taint configured")
	}
}

type fakeHealth struct{ err error }

func (f *fakeHealth) Healthy(context.Context) error { return f.err }

// TestReadyAfterGrace: Ping keeps the Lease alive whatever the backend's
// health (kip runs); the Ready condition turns False, with why, only once
// Healthy has failed without interruption for the grace period, and True
// with the first success, each change sent as a status.
func TestReadyAfterGrace(t *testing.T) {
	h := &fakeHealth{}
	now := time.Unix(0, 0)
	p := &nodeProvider{health: h, grace: time.Minute, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now },
		kick: make(chan struct{}, 1)}
	ctx := t.Context()
	step := func(d time.Duration, err error, wantNotReady bool) {
		t.Helper()
		now = now.Add(d)
		h.err = err
		if got := p.Ping(ctx); got != nil {
			t.Errorf("at %s: Ping = %v, want nil (the lease goes on)", now.Sub(time.Unix(0, 0)), got)
		}
		if got := p.state().notReady; (got != "") != wantNotReady {
			t.Errorf("at %s with health %v: not ready %q, want not ready %v", now.Sub(time.Unix(0, 0)), err, got, wantNotReady)
		}
	}
	down := errors.New("plugin restarting")
	step(0, nil, false)
	step(10*time.Second, down, false) // failing since 10s
	step(40*time.Second, down, false) // 40s into the outage
	step(10*time.Second, nil, false)  // recovered: the clock resets
	step(10*time.Second, down, false) // failing since 70s
	step(59*time.Second, down, false) // 59s
	step(time.Second, down, true)     // a whole minute: NotReady
	if got := p.state().notReady; !strings.Contains(got, "cell backend unhealthy since 1970-01-01T00:01:10Z: plugin restarting") {
		t.Errorf("why = %q", got)
	}
	select {
	case <-p.kick:
	default:
		t.Error("no status sent when the node turned NotReady")
	}
	step(time.Second, nil, false) // and back
	select {
	case <-p.kick:
	default:
		t.Error("no status sent when the node turned Ready")
	}
	n := nodeObject(DefaultConfig("kip"), "10.0.0.7", 1, nodeState{notReady: "why"}, now)
	if c := n.Status.Conditions[0]; c.Type != corev1.NodeReady || c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != "why" {
		t.Errorf("Ready = %+v, want False KubeletNotReady why", c)
	}

	var none nodeProvider
	if err := none.Ping(ctx); err != nil {
		t.Errorf("Ping without a health checker = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Ping(cctx); err == nil {
		t.Error("Ping with a cancelled context = nil")
	}
}

// TestKubeletAPIUnauthenticated covers what needs no API server: requests
// without credentials. (The webhook clients post through the clientset's
// RESTClient, which the fake lacks; test/e2e/node_test.go covers tokens,
// certificates and SubjectAccessReviews against a real API server.)
func TestKubeletAPIUnauthenticated(t *testing.T) {
	auth, err := nodeutil.WebhookAuth(fake.NewClientset(), "kip")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	h := withAuth(auth, ok, slog.New(slog.DiscardHandler))

	noCert := httptest.NewRequest(http.MethodGet, "https://kip:10250/containerLogs/ns/pod/c", nil)
	unnamed := httptest.NewRequest(http.MethodGet, "https://kip:10250/containerLogs/ns/pod/c", nil)
	unnamed.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{Organization: []string{"system:masters"}}}}}}
	for name, r := range map[string]*http.Request{"no credentials": noCert, "certificate without a name": unnamed} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s: status = %d (%s), want 401", name, w.Code, strings.TrimSpace(w.Body.String()))
		}
	}
}

func TestX509User(t *testing.T) {
	u := x509User{name: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}}
	if u.GetName() != "kube-apiserver-kubelet-client" || u.GetUID() != "" || len(u.GetGroups()) != 1 || u.GetExtra() != nil {
		t.Errorf("x509User = %+v", u)
	}
}

func TestNewDefaults(t *testing.T) {
	n, err := New(fake.NewClientset(), nopPods{}, Config{InternalIP: "127.0.0.1"}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c := n.Config()
	if c.Name != DefaultName || c.ListenAddress != DefaultListenAddress || c.leaseDuration() != DefaultLeaseDuration || c.Workers != DefaultWorkers {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.Taint != "" {
		t.Errorf("a zero Config's empty taint became %q; empty means no taint", c.Taint)
	}
	cert, err := n.tlsConfig.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if leaf := cert.Leaf; leaf == nil || leaf.IPAddresses[0].String() != "127.0.0.1" || leaf.DNSNames[0] != "kip" {
		t.Errorf("self-signed certificate does not name 127.0.0.1 and kip: %+v", leaf)
	}
	if n.tlsConfig.ClientAuth != tls.NoClientCert {
		t.Errorf("ClientAuth = %v without a client CA", n.tlsConfig.ClientAuth)
	}
	if _, err := New(fake.NewClientset(), nopPods{}, Config{ClientCAFile: "/nonexistent"}, nil); err == nil {
		t.Error("New with a missing client CA file succeeded")
	}
	if _, err := New(fake.NewClientset(), nil, Config{}, nil); err == nil {
		t.Error("New without Pods succeeded")
	}
}

// nopPods is a Pods that knows no pods.
type nopPods struct{}

func (nopPods) CreatePod(context.Context, *corev1.Pod) error { return nil }
func (nopPods) UpdatePod(context.Context, *corev1.Pod) error { return nil }
func (nopPods) DeletePod(context.Context, *corev1.Pod) error { return nil }
func (nopPods) GetPod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, errdefs.NotFound("no pods")
}
func (nopPods) GetPodStatus(context.Context, string, string) (*corev1.PodStatus, error) {
	return nil, errdefs.NotFound("no pods")
}
func (nopPods) GetPods(context.Context) ([]*corev1.Pod, error) { return nil, nil }
func (nopPods) NotifyPods(context.Context, func(*corev1.Pod))  {}
func (nopPods) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, errdefs.NotFound("no pods")
}
func (nopPods) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errdefs.NotFound("no pods")
}
func (nopPods) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.NotFound("no pods")
}
func (nopPods) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.NotFound("no pods")
}

// The pod informer's transform drops managedFields and keeps the rest.
func TestStripManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	got, err := stripManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*corev1.Pod)
	if p.ManagedFields != nil || p.Name != "p" || p.Labels["a"] != "b" {
		t.Errorf("stripManagedFields = %+v, want the pod without managedFields", p.ObjectMeta)
	}
	// Not an object (a tombstone): passed through.
	if got, err := stripManagedFields("x"); got != "x" || err != nil {
		t.Errorf("stripManagedFields(x) = %v, %v", got, err)
	}
}
