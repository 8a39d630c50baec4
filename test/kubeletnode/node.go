package kubeletnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/modbuild"
)

// DefaultName is the node's name when Options give none.
const DefaultName = "kip-infra"

// DefaultCNIBinDir is where Debian's containernetworking-plugins puts the
// CNI plugins (hack/install-deps.sh installs it).
const DefaultCNIBinDir = "/usr/lib/cni"

// Options configure Start.
type Options struct {
	// Name is the Node's name; DefaultName when empty.
	Name string
	// StateDir holds the node's configuration, containerd, the kubelet's
	// directory, logs and PIDs; empty means nodes/<Name> in the cluster's
	// state directory. Its containerd socket path must fit a Unix socket.
	StateDir string
	// BinDir holds the kubelet and kube-proxy (controlplane.BuildNode).
	BinDir string
	// CNIBinDir holds the CNI plugins; DefaultCNIBinDir when empty.
	CNIBinDir string
	// Registries are host:port of registries containerd pulls from over
	// plain HTTP (test/registry's, as Cells.Gateway:port in the e2e).
	Registries []string
	// ClusterDNS are the nameservers the kubelet gives pods; the cluster's
	// kube-dns address (10.0.0.10 with the default service range) when nil.
	ClusterDNS []string
	// ReadyTimeout bounds the wait for the Node to be Ready; default 2
	// minutes.
	ReadyTimeout time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Node is a running kubelet node.
type Node struct {
	Name     string `json:"name"`
	StateDir string `json:"stateDir"`
	// NetNS is the node's network namespace, HostLink the host's end of
	// its veth.
	NetNS    string `json:"netns"`
	HostLink string `json:"hostLink"`
	// NodeIP is the Node's InternalIP; PodCIDR its pods' range, routed to
	// it from this machine.
	NodeIP  string `json:"nodeIP"`
	PodCIDR string `json:"podCIDR"`
	// CgroupRoot holds the node's kubepods in every cgroup v1 hierarchy.
	CgroupRoot string `json:"cgroupRoot"`
	// ContainerdSocket is the node's containerd.
	ContainerdSocket string `json:"containerdSocket"`
	// ContainerdRoot is its root directory (snapshots, content): a client
	// that mounts a container's rootfs itself (to read its /etc/passwd)
	// must see it at this path.
	ContainerdRoot string `json:"containerdRoot"`
}

// processes in start order; Stop goes the other way.
var processes = []string{"containerd", "kubelet", "kube-proxy"}

// Start runs a node for the running cluster c: it creates the node's
// network namespace, starts containerd, imports the sandbox image, makes a
// bootstrap token, starts the kubelet and kube-proxy, and returns once the
// Node is Ready and kube-proxy has programmed the kubernetes Service. On failure it stops what it started and says which
// process failed, with its last log lines. The processes run in sessions
// of their own and outlive the caller, as the control plane's do; stop them
// with Node.Stop or Stop(stateDir).
func Start(ctx context.Context, c *controlplane.Cluster, opts Options) (*Node, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(c.StateDir, "nodes", opts.Name)
	}
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = DefaultCNIBinDir
	}
	if opts.ClusterDNS == nil {
		opts.ClusterDNS = []string{"10.0.0.10"}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if err := check(c, opts); err != nil {
		return nil, fmt.Errorf("starting node %s: %w", opts.Name, err)
	}
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("resolving the node's state directory: %w", err)
	}
	if running, pid := anyRunning(state); running != "" {
		return nil, fmt.Errorf("%w in %s (%s is pid %d): stop it first", ErrRunning, state, running, pid)
	}
	// What a node that died there left: processes are gone, the rest goes.
	cleanUp(state)
	if err := os.RemoveAll(state); err != nil {
		return nil, fmt.Errorf("removing what an earlier node left in %s: %w", state, err)
	}
	p := paths{dir: state}
	for _, d := range []string{p.join("logs"), p.join("pids"), p.containerdDir(), p.cniConfDir(), p.kubeletDir(), p.podLogs()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating the node's state directory: %w", err)
		}
	}
	id := containerdtest.Random(6)
	third, err := pickThird(firstThird+int(id[0])%thirds, usedNodeThirds())
	if err != nil {
		return nil, err
	}
	nw := network{Third: third}
	n := &Node{
		Name: opts.Name, StateDir: state, NetNS: "kipn-" + id, HostLink: "kipn" + id,
		NodeIP: nw.nodeIP(), PodCIDR: nw.podCIDR(), CgroupRoot: "/kipnode-" + id,
		ContainerdSocket: p.containerdSocket(),
		ContainerdRoot:   p.containerdRoot(),
	}
	if err := n.save(); err != nil {
		return nil, err
	}
	started := time.Now()
	if err := n.start(ctx, c, opts, p, nw); err != nil {
		_ = n.Stop()
		return nil, fmt.Errorf("starting node %s: %w", n.Name, err)
	}
	fmt.Fprintf(opts.Log, "kubeletnode: node %s Ready after %s (InternalIP %s, pods %s)\n",
		n.Name, time.Since(started).Round(10*time.Millisecond), n.NodeIP, n.PodCIDR)
	return n, nil
}

