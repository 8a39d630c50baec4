package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kipcell/kip/test/images"
)

// DNSManifest is the cluster DNS manifest, relative to the repository
// root: CoreDNS in kube-system, the kube-dns Service at ClusterDNSIP.
const DNSManifest = "deploy/coredns/coredns.yaml"

// ClusterDNSIP is the kube-dns Service's ClusterIP in DNSManifest: the
// tenth address of the control plane's service range (10.0.0.0/24 in make
// demo, 10.0.0.0/16 in the e2e run, which has room for the services
// benchmark's thousand).
const ClusterDNSIP = "10.0.0.10"

// RegistryVar is the variable the demo's manifests name their registry
// with; RenderDNS and the demo substitute the cells' registry for it.
const RegistryVar = "${KIP_DEMO_REGISTRY}"

// ClusterDNSEnv names the variable that switches the cluster DNS on for
// the end-to-end run and make demo ("1") or off ("0"); unset means
// clusterDNSDefault.
const ClusterDNSEnv = "KIP_E2E_CLUSTER_DNS"

// clusterDNSDefault is on: cells have what CoreDNS's kubernetes plugin
// and its clients need (the service-account token in the pod, the
// kubernetes and kube-dns Services reachable from a cell through its
// service proxy, and /etc/resolv.conf naming kube-dns).
// KIP_E2E_CLUSTER_DNS=0 turns it off, for a faster run without the
// CoreDNS build; then TestClusterDNS is skipped (it needs it) and
// TestCoreDNSInCell runs CoreDNS with a static zone.
const clusterDNSDefault = true

// ClusterDNS reports whether the end-to-end run (TestMain) and make demo
// deploy DNSManifest as the cluster DNS: $KIP_E2E_CLUSTER_DNS, else
// clusterDNSDefault.
func ClusterDNS() bool {
	if on, set := clusterDNSEnv(); set {
		return on
	}
	return clusterDNSDefault
}

// ClusterDNSFor reports whether an end-to-end pass deploys the cluster
// DNS: as $KIP_E2E_CLUSTER_DNS says, else only a pass that runs the
// full pass's tests (core: the full pass itself, or a cloud's with
// KIP_E2E_ALL), since no test of the plugin path needs it and a cloud's
// pass would start a kubelet node and CoreDNS for nothing.
func ClusterDNSFor(pass string, all bool) bool {
	if on, set := clusterDNSEnv(); set {
		return on
	}
	return clusterDNSDefault && (pass == PluginLocal || all)
}

// clusterDNSEnv is what $KIP_E2E_CLUSTER_DNS says, and whether it says.
func clusterDNSEnv() (on, set bool) {
	switch os.Getenv(ClusterDNSEnv) {
	case "1", "true":
		return true, true
	case "0", "false":
		return false, true
	}
	return false, false
}

// DNS is CoreDNS deployed from DNSManifest.
type DNS struct {
	// Image is the CoreDNS image in the cells' registry.
	Image images.Image
	// Manifest is what was applied: DNSManifest rendered by RenderDNS.
	Manifest []byte
	// Namespace is where CoreDNS runs: kube-system, or its Placement's.
	Namespace string
	// Pod is CoreDNS's Running pod in Namespace (set by DeployDNS, not by
	// ApplyDNS), PodIP its address and Node its node.
	Pod, PodIP, Node string
}

// DNSOptions configure ApplyDNS and DeployDNS.
type DNSOptions struct {
	// Corefile replaces the manifest's; empty keeps it. A test runs a
	// static zone with it while cells cannot reach the API server.
	Corefile string
	// Placement moves CoreDNS to a node or a namespace; the zero value
	// leaves it where the manifest's scheduling puts it: on a kubelet
	// node (InfraNode). CellDNS is the placement of a second CoreDNS in a
	// cell of a Kip node.
	Placement Placement
	// Log receives progress lines, the CoreDNS build's among them.
	Log io.Writer
}

