package pod

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kipcell/kip/cell/runtime"
)

// The pod's /etc/hosts, /etc/hostname and /etc/resolv.conf: the agent
// writes them, as the kubelet (hosts) and containerd's CRI plugin
// (hostname, resolv.conf) do on a node, into files of its own that every
// container gets as bind mounts, never into an image's root file system.

// Paths in a container.
const (
	etcHosts      = "/etc/hosts"
	etcHostname   = "/etc/hostname"
	etcResolvConf = "/etc/resolv.conf"
)

// The kubelet's headers of a hosts file it manages (kubelet_pods.go).
const (
	managedHostsHeader                = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderWithHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// hostnameMaxLen is the longest hostname (the kernel's 64 bytes with the
// terminating NUL); fqdnMaxLen the longest FQDN set as the hostname.
const (
	hostnameMaxLen = 63
	fqdnMaxLen     = 64
)

// podHostnameAndDomain is the kubelet's GeneratePodHostNameAndDomain
// (kubelet_pods.go): the hostname is spec.hostnameOverride (beta, on by
// default since v1.35; then no domain), else spec.hostname, else the pod's
// name, cut to 63 characters without a trailing '-' or '.'; the domain is
// <subdomain>.<namespace>.svc.<cluster domain> for a pod with a subdomain.
func podHostnameAndDomain(pod *corev1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		hostname, err := truncateHostname(pod.Name, *o)
		return hostname, "", err
	}
	hostname = pod.Name
	if h := pod.Spec.Hostname; h != "" {
		if msgs := validation.IsDNS1123Label(h); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", h, strings.Join(msgs, ";"))
		}
		hostname = h
	}
	if hostname, err = truncateHostname(pod.Name, hostname); err != nil {
		return "", "", err
	}
	if sub := pod.Spec.Subdomain; sub != "" {
		if msgs := validation.IsDNS1123Label(sub); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", sub, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", sub, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

// truncateHostname is the kubelet's truncatePodHostnameIfNeeded.
func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMaxLen {
		return hostname, nil
	}
	truncated := strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	if truncated == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return truncated, nil
}

// kernelHostname is the kubelet's GetNodenameForKernel: the hostname, or
// with setHostnameAsFQDN and a domain the FQDN, which must fit in 64
// characters.
func kernelHostname(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > fqdnMaxLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, fqdnMaxLen, len(fqdn))
	}
	return fqdn, nil
}

// managedHostsFileContent is the kubelet's: localhost and the IPv6
// names, the pod's IPs with its hostname (and FQDN first when it has a
// domain), then its hostAliases.
func managedHostsFileContent(podIPs []string, hostname, domain string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasesEntries(aliases))
	return b.Bytes()
}

// nodeHostsFileContent is the kubelet's for a host-network pod: the
// node's (here the cell's) own hosts file and the pod's hostAliases.
func nodeHostsFileContent(nodeHosts []byte, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderWithHostNetwork)
	b.Write(nodeHosts)
	b.Write(hostAliasesEntries(aliases))
	return b.Bytes()
}