// ErrRunning: the state directory's node is already running.
var ErrRunning = errors.New("kubelet node already running")

func check(c *controlplane.Cluster, opts Options) error {
	if c.PodAPIServerURL() == "" {
		return errors.New("the API server listens on loopback only; a node in its own network namespace cannot reach it")
	}
	for _, b := range controlplane.NodeBinaries {
		if st, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%q has no %s (build it first: controlplane.BuildNode, or kip-cluster up --kubelet)", opts.BinDir, b)
		}
	}
	for _, b := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(opts.CNIBinDir, b)); err != nil {
			return fmt.Errorf("no CNI plugin %s in %s (install containernetworking-plugins: hack/install-deps.sh)", b, opts.CNIBinDir)
		}
	}
	for _, b := range []string{"containerd", "runc", "ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("needs %s: %w", b, err)
		}
	}
	return nil
}

func (n *Node) start(ctx context.Context, c *controlplane.Cluster, opts Options, p paths, nw network) error {
	if err := setUpNetwork(n.NetNS, n.HostLink, nw); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.CgroupRoot); err != nil {
		return err
	}
	cni, err := cniConfig(p, "kubeletnode-"+n.Name, n.PodCIDR)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return fmt.Errorf("reading the cluster CA: %w", err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the admin kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return fmt.Errorf("making the admin client: %w", err)
	}
	token, err := createBootstrapToken(ctx, cs, n.Name)
	if err != nil {
		return err
	}
	proxyKubeconfig, err := c.AddKubeProxy(c.PodAPIServerURL())
	if err != nil {
		return fmt.Errorf("writing kube-proxy's kubeconfig: %w", err)
	}
	files := map[string][]byte{
		p.containerdConfig():                             []byte(containerdConfig(p, opts.CNIBinDir, SandboxImage)),
		filepath.Join(p.cniConfDir(), "10-kip.conflist"): cni,
		p.kubeletConfig():                                []byte(kubeletConfig(p, n, c.CAFile, opts.ClusterDNS)),
		p.kubeProxyConfig():                              []byte(kubeProxyConfig(proxyKubeconfig, n)),
		p.bootstrapKubeconfig():                          controlplane.TokenKubeconfig(c.PodAPIServerURL(), caPEM, "kubelet-bootstrap", token),
	}
	for _, r := range opts.Registries {
		files[filepath.Join(p.registryHosts(), r, "hosts.toml")] = []byte(registryHostsTOML(r))
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}

	if err := n.launch(p, "containerd", "containerd", "--config", p.containerdConfig()); err != nil {
		return err
	}
	if err := n.waitFor(ctx, p, "containerd", 20*time.Second, func(ctx context.Context) bool {
		return containerdUp(ctx, p.containerdSocket())
	}); err != nil {
		return err
	}
	if err := importSandboxImage(ctx, p.containerdSocket()); err != nil {
		return err
	}
	if err := n.launch(p, "kubelet", filepath.Join(opts.BinDir, "kubelet"),
		"--config="+p.kubeletConfig(), "--bootstrap-kubeconfig="+p.bootstrapKubeconfig(),
		"--kubeconfig="+p.kubeconfig(), "--root-dir="+p.kubeletDir(), "--cert-dir="+p.join("kubelet", "pki"),
		"--hostname-override="+n.Name, "--node-ip="+n.NodeIP, "--v=1"); err != nil {
		return err
	}
	if err := n.launch(p, "kube-proxy", filepath.Join(opts.BinDir, "kube-proxy"), "--config="+p.kubeProxyConfig(), "--v=1"); err != nil {
		return err
	}
	if err := n.waitFor(ctx, p, "kubelet", opts.ReadyTimeout, func(ctx context.Context) bool {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && nodeReady(node)
	}); err != nil {
		return err
	}
	// A Ready node does not mean kube-proxy has programmed the Services: a
	// pod that started first and asked the kubernetes Service failed (in
	// CI, kube-proxy synced 150 ms after the pod started). The node is
	// ready for pods once the kubernetes Service's rules are in its
	// namespace.
	return n.waitFor(ctx, p, "kube-proxy", opts.ReadyTimeout, func(ctx context.Context) bool {
		return n.servicesProgrammed(ctx)
	})
}

