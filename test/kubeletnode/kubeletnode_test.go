package kubeletnode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestPickThird(t *testing.T) {
	tests := []struct {
		name    string
		want    int
		used    map[int]bool
		out     int
		wantErr bool
	}{
		{"free", 42, nil, 42, false},
		{"next free", 42, map[int]bool{42: true, 43: true}, 44, false},
		{"wraps to the first", firstThird + thirds - 1, map[int]bool{firstThird + thirds - 1: true}, firstThird, false},
		{"all used", 42, allThirds(), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickThird(tt.want, tt.used)
			if (err != nil) != tt.wantErr || got != tt.out {
				t.Errorf("pickThird(%d) = %d, %v; want %d, error %t", tt.want, got, err, tt.out, tt.wantErr)
			}
		})
	}
}

func allThirds() map[int]bool {
	used := map[int]bool{}
	for i := range thirds {
		used[firstThird+i] = true
	}
	return used
}

func TestNetworkAddresses(t *testing.T) {
	n := network{Third: 77}
	got := []string{n.podCIDR(), n.podGateway(), n.hostIP(), n.nodeIP()}
	want := []string{"10.214.77.0/25", "10.214.77.1", "10.214.77.129", "10.214.77.130"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
}

// TestKubeletConfig checks the settings these machines need (package doc)
// and the node's own survive into the KubeletConfiguration.
func TestKubeletConfig(t *testing.T) {
	p := paths{dir: "/state/node"}
	n := &Node{Name: "kip-infra", NodeIP: "10.214.77.130", PodCIDR: "10.214.77.0/25", CgroupRoot: "/kipnode-abc123"}
	cfg := decodeYAML(t, kubeletConfig(p, n, "/state/pki/ca.crt", []string{"10.0.0.10"}))
	want := map[string]any{
		"kind": "KubeletConfiguration", "failSwapOn": false, "failCgroupV1": false, "cgroupDriver": "cgroupfs",
		"cgroupRoot": "/kipnode-abc123", "staticPodPath": "", "address": "10.214.77.130", "podCIDR": "10.214.77.0/25",
		"containerRuntimeEndpoint": "unix:///state/node/containerd/containerd.sock", "clusterDNS": []any{"10.0.0.10"},
		"authorization": map[string]any{"mode": "Webhook"}, "rotateCertificates": true,
	}
	for k, v := range want {
		if diff := cmp.Diff(v, cfg[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	authn, _ := cfg["authentication"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": true},
		"x509": map[string]any{"clientCAFile": "/state/pki/ca.crt"}}, authn); diff != "" {
		t.Errorf("authentication (-want +got):\n%s", diff)
	}
	if none := decodeYAML(t, kubeletConfig(p, n, "/ca.crt", nil)); len(none["clusterDNS"].([]any)) != 0 {
		t.Errorf("kubeletConfig without DNS: clusterDNS = %v, want an empty list", none["clusterDNS"])
	}
}

func decodeYAML(t *testing.T, doc string) map[string]any {
	t.Helper()
	data, err := utilyaml.ToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, doc)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCNIConfig(t *testing.T) {
	data, err := cniConfig(paths{dir: "/state/node"}, "kubeletnode-kip-infra", "10.214.77.0/25")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string
		Plugins []struct {
			Type   string
			IPMasq *bool `json:"ipMasq"`
			IPAM   struct {
				Type    string
				DataDir string `json:"dataDir"`
				Ranges  [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins = %+v, want bridge then portmap", conf.Plugins)
	}
	b := conf.Plugins[0]
	if b.IPMasq == nil || *b.IPMasq || b.IPAM.DataDir != "/state/node/cni/ipam" || b.IPAM.Ranges[0][0].Subnet != "10.214.77.0/25" {
		t.Errorf("bridge = %+v, want no masquerade, IPAM state under the node and the pod range", b)
	}
}

func TestContainerdConfig(t *testing.T) {
	got := containerdConfig(paths{dir: "/state/node"}, "/usr/lib/cni", SandboxImage)
	for _, want := range []string{
		`restrict_oom_score_adj = true`, `netns_mounts_under_state_dir = true`, `SystemdCgroup = false`,
		`Root = "/state/node/containerd/runc"`, `sandbox_image = "` + SandboxImage + `"`,
		`config_path = "/state/node/containerd/certs.d"`, `conf_dir = "/state/node/cni/net.d"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"io.containerd.grpc.v1.cri",`) {
		t.Error("containerd config disables the CRI plugin")
	}
}
