package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/modbuild"
	"github.com/kipcell/kip/test/registry"
)

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
	// RegistryPort is the registry's port on every address.
	RegistryPort int
	stop         func()
}

// CellsOptions fix what StartCellsWith would otherwise choose afresh. The
// demo keeps them across runs, so that its registry's address, and with it
// its workload's image names, stay the same.
type CellsOptions struct {
	// ContainerdDir is where containerd keeps its state and socket; empty
	// means a new directory under /tmp, removed by Stop.
	ContainerdDir string `json:"containerdDir,omitempty"`
	// Bridge and Subnet are the cells' bridge and its /24; empty means a
	// random kipe* bridge in 10.213.0.0/16.
	Bridge string `json:"bridge,omitempty"`
	Subnet string `json:"subnet,omitempty"`
	// RegistryPort is the registry's port; zero or a port in use means a
	// free one (Cells.RegistryPort tells which).
	RegistryPort int `json:"registryPort,omitempty"`
}

// StartCells starts containerd and a registry on all addresses, advertised
// at the gateway of a fresh cell subnet, and pushes the test images.
func StartCells(ctx context.Context) (*Cells, error) {
	return StartCellsWith(ctx, CellsOptions{})
}

// StartCellsWith is StartCells with choices fixed by opts.
func StartCellsWith(ctx context.Context, opts CellsOptions) (*Cells, error) {
	start := containerdtest.Start
	if opts.ContainerdDir != "" {
		start = func() (*containerdtest.Daemon, func(), error) { return containerdtest.StartIn(opts.ContainerdDir) }
	}
	d, stopContainerd, err := start()
	if err != nil {
		return nil, err
	}
	c := &Cells{Containerd: d, Bridge: opts.Bridge, Subnet: opts.Subnet, stop: stopContainerd}
	// make e2e runs the cloud passes at once: each takes its subnets, and
	// makes its bridge, while it holds the machine's network lock, so that
	// another sees them taken.
	unlock, err := modbuild.Lock(ctx, filepath.Join(os.TempDir(), "kip-e2e-networks"))
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting cells: %w", err)
	}
	defer unlock()
	if c.Bridge == "" || c.Subnet == "" {
		suffix := containerdtest.Random(6)
		third, _ := strconv.ParseInt(suffix[:2], 16, 64)
		c.Bridge = "kipe" + suffix
		c.Subnet = fmt.Sprintf("10.213.%d.0/24", freeThird(int(10+third%200), usedThirds()))
	}
	if !strings.HasSuffix(c.Subnet, ".0/24") {
		c.Stop()
		return nil, fmt.Errorf("starting cells: subnet %q is not an a.b.c.0/24", c.Subnet)
	}
	c.Gateway = strings.TrimSuffix(c.Subnet, "0/24") + "1"
	if err := ensureBridge(c.Bridge, c.Gateway+"/24"); err != nil {
		c.Stop()
		return nil, err
	}
	port := opts.RegistryPort
	if port == 0 || !portFree(port) {
		if port, err = freePort(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	reg, err := registry.Start(ctx, registry.Options{
		Addr: fmt.Sprintf("0.0.0.0:%d", port), AdvertiseHost: c.Gateway,
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting registry: %w", err)
	}
	c.Registry, c.RegistryPort = reg, port
	if c.Images, err = images.PushAll(ctx, reg); err != nil {
		c.Stop()
		return nil, fmt.Errorf("pushing test images: %w", err)
	}
	return c, nil
}

// ensureBridge creates the cells' bridge with the gateway's address, as
// the local plugin does at its first cell (the same commands, so the
// plugin finds it ready; the plugin then pins its MAC address): the
// registry is advertised at the gateway, and a kubelet node's pods pull
// from it before any cell exists. It forwards what the cells send beyond
// it.
func ensureBridge(bridge, cidr string) error {
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "replace", cidr, "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		exists := args[1] == "add" && strings.Contains(string(out), "File exists")
		if err != nil && !exists {
			return fmt.Errorf("creating the cells' bridge %s (ip %s): %w: %s", bridge, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// Cells reach the pods of a kubelet node (CoreDNS on kip-infra)
	// through this machine's routes: it forwards what comes in on the
	// bridge, and on that bridge alone (a fresh machine has
	// net.ipv4.ip_forward off, and the local plugin leaves routing beyond
	// the bridge to the operator).
	if out, err := exec.Command("sysctl", "-q", "-w", "net.ipv4.conf."+bridge+".forwarding=1").CombinedOutput(); err != nil {
		return fmt.Errorf("turning on forwarding on the cells' bridge %s: %w: %s", bridge, err, strings.TrimSpace(string(out)))
	}
	return nil
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
	for n := 1; n <= maxNetworks; n++ {
		bridge, _ := c.Network(n)
		_ = exec.Command("ip", "link", "del", bridge).Run()
	}
}

// maxNetworks is how many networks beside its own Cells.Network gives.
const maxNetworks = 4

// Network returns the bridge and subnet of the cells' n-th network: 0 is
// Bridge and Subnet; 1 to maxNetworks are bridges of their own with the
// next /24s, for a second kip whose local plugin must not hand out the
// addresses the first one does (each plugin allocates from its subnet
// alone, and a cell that outlives a test, CoreDNS's, keeps its address).
// Cells on any of them reach the registry at Gateway, an address of this
// machine. Stop deletes the bridges.
func (c *Cells) Network(n int) (bridge, subnet string) {
	if n <= 0 || n > maxNetworks {
		return c.Bridge, c.Subnet
	}
	third, _ := strconv.Atoi(strings.Split(c.Subnet, ".")[2])
	return fmt.Sprintf("%s%d", c.Bridge, n), fmt.Sprintf("10.213.%d.0/24", 10+(third-10+n)%200)
}

// usedThirds returns the third octets of the 10.213.x.0/24 subnets that an
// interface of this machine has an address in: a bridge of a run that was
// killed keeps its route (a bridge without ports is only "linkdown", and
// such routes are used), so a new run on the same subnet could not reach its
// cells.
func usedThirds() map[int]bool {
	used := map[int]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return used
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 213 {
			used[int(ip4[2])] = true
		}
	}
	return used
}

// freeThird returns the first third octet from want on (wrapping within
// 10..209) whose subnet and the maxNetworks after it (Cells.Network) meet
// no used subnet's block: a used third may be the first of another run's
// networks, whose next ones it makes later; want itself when every choice
// collides.
func freeThird(want int, used map[int]bool) int {
	for i := range 200 {
		third := 10 + (want-10+i)%200
		free := true
		for n := -maxNetworks; n <= maxNetworks; n++ {
			if used[10+(third-10+n+200)%200] {
				free = false
				break
			}
		}
		if free {
			return third
		}
	}
	return want
}

// portFree reports whether port can be listened on at every address.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
