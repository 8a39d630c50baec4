package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Networking of a cell, in one of two modes.
//
// netns: the cell gets its own network namespace, kip-<short id>, joined
// to the host by a veth pair: the host end (kv<short id>) is a port of a
// Linux bridge that the plugin creates if missing and that holds the
// subnet's first address; the cell end is eth0 in the namespace with the
// cell's address and a default route via the bridge. The host reaches
// every cell through the bridge. The plugin does not touch iptables, so
// traffic from a cell goes no further than this machine unless the
// operator routes or masquerades the subnet.
//
// loopback: Linux routes all of 127.0.0.0/8 to lo, so every 127.x.y.z is
// a local address without configuration. Each cell gets its own from
// loopbackSubnet and binds there; nothing is created.
//
// Everything goes through the ip command (iproute2), the tool an operator
// would use to inspect the result, rather than a netlink library. Every
// step is idempotent, so a Launch retried after a crash redoes them all.

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/var/run/netns"

// Names derived from the instance ID; both fit IFNAMSIZ (15 characters).
func netnsName(instanceID string) string { return "kip-" + shortID(instanceID) }
func vethName(instanceID string) string  { return "kv" + shortID(instanceID) }

// cellIface is the cell end of the veth pair, inside the namespace.
const cellIface = "eth0"

// ip runs the ip command where m's commands run and returns its output;
// errors carry the output.
func (m machine) ip(ctx context.Context, args ...string) (string, error) {
	return m.output(ctx, "ip", args...)
}

