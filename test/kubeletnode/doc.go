// Package kubeletnode runs a real Kubernetes node beside the local control
// plane (test/controlplane): the kubelet and kube-proxy of the cluster's
// version, built from the Go module proxy (controlplane.BuildNode), on a
// containerd of their own with its CRI plugin on and Debian's CNI plugins
// (containernetworking-plugins: bridge, host-local, portmap). It is where
// the pods of the cluster's own add-ons (kip's Deployment, CoreDNS,
// metrics-server) run as they would in a real cluster, while workloads go
// to kip's virtual node.
//
// The node lives in a network namespace of its own (kipn-<id>), joined to
// this machine by a veth pair on a free 10.214.x.0/24: the pods' bridge
// holds the lower half (x.0/25, gateway x.1), the veth the link (x.129 on
// the host, x.130 the node's InternalIP), and the host routes the pod range
// to the node. So its kubelet, containerd and kube-proxy program iptables
// and a bridge of their own that nothing else on the machine sees, several
// nodes (or runs) never meet, and the API server, this machine and kip's
// cells reach its pods by their IPs. The kubelet and containerd run in the
// machine's mount namespace (nsenter --net only: `ip netns exec` would
// hide /sys/fs/cgroup), with a cgroup root of their own (kubepods under
// /kipnode-<id> in every v1 hierarchy) so that no kubelet touches another's
// pods.
//
// The kubelet joins as kubeadm's do: a bootstrap token (a
// bootstrap.kubernetes.io/token Secret, the API server runs with
// --enable-bootstrap-token-auth) and the documented RBAC let it ask for its
// system:node:<name> client certificate, which kube-controller-manager's
// csrapproving controller approves and its signer issues; it renews it the
// same way. Its serving certificate is self-signed: the API server, which
// runs without --kubelet-certificate-authority, does not verify it, as it
// does not verify kip's. kube-proxy (iptables mode, masquerading all
// service traffic since the namespace has no br_netfilter of its own
// use) leads ClusterIPs, the kubernetes Service's first, to their
// endpoints, so an in-cluster client works in the node's pods.
//
// What these machines need, found by trying (docs/kubelet-node.md): root
// here lacks CAP_SYS_RESOURCE, so containerd runs with
// restrict_oom_score_adj (a negative oom_score_adj fails runc's create);
// cgroups are v1, so the kubelet runs with failCgroupV1: false and the
// cgroupfs driver; swap is allowed (failSwapOn: false); eviction and image
// garbage collection use absolute thresholds, since these disks are fuller
// than the kubelet's percentages allow. The sandbox ("pause") image is
// busybox sleeping, imported into containerd, never pulled.
//
// Start starts a node for a running cluster and returns once the Node is
// Ready; Stop (or Stop by state directory, for kip-cluster down) stops it
// and removes everything it made on the machine.
//
// It imports the standard library, client-go, containerd's client,
// go-containerregistry and Kip's test packages (test/controlplane,
// test/images); it never imports host or cell.
package kubeletnode