// servicesProgrammed reports whether kube-proxy has written the rules of
// the kubernetes Service (default/kubernetes) in the node's namespace.
func (n *Node) servicesProgrammed(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/var/run/netns/"+n.NetNS, "--", "iptables-save", "-t", "nat").Output()
	return err == nil && strings.Contains(string(out), `"default/kubernetes:https`)
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// launch starts name in the node's network namespace (and this machine's
// mount namespace), in a session of its own, logging to logs/<name>.log.
func (n *Node) launch(p paths, name, bin string, args ...string) error {
	logFile, err := os.OpenFile(p.log(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s log: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + n.NetNS, "--", bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	// Reap while we are the parent, and say in the log how it ended: a
	// process killed before it wrote a line leaves no other trace.
	logPath := p.log(name)
	go func() {
		err := cmd.Wait()
		if f, ferr := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0o600); ferr == nil {
			fmt.Fprintf(f, "kubeletnode: %s (PID %d) ended: %v (%s)\n", name, cmd.Process.Pid, err, cmd.ProcessState)
			_ = f.Close()
		}
	}()
	if err := os.WriteFile(p.pid(name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("recording %s PID: %w", name, err)
	}
	return nil
}

// waitFor polls ok until it holds, the process name exits, or timeout
// passes; a failure quotes name's log.
func (n *Node) waitFor(ctx context.Context, p paths, name string, timeout time.Duration, ok func(context.Context) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok(ctx) {
			return nil
		}
		reason := ""
		if !n.alive(p, name) {
			reason = "exited during start-up"
		} else if time.Now().After(deadline) {
			reason = fmt.Sprintf("not ready after %s", timeout)
		}
		if reason != "" {
			data, _ := os.ReadFile(p.log(name))
			return fmt.Errorf("%s %s; last lines of %s:\n%s", name, reason, p.log(name), modbuild.LastLines(string(data), 30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// alive reports whether the process name still runs. A process is
// taken for gone only when three looks 100 ms apart say so: its command
// line, by which RunningPID knows it, reads empty while it execs (nsenter
// becoming the kubelet), and once that made a live kubelet count as
// "exited during start-up".
func (n *Node) alive(p paths, name string) bool {
	for i := range 3 {
		if _, ok := controlplane.RunningPID(n.StateDir, p.pid(name)); ok {
			return true
		}
		if i < 2 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return false
}

// ContainerdPID returns the PID of the node's containerd while it runs. Its
// /proc/<pid>/ns/mnt is the mount namespace in which its runc finds what a
// container mounts from the node: a privileged pod with hostPID opens it,
// where this machine's PID 1 (another program's, with a capability the
// pods lack) refuses it.
func (n *Node) ContainerdPID() (int, error) {
	pid, ok := controlplane.RunningPID(n.StateDir, paths{dir: n.StateDir}.pid("containerd"))
	if !ok {
		return 0, fmt.Errorf("node %s: containerd does not run", n.Name)
	}
	return pid, nil
}

func (n *Node) save() error {
	data, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding node state: %w", err)
	}
	if err := os.WriteFile(paths{dir: n.StateDir}.stateFile(), data, 0o644); err != nil {
		return fmt.Errorf("writing node state: %w", err)
	}
	return nil
}

// Load reads the node a Start in any process left in stateDir.
func Load(stateDir string) (*Node, error) {
	data, err := os.ReadFile(paths{dir: stateDir}.stateFile())
	if err != nil {
		return nil, fmt.Errorf("reading node state in %s: %w", stateDir, err)
	}
	var n Node
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("parsing node state in %s: %w", stateDir, err)
	}
	return &n, nil
}

// Stop stops the node's processes and removes what it made on this
// machine: pods' containers, mounts, its network namespace (the veth and
// the route go with it) and its cgroups. The Node object stays in the API,
// NotReady. The state directory stays, for its logs.
func (n *Node) Stop() error { return Stop(n.StateDir) }

// Stop stops the node that a Start left in stateDir (see Node.Stop);
// stopping a stopped node, or a directory without one, succeeds.
func Stop(stateDir string) error {
	p := paths{dir: stateDir}
	var errs []error
	for i := len(processes) - 1; i >= 0; i-- {
		if err := controlplane.StopProcess(stateDir, p.pid(processes[i]), processes[i], 20*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	cleanUp(stateDir)
	return errors.Join(errs...)
}

// cleanUp removes what the node's processes leave behind once they are
// gone: the pods' processes and cgroups, the shims, mounts under the state
// directory and the network namespace.
func cleanUp(stateDir string) {
	p := paths{dir: stateDir}
	n, err := Load(stateDir)
	if err == nil {
		removeCgroupRoot(n.CgroupRoot)
	}
	containerdtest.KillShims(p.containerdSocket())
	containerdtest.UnmountUnder(stateDir)
	if err == nil {
		tearDownNetwork(n.NetNS, n.HostLink)
	}
}

func anyRunning(stateDir string) (string, int) {
	p := paths{dir: stateDir}
	for _, name := range processes {
		if pid, ok := controlplane.RunningPID(stateDir, p.pid(name)); ok {
			return name, pid
		}
	}
	return "", 0
}