// setupNetns creates the cell's namespace, veth pair, addresses and route,
// and the bridge if it is missing.
func (m machine) setupNetns(ctx context.Context, r *record) error {
	if err := m.ensureBridge(ctx, r.Bridge, r.Gateway+"/"+strconv.Itoa(r.Prefix)); err != nil {
		return err
	}
	if !m.netnsExists(r.Netns) {
		if _, err := m.ip(ctx, "netns", "add", r.Netns); err != nil && !m.netnsExists(r.Netns) {
			return err
		}
	}
	// A veth left by an interrupted launch may be half configured: start
	// over. Deleting one end of a pair deletes the other.
	if m.linkExists(ctx, r.Veth) {
		if _, err := m.ip(ctx, "link", "del", r.Veth); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"link", "add", r.Veth, "type", "veth", "peer", "name", cellIface, "netns", r.Netns},
		{"link", "set", r.Veth, "master", r.Bridge, "up"},
		{"-n", r.Netns, "addr", "replace", r.Address + "/" + strconv.Itoa(r.Prefix), "dev", cellIface},
		{"-n", r.Netns, "link", "set", cellIface, "up"},
		{"-n", r.Netns, "link", "set", "lo", "up"},
		{"-n", r.Netns, "route", "replace", "default", "via", r.Gateway, "dev", cellIface},
	}
	for _, args := range steps {
		if _, err := m.ip(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// masqueradeComment marks the plugin's iptables rules.
const masqueradeComment = "kip-plugin-local masquerade"

// ensureMasquerade makes this machine forward what comes from bridge and
// masquerade what the cells of subnet send beyond it: IPv4 forwarding on,
// and rules in nat POSTROUTING and filter FORWARD (where a default policy
// of DROP, as Docker sets, would stop them), each added once.
func (m machine) ensureMasquerade(ctx context.Context, bridge string, subnet netip.Prefix) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil { //nolint:gosec // G306: a sysctl
		return fmt.Errorf("masquerading the cells: turning IPv4 forwarding on: %w", err)
	}
	s := subnet.String()
	comment := []string{"-m", "comment", "--comment", masqueradeComment}
	rules := [][]string{
		append([]string{"-t", "nat", "POSTROUTING", "-s", s, "!", "-d", s}, append(comment, "-j", "MASQUERADE")...),
		append([]string{"-t", "filter", "FORWARD", "-i", bridge}, append(comment, "-j", "ACCEPT")...),
		append([]string{"-t", "filter", "FORWARD", "-o", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED"}, append(comment, "-j", "ACCEPT")...),
	}
	for _, r := range rules {
		table, rule := r[:3], r[3:] // -t <table> <chain>
		check := append([]string{"-w", "5", table[0], table[1], "-C", table[2]}, rule...)
		if _, err := m.output(ctx, "iptables", check...); err == nil {
			continue
		}
		add := append([]string{"-w", "5", table[0], table[1], "-I", table[2]}, rule...)
		if _, err := m.output(ctx, "iptables", add...); err != nil {
			return fmt.Errorf("masquerading the cells: %w", err)
		}
	}
	return nil
}

// ensureBridge creates the bridge if it does not exist, pins its MAC
// address (pinBridgeAddress), gives it the gateway address and brings it
// up. Concurrent callers may race to create it; the loser finds it there.
func (m machine) ensureBridge(ctx context.Context, bridge, cidr string) error {
	if !m.linkExists(ctx, bridge) {
		if _, err := m.ip(ctx, "link", "add", bridge, "type", "bridge"); err != nil && !m.linkExists(ctx, bridge) {
			return err
		}
	}
	if err := m.pinBridgeAddress(ctx, bridge); err != nil {
		return err
	}
	if _, err := m.ip(ctx, "addr", "replace", cidr, "dev", bridge); err != nil {
		return err
	}
	_, err := m.ip(ctx, "link", "set", bridge, "up")
	return err
}

// pinBridgeAddress sets the bridge's MAC address to the one it has, unless
// it was set already. A bridge whose address nobody set takes the lowest
// of its ports' addresses, and takes another whenever a port with a lower
// one joins (a cell's veth: their addresses are random). A cell that knows
// the gateway by the old address then reaches nothing on this machine,
// its frames no longer the bridge's, until its neighbour entry for the
// gateway is probed again: seconds (an agent's status to the host held up
// 6 and 13 s). The kernel keeps an address that was set (addr_assign_type
// NET_ADDR_SET).
func (m machine) pinBridgeAddress(ctx context.Context, bridge string) error {
	dir := filepath.Join(sysClassNet, bridge)
	kind, err := os.ReadFile(filepath.Join(dir, "addr_assign_type"))
	if err != nil {
		return fmt.Errorf("pinning the address of bridge %s: %w", bridge, err)
	}
	if strings.TrimSpace(string(kind)) == netAddrSet {
		return nil
	}
	mac, err := os.ReadFile(filepath.Join(dir, "address"))
	if err != nil {
		return fmt.Errorf("pinning the address of bridge %s: %w", bridge, err)
	}
	if _, err := m.ip(ctx, "link", "set", "dev", bridge, "address", strings.TrimSpace(string(mac))); err != nil {
		return fmt.Errorf("pinning the address of bridge %s: %w", bridge, err)
	}
	return nil
}

// sysClassNet is where the kernel shows each network interface, and
// netAddrSet the addr_assign_type of an address that was set
// (NET_ADDR_SET).
const (
	sysClassNet = "/sys/class/net"
	netAddrSet  = "3"
)

// teardownNetns deletes the cell's veth pair and namespace; what is
// already gone is not an error. The bridge stays: other cells use it.
func (m machine) teardownNetns(ctx context.Context, r *record) error {
	var errs []error
	if r.Veth != "" && m.linkExists(ctx, r.Veth) {
		if _, err := m.ip(ctx, "link", "del", r.Veth); err != nil && m.linkExists(ctx, r.Veth) {
			errs = append(errs, err)
		}
	}
	if r.Netns != "" && m.netnsExists(r.Netns) {
		if _, err := m.ip(ctx, "netns", "del", r.Netns); err != nil && m.netnsExists(r.Netns) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m machine) linkExists(ctx context.Context, name string) bool {
	_, err := m.ip(ctx, "link", "show", "dev", name)
	return err == nil
}

func (m machine) netnsExists(name string) bool {
	return m.exists(filepath.Join(netnsDir, name))
}

// probeNetns checks that this process can create and delete a network
// namespace; network auto uses netns only if it can. The name is random:
// several Configure calls may probe at once.
func (m machine) probeNetns(ctx context.Context) error {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "kip-probe-" + hex.EncodeToString(b)
	if _, err := m.ip(ctx, "netns", "add", name); err != nil {
		return err
	}
	_, err := m.ip(ctx, "netns", "del", name)
	return err
}
