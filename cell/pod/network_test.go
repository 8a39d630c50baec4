package pod

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/logs"
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
// namespace (Config.Network nil: a light cell) runs the pod in the cell's
// at the cell's address, whatever address the host sent.
func TestPodAddressWithoutNetwork(t *testing.T) {
	m := newManager(t, newFakeRuntime())
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: testPod(corev1.RestartPolicyAlways, "main"), PodAddress: "10.0.0.8"}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	if st.PodIP != "10.0.0.7" || m.NetNS() != "/var/run/netns/test" {
		t.Errorf("podIP %s in %s, want the cell's 10.0.0.7 in /var/run/netns/test", st.PodIP, m.NetNS())
	}
	deletePod(t, m, 0)
}
