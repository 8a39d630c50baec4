package pod

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/logs"
)

// TestPodNetwork: the manager gives a pod with an address of its own
// (Desired.PodAddress) and no hostNetwork its own namespace through
// Config.Network before its first container, which joins it, and reports
// that address as podIP (the cell's as hostIP); a hostNetwork pod, or one
// without an address, joins the cell's namespace at the cell's address.
func TestPodNetwork(t *testing.T) {
	const cellNS, podNS = "/var/run/netns/cell", "/state/podnet/net"
	tests := []struct {
		name        string
		address     string
		hostNetwork bool
		wantAsked   string // the address Network was called with
		wantNS      string
		wantPodIP   string
	}{
		{name: "own address", address: "10.0.0.8", wantAsked: "10.0.0.8", wantNS: podNS, wantPodIP: "10.0.0.8"},
		{name: "own address, hostNetwork", address: "10.0.0.8", hostNetwork: true, wantAsked: "", wantNS: cellNS, wantPodIP: "10.0.0.7"},
		{name: "no address", wantAsked: "", wantNS: cellNS, wantPodIP: "10.0.0.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			var mu sync.Mutex
			var asked []string
			m := New(Config{
				Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
				NetNSPath: cellNS, Backoff: testBackoff,
				Network: func(_ context.Context, address string) (string, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, address)
					if address == "" {
						return cellNS, nil
					}
					return podNS, nil
				},
			})
			p := testPod(corev1.RestartPolicyAlways, "main")
			p.Spec.HostNetwork = tt.hostNetwork
			if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, PodAddress: tt.address}); err != nil {
				t.Fatal(err)
			}
			st := waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
			if st.PodIP != tt.wantPodIP || st.HostIP != "10.0.0.7" {
				t.Errorf("podIP %q, hostIP %q; want %q and the cell's 10.0.0.7", st.PodIP, st.HostIP, tt.wantPodIP)
			}
			mu.Lock()
			if len(asked) != 1 || asked[0] != tt.wantAsked {
				t.Errorf("Network was called with %q, want once with %q", asked, tt.wantAsked)
			}
			mu.Unlock()
			rt.mu.Lock()
			started := rt.started
			rt.mu.Unlock()
			if len(started) != 1 || started[0].NetNSPath != tt.wantNS {
				t.Errorf("containers started %+v, want one in %s", started, tt.wantNS)
			}
			if got := m.NetNS(); got != tt.wantNS {
				t.Errorf("NetNS() = %s, want %s", got, tt.wantNS)
			}
			deletePod(t, m, 0)
		})
	}
}

// TestPodNetworkRetried: while the pod's network cannot be made, no
// container starts; the pod gets a FailedCreatePodSandBox event that says
// why, as from a kubelet whose sandbox fails, and starts once it can.
func TestPodNetworkRetried(t *testing.T) {
	rt := newFakeRuntime()
	var mu sync.Mutex
	failures := 2
	m := New(Config{
		Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", HostIP: "10.0.0.7", Backoff: testBackoff,
		Network: func(context.Context, string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if failures > 0 {
				failures--
				return "", errors.New("setting up the pod's network: no IPv4 default route")
			}
			return "/state/podnet/net", nil
		},
	})
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: testPod(corev1.RestartPolicyAlways, "main"), PodAddress: "10.0.0.8"}); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	early := len(rt.started)
	rt.mu.Unlock()
	if early != 0 {
		t.Errorf("%d containers started before the pod's network was made", early)
	}
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	var found int
	for _, ev := range m.Events() {
		if ev.Reason == ReasonFailedCreatePodSandBox && ev.Type == EventWarning && strings.Contains(ev.Message, "no IPv4 default route") {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d FailedCreatePodSandBox events saying why, want 2: %+v", found, m.Events())
	}
	deletePod(t, m, time.Duration(0))
}

// TestPodAddressWithoutNetwork: an agent that cannot give a pod its own
// namespace (Config.Network nil: a light cell) refuses a pod address,
// taking nothing, so that the host resolves the pod's downward API with
// the address it will really have; sent without one, the pod runs in the
// cell's namespace at the cell's address.
func TestPodAddressWithoutNetwork(t *testing.T) {
	m := newManager(t, newFakeRuntime())
	p := testPod(corev1.RestartPolicyAlways, "main")
	if gen, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, PodAddress: "10.0.0.8"}); !errors.Is(err, ErrNoPodNetwork) || gen != 0 {
		t.Fatalf("Apply with a pod address = %d, %v; want ErrNoPodNetwork", gen, err)
	}
	if uid := m.PodUID(); uid != "" {
		t.Errorf("the refused pod %s was taken", uid)
	}
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	if st.PodIP != "10.0.0.7" || m.NetNS() != "/var/run/netns/test" {
		t.Errorf("podIP %s in %s, want the cell's 10.0.0.7 in /var/run/netns/test", st.PodIP, m.NetNS())
	}
	deletePod(t, m, 0)
}

