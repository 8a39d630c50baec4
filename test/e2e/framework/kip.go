package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
)

// Binaries are the programs BuildBinaries makes.
var Binaries = map[string]string{
	"kip":              "github.com/kipcell/kip/cmd/kip",
	"kip-cell":         "github.com/kipcell/kip/cmd/kip-cell",
	"kip-plugin-local": "github.com/kipcell/kip/plugins/local/cmd/kip-plugin-local",
}

// BuildBinaries builds kip, kip-cell and kip-plugin-local into dir (from
// the workspace the tests run in).
func BuildBinaries(ctx context.Context, dir string) error {
	for name, pkg := range Binaries {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// Cells is what a node needs to run real cells on this machine: a private
// containerd, a registry the cells reach through their bridge, and the
// test images in it.
type Cells struct {
	Containerd *containerdtest.Daemon
	Registry   *registry.Registry
	Images     images.Set
	// Bridge and Subnet are the local plugin's network for cells; Gateway
	// is the bridge's address, where cells find the registry.
	Bridge, Subnet, Gateway string
	stop                    func()
}

// StartCells starts containerd and a registry on all addresses, advertised
// at the gateway of a fresh cell subnet, and pushes the test images.
func StartCells(ctx context.Context) (*Cells, error) {
	d, stopContainerd, err := containerdtest.Start()
	if err != nil {
		return nil, err
	}
	suffix := containerdtest.Random(6)
	third, _ := strconv.ParseInt(suffix[:2], 16, 64)
	c := &Cells{
		Containerd: d,
		Bridge:     "kipe" + suffix,
		Subnet:     fmt.Sprintf("10.213.%d.0/24", 10+third%200),
		stop:       stopContainerd,
	}
	c.Gateway = strings.TrimSuffix(c.Subnet, "0/24") + "1"
	port, err := freePort()
	if err != nil {
		c.Stop()
		return nil, err
	}
	reg, err := registry.Start(ctx, registry.Options{
		Addr: fmt.Sprintf("0.0.0.0:%d", port), AdvertiseHost: c.Gateway,
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting registry: %w", err)
	}
	c.Registry = reg
	if c.Images, err = images.PushAll(ctx, reg); err != nil {
		c.Stop()
		return nil, fmt.Errorf("pushing test images: %w", err)
	}
	return c, nil
}

// Stop stops the registry and containerd and removes the cells' bridge.
func (c *Cells) Stop() {
	if c.Registry != nil {
		_ = c.Registry.Close()
	}
	if c.stop != nil {
		c.stop()
	}
	_ = exec.Command("ip", "link", "del", c.Bridge).Run()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Kip is a running `kip run` process.
type Kip struct {
	NodeName string
	Dir      string
	LogPath  string
	StateDir string // the local plugin's
	cmd      *exec.Cmd
	done     chan struct{}
}

// KipOptions configure StartKip.
type KipOptions struct {
	NodeName string
	// BinDir holds kip, kip-cell and kip-plugin-local.
	BinDir string
	// Log receives progress lines.
	Log io.Writer
}

// StartKip runs kip as a real process with the node's own identity
// (system:node:<name>), the local plugin launching kip-cell agents on
// cells' containerd, and waits until the node is Ready. It grants the
// node what deploy/rbac grants and labels it kubernetes.io/role=agent as
// an administrator would (a node may not set that label itself).
func (f *Framework) StartKip(ctx context.Context, cells *Cells, opts KipOptions) (*Kip, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	kubectl := filepath.Join(f.Cluster.BinDir, "kubectl")
	repoRBAC, err := repoFile("deploy/rbac/kip-ca-secret.yaml")
	if err != nil {
		return nil, err
	}
	rbac, err := os.ReadFile(repoRBAC)
	if err != nil {
		return nil, fmt.Errorf("reading RBAC: %w", err)
	}
	rbac = []byte(strings.ReplaceAll(string(rbac), "system:node:kip", "system:node:"+opts.NodeName))
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(string(rbac))
	if out, err := apply.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("applying deploy/rbac: %w\n%s", err, out)
	}
	nodeKubeconfig, err := f.Cluster.AddNode(opts.NodeName)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kip-e2e-node-")
	if err != nil {
		return nil, fmt.Errorf("creating kip directory: %w", err)
	}
	k := &Kip{NodeName: opts.NodeName, Dir: dir, LogPath: filepath.Join(dir, "kip.log"), StateDir: filepath.Join(dir, "local"), done: make(chan struct{})}
	config := fmt.Sprintf(`clusterID: e2e
nodeName: %[1]s
kubeconfig: %[2]s
node:
  internalIP: 127.0.0.1
  listenAddress: 127.0.0.1:0
  clientCAFile: %[3]s
cells:
  insecureRegistries: [%[4]q]
log:
  level: debug
  format: text
plugin:
  name: local
  dir: %[5]s
  config:
    agentCommand: [%[6]q, "--containerd-address", %[7]q, "--runc-root", %[8]q, "--bootstrap", "{bootstrap}"]
    network: netns
    bridge: %[9]s
    subnet: %[10]s
    stateDir: %[11]s
    terminationGrace: 5s
`, opts.NodeName, nodeKubeconfig, f.Cluster.CAFile, cells.Registry.Host(), opts.BinDir,
		filepath.Join(opts.BinDir, "kip-cell"), cells.Containerd.Socket, cells.Containerd.RuncRoot,
		cells.Bridge, cells.Subnet, k.StateDir)
	configPath := filepath.Join(dir, "kip.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("writing kip config: %w", err)
	}
	logFile, err := os.Create(k.LogPath)
	if err != nil {
		return nil, fmt.Errorf("creating kip log: %w", err)
	}
	k.cmd = exec.Command(filepath.Join(opts.BinDir, "kip"), "run", "--config", configPath)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.Env = append(os.Environ(), "KUBECONFIG=")
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := k.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kip: %w", err)
	}
	go func() { _ = k.cmd.Wait(); _ = logFile.Close(); close(k.done) }()

	err = Poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		select {
		case <-k.done:
			return false, fmt.Errorf("kip exited during start-up; last lines of %s:\n%s", k.LogPath, k.LogTail(40))
		default:
		}
		n, err := f.Client.CoreV1().Nodes().Get(ctx, opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		k.Stop()
		return nil, fmt.Errorf("waiting for node %s to be Ready: %w\nkip log:\n%s", opts.NodeName, err, k.LogTail(40))
	}
	label := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "label", "node", opts.NodeName, "kubernetes.io/role=agent", "--overwrite")
	if out, err := label.CombinedOutput(); err != nil {
		k.Stop()
		return nil, fmt.Errorf("labelling node: %w\n%s", err, out)
	}
	fmt.Fprintf(opts.Log, "e2e: kip running as node %s (log %s)\n", opts.NodeName, k.LogPath)
	return k, nil
}

// LogTail returns the last n lines of kip's log.
func (k *Kip) LogTail(n int) string {
	data, _ := os.ReadFile(k.LogPath)
	return tail(string(data), n)
}

// Stop stops kip (SIGTERM, then SIGKILL) and then whatever cells of its
// local plugin are still running, so that nothing outlives the tests.
func (k *Kip) Stop() {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
	}
	killUnder(k.StateDir)
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if name := fields[0]; strings.HasPrefix(name, "kip-") && netnsEmpty(name) {
			_ = exec.Command("ip", "netns", "del", fields[0]).Run()
		}
	}
	_ = os.RemoveAll(k.Dir)
}

// killUnder kills processes whose command line names dir (cell agents).
func killUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(data), dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func netnsEmpty(name string) bool {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == ""
}

// repoFile finds path relative to the repository root (the directory with
// go.work) from the test's working directory.
func repoFile(path string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, path), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding %s: no go.work above the working directory", path)
		}
		dir = parent
	}
}