// CellDNS places CoreDNS in a cell of Kip node kipNode, in namespace ns,
// beside the cluster DNS: its ServiceAccount, ConfigMap and Deployment
// only, no kube-dns Service and no ClusterRole (give it a Corefile that
// needs no API access: StaticCorefile).
func CellDNS(ns, kipNode string) Placement {
	return Placement{Node: kipNode, Namespace: ns, Kinds: []string{"ServiceAccount", "ConfigMap", "Deployment"}}
}

// ApplyDNS builds CoreDNS (cached, images.BuildCoreDNS), pushes it to the
// cells' registry and applies DNSManifest with kubectl as cluster-admin,
// rendered for that registry and opts.Corefile. It does not wait for the
// pod: DeployDNS does.
func (f *Framework) ApplyDNS(ctx context.Context, cells *Cells, opts DNSOptions) (*DNS, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	manifest, err := readManifest(DNSManifest)
	if err != nil {
		return nil, err
	}
	bin, err := images.BuildCoreDNS(ctx, images.CoreDNSOptions{Log: opts.Log})
	if err != nil {
		return nil, fmt.Errorf("building CoreDNS: %w", err)
	}
	img, err := images.PushCoreDNS(ctx, cells.Registry, bin)
	if err != nil {
		return nil, err
	}
	rendered, err := RenderDNS(manifest, cells.Registry.Host(), opts.Corefile)
	if err != nil {
		return nil, err
	}
	if rendered, err = place(rendered, opts.Placement); err != nil {
		return nil, fmt.Errorf("placing %s: %w", DNSManifest, err)
	}
	if err := f.kubectl(ctx, rendered, "apply", "-f", "-"); err != nil {
		return nil, fmt.Errorf("applying %s: %w", DNSManifest, err)
	}
	ns := metav1.NamespaceSystem
	if opts.Placement.Namespace != "" {
		ns = opts.Placement.Namespace
	}
	return &DNS{Image: img, Manifest: rendered, Namespace: ns}, nil
}

// DeployDNS is ApplyDNS, then waits until CoreDNS's pod runs and is Ready
// and records it in the DNS.
func (f *Framework) DeployDNS(ctx context.Context, cells *Cells, opts DNSOptions) (*DNS, error) {
	dns, err := f.ApplyDNS(ctx, cells, opts)
	if err != nil {
		return nil, err
	}
	var last string
	err = Poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := f.Client.CoreV1().Pods(dns.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, err
		}
		last = ""
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && PodRunning(p) && podReady(p) && p.Status.PodIP != "" {
				dns.Pod, dns.PodIP, dns.Node = p.Name, p.Status.PodIP, p.Spec.NodeName
				return true, nil
			}
			last += fmt.Sprintf("\n  %s on %q: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, containerStates(p))
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for CoreDNS to run: %w (pods:%s)", err, last)
	}
	return dns, nil
}

// Delete deletes what ApplyDNS applied and waits until it is gone (so
// that a CoreDNS in a cell has its cell ended).
func (d *DNS) Delete(ctx context.Context, f *Framework) error {
	if err := f.kubectl(ctx, d.Manifest, "delete", "--ignore-not-found", "--wait=true", "--timeout=60s", "-f", "-"); err != nil {
		return fmt.Errorf("deleting CoreDNS: %w", err)
	}
	return nil
}

// RenderDNS returns manifest with the registry host in place of
// RegistryVar and, when corefile is not empty, the coredns ConfigMap's
// Corefile replaced by it (that document is then JSON, which kubectl
// reads as YAML).
func RenderDNS(manifest []byte, registry, corefile string) ([]byte, error) {
	out := strings.ReplaceAll(string(manifest), RegistryVar, registry)
	if corefile == "" {
		return []byte(out), nil
	}
	docs, i, cm, err := corefileDoc(out)
	if err != nil {
		return nil, err
	}
	cm.Data["Corefile"] = corefile
	data, err := json.Marshal(cm)
	if err != nil {
		return nil, fmt.Errorf("encoding the coredns ConfigMap: %w", err)
	}
	docs[i] = string(data)
	return []byte(strings.Join(docs, "\n---\n")), nil
}