// TestPodIPOnceNetworkIsUp: as the kubelet reports no pod IP until the
// pod's sandbox has its network (pkg/kubelet/kubelet_pods.go
// convertStatusToAPIStatus, from the sandbox's status), the manager
// reports none until Config.Network has made the pod's; a hostNetwork pod
// has the cell's at once, as the kubelet gives such a pod the node's
// (generateAPIPodStatus).
func TestPodIPOnceNetworkIsUp(t *testing.T) {
	tests := []struct {
		name        string
		address     string
		hostNetwork bool
		wantBefore  string // the podIP while the network is being made
		wantAfter   string
	}{
		{name: "own address", address: "10.0.0.8", wantBefore: "", wantAfter: "10.0.0.8"},
		{name: "no address", wantBefore: "", wantAfter: "10.0.0.7"},
		{name: "hostNetwork", address: "10.0.0.8", hostNetwork: true, wantBefore: "10.0.0.7", wantAfter: "10.0.0.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			asked, release := make(chan struct{}), make(chan struct{})
			m := New(Config{
				Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
				NetNSPath: "/var/run/netns/cell", Backoff: testBackoff,
				Network: func(ctx context.Context, address string) (string, error) {
					close(asked)
					select {
					case <-release:
					case <-ctx.Done():
						return "", ctx.Err()
					}
					if address == "" {
						return "/var/run/netns/cell", nil
					}
					return "/state/podnet/net", nil
				},
			})
			if st := m.PodStatus(); st.PodIP != "" || st.PodIPs != nil {
				t.Errorf("before any pod: podIP %q %v, want none", st.PodIP, st.PodIPs)
			}
			p := testPod(corev1.RestartPolicyAlways, "main")
			p.Spec.HostNetwork = tt.hostNetwork
			if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, PodAddress: tt.address}); err != nil {
				t.Fatal(err)
			}
			<-asked
			st := m.PodStatus()
			if st.PodIP != tt.wantBefore || !slices.Equal(st.PodIPs, podIPs(tt.wantBefore)) {
				t.Errorf("while the network is made: %s, podIP %q %v; want %q", st.Phase, st.PodIP, st.PodIPs, tt.wantBefore)
			}
			if st.HostIP != "10.0.0.7" {
				t.Errorf("while the network is made: hostIP %q, want the cell's 10.0.0.7", st.HostIP)
			}
			close(release)
			st = waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
			if st.PodIP != tt.wantAfter || !slices.Equal(st.PodIPs, podIPs(tt.wantAfter)) {
				t.Errorf("running: podIP %q %v, want %q", st.PodIP, st.PodIPs, tt.wantAfter)
			}
			deletePod(t, m, 0)
		})
	}
}

// podIPs is the status's podIPs of a pod with podIP ip.
func podIPs(ip string) []corev1.PodIP {
	if ip == "" {
		return nil
	}
	return []corev1.PodIP{{IP: ip}}
}

// TestRestoredPodKeepsItsIP: an agent that resumes a pod whose network
// the earlier one made reports the pod's IP at once, as a restarted
// kubelet finds the sandbox and its IP, not only once Config.Network
// has run again.
func TestRestoredPodKeepsItsIP(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	newAgent := func(network func(context.Context, string) (string, error)) *Manager {
		return New(Config{
			Runtime: rt, Logs: logs.NewStore(dir + "/logs"), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
			NetNSPath: "/var/run/netns/cell", Backoff: testBackoff, StatePath: dir + "/pod.json", Network: network,
		})
	}
	first := newAgent(func(context.Context, string) (string, error) { return "/state/podnet/net", nil })
	if _, err := first.Apply(t.Context(), Desired{Generation: 1, Pod: testPod(corev1.RestartPolicyAlways, "main"), PodAddress: "10.0.0.8"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, first, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning && s.PodIP == "10.0.0.8" })

	// The first agent dies; the second one's Network never answers (both
	// are left as they are, as in the other Restore tests: nothing more
	// is written under dir).
	second := newAgent(func(ctx context.Context, _ string) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	if !restore(t, second, "uid-1") {
		t.Fatal("Restore found nothing to resume")
	}
	if st := second.PodStatus(); st.PodIP != "10.0.0.8" || !slices.Equal(st.PodIPs, podIPs("10.0.0.8")) {
		t.Errorf("resumed: podIP %q %v, want the pod's 10.0.0.8 as before", st.PodIP, st.PodIPs)
	}
}

// TestRestoreRefusesAnAddressItCannotGive: state left by an agent that
// gave the pod its own address is not resumed by one that cannot (as
// Apply refuses such a pod): the pod was resolved for that address.
func TestRestoreRefusesAnAddressItCannotGive(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	cfg := Config{
		Runtime: rt, Logs: logs.NewStore(dir + "/logs"), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
		NetNSPath: "/var/run/netns/cell", Backoff: testBackoff, StatePath: dir + "/pod.json",
		Network: func(context.Context, string) (string, error) { return "/state/podnet/net", nil },
	}
	first := New(cfg)
	if _, err := first.Apply(t.Context(), Desired{Generation: 1, Pod: testPod(corev1.RestartPolicyAlways, "main"), PodAddress: "10.0.0.8"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, first, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	cfg.Network = nil
	second := New(cfg)
	if ok, err := second.Restore(t.Context(), "uid-1"); ok || !errors.Is(err, ErrNoPodNetwork) {
		t.Errorf("Restore = %v, %v; want false, ErrNoPodNetwork", ok, err)
	}
	if uid := second.PodUID(); uid != "" {
		t.Errorf("pod %s resumed", uid)
	}
}