// hostAliasesEntries is the kubelet's hostsEntriesFromHostAliases: one
// line per alias IP.
func hostAliasesEntries(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// etcFiles are the pod's /etc files on the cell, written once per
// generation. It is safe for concurrent use.
type etcFiles struct {
	cfg etcConfig
	log *slog.Logger

	mu  sync.Mutex
	gen int64 // the generation last written
	// err is why the files could not be made; the containers wait.
	err error
	// hostname is what the containers' UTS hostname is set to; empty for
	// a host-network pod (the cell's own).
	hostname string
	// written are the files made, by their path in a container.
	written map[string]string
	// warned are the DNS warnings last recorded, to record a change only.
	warned []warning
}

// etcConfig is what the files are made from besides the pod (Config's).
type etcConfig struct {
	dir        string // where the files are written; empty: none
	resolvConf string // the cell's own resolv.conf; empty: none
	hostsFile  string // the cell's own hosts file
	podIP      string // the cell's, for a pod without an address of its own
}

func newEtcFiles(cfg etcConfig, log *slog.Logger) *etcFiles {
	if cfg.hostsFile == "" {
		cfg.hostsFile = etcHosts
	}
	return &etcFiles{cfg: cfg, log: log, written: map[string]string{}}
}

// sync makes the files of d (once per generation) and returns the
// warnings to record as events: those that differ from the last ones.
func (e *etcFiles) sync(ctx context.Context, d *Desired) []warning {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d.Generation <= e.gen && e.gen != 0 {
		return nil
	}
	e.gen = d.Generation
	warnings, err := e.make(d)
	e.err = err
	if err != nil {
		e.log.WarnContext(ctx, "writing the pod's /etc files", "error", err)
	}
	if slices.Equal(warnings, e.warned) {
		return nil
	}
	e.warned = warnings
	return warnings
}

// make renders and writes the three files; it is called with e.mu held.
func (e *etcFiles) make(d *Desired) ([]warning, error) {
	pod := d.Pod
	hostname, domain, err := podHostnameAndDomain(pod, d.DNS.Domain)
	if err != nil {
		return nil, err
	}
	kernel := ""
	if !pod.Spec.HostNetwork {
		if kernel, err = kernelHostname(hostname, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
			return nil, err
		}
	}
	e.hostname = kernel
	if e.cfg.dir == "" {
		return nil, nil
	}

	var host dnsConfig
	if e.cfg.resolvConf != "" {
		data, err := os.ReadFile(e.cfg.resolvConf)
		if err != nil {
			return nil, fmt.Errorf("reading the cell's resolver configuration: %w", err)
		}
		if host, err = parseResolvConf(data); err != nil {
			return nil, fmt.Errorf("parsing the cell's resolver configuration %s: %w", e.cfg.resolvConf, err)
		}
	}
	podIP := cmp.Or(ownAddress(d), e.cfg.podIP)
	dns, warnings := podDNS(pod, d.DNS, host, e.cfg.resolvConf != "", podIP)

	files := map[string][]byte{etcResolvConf: dns.render()}
	switch {
	case pod.Spec.HostNetwork:
		nodeHosts, err := os.ReadFile(e.cfg.hostsFile)
		if err != nil {
			return nil, fmt.Errorf("reading the cell's hosts file: %w", err)
		}
		files[etcHosts] = nodeHostsFileContent(nodeHosts, pod.Spec.HostAliases)
		if kernel, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("reading the cell's hostname: %w", err)
		}
	case podIP != "":
		files[etcHosts] = managedHostsFileContent([]string{podIP}, hostname, domain, pod.Spec.HostAliases)
	default:
		// No pod IP yet: the kubelet mounts no hosts file either.
	}
	files[etcHostname] = []byte(kernel + "\n")

	if err := os.MkdirAll(e.cfg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the directory of the pod's /etc files: %w", err)
	}
	for path, data := range files {
		file := filepath.Join(e.cfg.dir, filepath.Base(path))
		if err := writeInPlace(file, data); err != nil {
			return nil, err
		}
		e.written[path] = file
	}
	return warnings, nil
}

// writeInPlace writes data to file unless it holds it already. It keeps
// the file's inode (no rename), so that the containers' bind mounts of it
// see the new content.
func writeInPlace(file string, data []byte) error {
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.WriteFile(file, data, 0o644); err != nil { //nolint:gosec // G306: every container user reads its /etc files, as on a kubelet
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

// mounts are the bind mounts of the pod's /etc files into container c:
// each unless c mounts a volume there itself; /etc/hosts read-write as the
// kubelet mounts it, the others read-only with readOnlyRootFilesystem as
// containerd mounts them. It fails while the files could not be made.
func (e *etcFiles) mounts(c *corev1.Container) ([]runtime.Mount, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return nil, e.err
	}
	readOnlyRoot := c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem
	var out []runtime.Mount
	for _, path := range []string{etcHosts, etcHostname, etcResolvConf} {
		src, ok := e.written[path]
		if !ok || mountsAt(c, path) {
			continue
		}
		out = append(out, runtime.Mount{Source: src, Destination: path, ReadOnly: path != etcHosts && readOnlyRoot})
	}
	return out, nil
}

// containerHostname is the UTS hostname of the pod's containers: empty
// for a host-network pod, which keeps the cell's.
func (e *etcFiles) containerHostname() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hostname
}

// mountsAt reports whether c mounts a volume at path.
func mountsAt(c *corev1.Container, path string) bool {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == path {
			return true
		}
	}
	return false
}

// cleanup removes the files.
func (e *etcFiles) cleanup() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.written = map[string]string{}
	if e.cfg.dir == "" {
		return nil
	}
	if err := os.RemoveAll(e.cfg.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the pod's /etc files: %w", err)
	}
	return nil
}