// corefileDoc splits manifest into its documents and returns them, the
// index of the coredns ConfigMap's and that ConfigMap.
func corefileDoc(manifest string) (docs []string, index int, cm *corev1.ConfigMap, err error) {
	docs = strings.Split(manifest, "\n---\n")
	for i, doc := range docs {
		cm = &corev1.ConfigMap{}
		if err := yaml.Unmarshal([]byte(doc), cm); err != nil {
			return nil, 0, nil, fmt.Errorf("reading document %d of the DNS manifest: %w", i+1, err)
		}
		if cm.Kind == "ConfigMap" && cm.Name == "coredns" && cm.Data["Corefile"] != "" {
			return docs, i, cm, nil
		}
	}
	return nil, 0, nil, errors.New("the DNS manifest has no ConfigMap coredns with a Corefile")
}

// StaticCorefile returns the Corefile of DNSManifest with its kubernetes
// block replaced by a hosts block that answers each name of hosts with
// its address: CoreDNS then runs every other plugin of the manifest
// without the API server, which a cell cannot reach before it has a
// token and the kubernetes Service.
func StaticCorefile(hosts map[string]string) (string, error) {
	manifest, err := readManifest(DNSManifest)
	if err != nil {
		return "", err
	}
	_, _, cm, err := corefileDoc(string(manifest))
	if err != nil {
		return "", err
	}
	return withHosts(cm.Data["Corefile"], hosts)
}

// withHosts replaces the kubernetes block of corefile (from its line to
// the "}" indented as far) by a hosts block of the same indentation.
func withHosts(corefile string, hosts map[string]string) (string, error) {
	lines := strings.Split(corefile, "\n")
	start, end := -1, -1
	var indent string
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " \t")
		switch {
		case start < 0 && strings.HasPrefix(trimmed, "kubernetes ") && strings.HasSuffix(trimmed, "{"):
			start, indent = i, l[:len(l)-len(trimmed)]
		case start >= 0 && l == indent+"}":
			end = i
		}
		if end >= 0 {
			break
		}
	}
	if start < 0 || end < 0 {
		return "", errors.New("the Corefile has no kubernetes block")
	}
	block := []string{indent + "hosts {"}
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		block = append(block, indent+"    "+hosts[name]+" "+name)
	}
	block = append(block, indent+"}")
	return strings.Join(slices.Concat(lines[:start], block, lines[end+1:]), "\n"), nil
}

// readManifest reads the manifest at path, relative to the repository
// root.
func readManifest(path string) ([]byte, error) {
	full, err := repoFile(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}

// kubectl runs the control plane's kubectl as cluster-admin with stdin;
// an error carries its output.
func (f *Framework) kubectl(ctx context.Context, stdin []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(f.Cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", f.Cluster.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(string(stdin))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// podReady reports whether p's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerStates says what each container of p is doing, for an error.
func containerStates(p *corev1.Pod) string {
	var b strings.Builder
	for _, cs := range p.Status.ContainerStatuses {
		switch s := cs.State; {
		case s.Waiting != nil:
			fmt.Fprintf(&b, " %s waiting (%s: %s)", cs.Name, s.Waiting.Reason, s.Waiting.Message)
		case s.Terminated != nil:
			fmt.Fprintf(&b, " %s terminated (%s, exit %d)", cs.Name, s.Terminated.Reason, s.Terminated.ExitCode)
		case s.Running != nil:
			fmt.Fprintf(&b, " %s running (restarts %d)", cs.Name, cs.RestartCount)
		}
	}
	return b.String()
}
