package kubeletnode

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// The node's network: one 10.214.x.0/24 per node, x chosen free on this
// machine (an interface holding an address in it marks it used: a killed
// run's veth keeps its address until its namespace goes).
const (
	networkPrefix = "10.214."
	firstThird    = 10
	thirds        = 240
)

// network is a node's addresses, all in 10.214.<Third>.0/24.
type network struct{ Third int }

func (n network) addr(last int) string  { return fmt.Sprintf("%s%d.%d", networkPrefix, n.Third, last) }
func (n network) podCIDR() string       { return n.addr(0) + "/25" }
func (n network) podGateway() string    { return n.addr(1) }
func (n network) hostIP() string        { return n.addr(129) }
func (n network) nodeIP() string        { return n.addr(130) }
func (n network) linkPrefixLen() string { return "/30" }

// pickThird returns the first third octet from want on (wrapping within
// the node range) that used does not hold, or an error when all are used.
func pickThird(want int, used map[int]bool) (int, error) {
	for i := range thirds {
		third := firstThird + (want-firstThird+i)%thirds
		if !used[third] {
			return third, nil
		}
	}
	return 0, fmt.Errorf("every %sx.0/24 for x in %d..%d is in use on this machine", networkPrefix, firstThird, firstThird+thirds-1)
}

// usedNodeThirds returns the third octets of the 10.214.x.0/24 networks an
// interface of this machine holds an address in.
func usedNodeThirds() map[int]bool {
	used := map[int]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return used
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip4 := ipn.IP.To4(); ip4 != nil && strings.HasPrefix(ip4.String(), networkPrefix) {
				used[int(ip4[2])] = true
			}
		}
	}
	return used
}

// setUpNetwork creates the node's network namespace netns, the veth pair
// (hostLink on the host, eth0 inside) and the routes both ways, and turns
// on forwarding inside and on hostLink.
func setUpNetwork(netns, hostLink string, n network) error {
	steps := [][]string{
		{"ip", "netns", "add", netns},
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", "eth0", "netns", netns},
		{"ip", "addr", "add", n.hostIP() + n.linkPrefixLen(), "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
		{"ip", "-n", netns, "link", "set", "lo", "up"},
		{"ip", "-n", netns, "addr", "add", n.nodeIP() + n.linkPrefixLen(), "dev", "eth0"},
		{"ip", "-n", netns, "link", "set", "eth0", "up"},
		{"ip", "-n", netns, "route", "add", "default", "via", n.hostIP()},
		{"ip", "route", "replace", n.podCIDR(), "via", n.nodeIP()},
		{"ip", "netns", "exec", netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		// This machine forwards what comes in from the node (its pods'
		// answers to cells on another bridge) on this link alone, not
		// everywhere (net.ipv4.ip_forward): a fresh machine forwards
		// nothing, and CoreDNS on the node never answered a cell there.
		{"sysctl", "-q", "-w", "net.ipv4.conf." + hostLink + ".forwarding=1"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("setting up the node's network: %s: %w: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// tearDownNetwork deletes the namespace (its veth, and with it the route,
// go too) and the host's end should the namespace be gone already.
func tearDownNetwork(netns, hostLink string) {
	_ = exec.Command("ip", "netns", "del", netns).Run()
	_ = exec.Command("ip", "link", "del", hostLink).Run()
}
