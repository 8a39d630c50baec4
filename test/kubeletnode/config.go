package kubeletnode

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// paths are the files and directories of a node under its state directory.
type paths struct{ dir string }

func (p paths) join(elem ...string) string { return filepath.Join(append([]string{p.dir}, elem...)...) }

func (p paths) containerdDir() string       { return p.join("containerd") }
func (p paths) containerdSocket() string    { return p.join("containerd", "containerd.sock") }
func (p paths) containerdRoot() string      { return p.join("containerd", "root") }
func (p paths) containerdConfig() string    { return p.join("containerd", "config.toml") }
func (p paths) registryHosts() string       { return p.join("containerd", "certs.d") }
func (p paths) cniConfDir() string          { return p.join("cni", "net.d") }
func (p paths) cniIPAMDir() string          { return p.join("cni", "ipam") }
func (p paths) kubeletDir() string          { return p.join("kubelet") }
func (p paths) kubeletConfig() string       { return p.join("kubelet-config.yaml") }
func (p paths) kubeProxyConfig() string     { return p.join("kube-proxy-config.yaml") }
func (p paths) bootstrapKubeconfig() string { return p.join("bootstrap-kubeconfig") }
func (p paths) kubeconfig() string          { return p.join("kubeconfig") }
func (p paths) podLogs() string             { return p.join("pod-logs") }
func (p paths) log(name string) string      { return p.join("logs", name+".log") }
func (p paths) pid(name string) string      { return p.join("pids", name+".pid") }
func (p paths) stateFile() string           { return p.join("node.json") }

// containerdConfig is a private containerd (as test/containerdtest's) with
// the CRI plugin on: runc with cgroupfs and a runc root of its own, pod
// network namespaces under its state directory, the CNI plugins of
// cniBinDir, registries from the hosts directory, and oom_score_adj never
// below containerd's own (root here may not lower it).
func containerdConfig(p paths, cniBinDir, sandboxImage string) string {
	d := p.containerdDir()
	return fmt.Sprintf(`version = 2
root  = %q
state = %q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, p.containerdRoot(), filepath.Join(d, "state"), p.containerdSocket(), filepath.Join(d, "opt"),
		sandboxImage, filepath.Join(d, "runc"), cniBinDir, p.cniConfDir(), p.registryHosts())
}

// registryHostsTOML is containerd's hosts.toml that pulls from host
// (host:port) over plain HTTP.
func registryHostsTOML(host string) string {
	return fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host)
}

// cniConfig is the pods' network: a bridge with the gateway of podCIDR,
// host-local addresses kept under the node's state directory, and port
// mappings. No masquerade: the host routes podCIDR to the node.
func cniConfig(p paths, name, podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       name,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "dataDir": p.cniIPAMDir(),
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the CNI configuration: %w", err)
	}
	return data, nil
}

// kubeletConfig is the node's KubeletConfiguration: webhook authentication
// and authorization against the API server, client certificates of the
// cluster CA, certificate rotation, no static pods, and what these
// machines need (package doc).
func kubeletConfig(p paths, n *Node, caFile string, clusterDNS []string) string {
	dns := ""
	for _, ip := range clusterDNS {
		dns += fmt.Sprintf("\n  - %s", ip)
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
rotateCertificates: true
failSwapOn: false
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
staticPodPath: ""
registerNode: true
podCIDR: %s
clusterDomain: cluster.local
clusterDNS:%s
resolvConf: /etc/resolv.conf
podLogsDir: %s
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1Gi
  imagefs.available: 1Gi
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, caFile, n.NodeIP, n.CgroupRoot, p.containerdSocket(), p.containerdSocket(), n.PodCIDR, orEmptyList(dns), p.podLogs())
}

func orEmptyList(items string) string {
	if items == "" {
		return " []"
	}
	return items
}

// kubeProxyConfig is kube-proxy in iptables mode for the node's pods,
// masquerading all service traffic (a pod reaching a Service whose
// endpoint is on the same bridge gets its answer back through the
// gateway) and leaving the conntrack sysctls as they are (a network
// namespace may not change most of them).
func kubeProxyConfig(kubeconfig string, n *Node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
iptables:
  masqueradeAll: true
  localhostNodePorts: false
`, kubeconfig, n.PodCIDR, n.Name, n.NodeIP)
}
