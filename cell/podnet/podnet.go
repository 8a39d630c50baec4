package podnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Names and addresses of the pod's network.
const (
	// HostLink is the instance's end of the pod's veth pair.
	HostLink = "kippod"
	// PodLink is the pod's end, inside its namespace.
	PodLink = "eth0"
	// Gateway is the pod's default gateway: no interface holds it,
	// HostLink answers ARP for it.
	Gateway = "169.254.1.1"
	// NSFile is the file, in the directory given to Setup, on which the
	// pod's namespace is pinned.
	NSFile = "net"
	// addressFile, beside it, holds the pod's address, for Teardown.
	addressFile = "address"
	// InputChain and ForwardChain are the instance's filter chains for
	// what comes in on HostLink (see the package comment).
	InputChain   = "KIP-POD-INPUT"
	ForwardChain = "KIP-POD-FORWARD"
)

// Metadata is the instance metadata of EC2, Compute Engine and Azure
// (which on Compute Engine and Azure also answers DNS), and WireServer
// Azure's (its DNS resolver too).
var (
	Metadata   = netip.MustParseAddr("169.254.169.254")
	WireServer = netip.MustParseAddr("168.63.129.16")
)

// Blocked are the addresses a pod may not reach but for DNS.
var Blocked = []netip.Addr{Metadata, WireServer}

// Options are what the operator allows a pod's network beyond the
// package's rules.
type Options struct {
	// Metadata lets the pod reach the instance metadata (Metadata): its
	// credentials (an instance profile's, a service account's, a managed
	// identity's) and what it serves. The boot recipes set it with their
	// KIP_POD_IMDS or KIP_POD_METADATA (kip-cell --pod-metadata). Azure's
	// WireServer stays closed.
	Metadata bool
}

// Setup makes (or, after an agent restart, finds) the pod's network
// namespace pinned under dir with address addr, and the instance's side
// of it, and returns the namespace's path (dir/NSFile). Its firewall
// chains are written again each time, as opts say.
func Setup(ctx context.Context, dir string, addr netip.Addr, opts Options) (string, error) {
	if !addr.Is4() {
		return "", fmt.Errorf("setting up the pod's network: %q is not an IPv4 address", addr)
	}
	path := filepath.Join(dir, NSFile)
	if err := pin(path); err != nil {
		return "", fmt.Errorf("setting up the pod's network: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, addressFile), []byte(addr.String()+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("setting up the pod's network: recording its address: %w", err)
	}
	uplink, mtu, err := defaultLink(ctx)
	if err != nil {
		return "", fmt.Errorf("setting up the pod's network: %w", err)
	}
	if !configured(ctx, path, addr) {
		if err := makeLinks(ctx, path, addr, mtu); err != nil {
			return "", fmt.Errorf("setting up the pod's network: %w", err)
		}
	}
	if err := instanceSide(ctx, addr, uplink); err != nil {
		return "", fmt.Errorf("setting up the pod's network: %w", err)
	}
	if err := firewall(ctx, opts); err != nil {
		return "", fmt.Errorf("setting up the pod's network: %w", err)
	}
	return path, nil
}

// Teardown removes what Setup made under dir and in the instance's
// namespace; what is already gone is not an error. Without dir, which
// Setup makes first, there is nothing to remove.
func Teardown(ctx context.Context, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	if linkExists(ctx, HostLink) {
		if _, err := run(ctx, "ip", "link", "del", HostLink); err != nil && linkExists(ctx, HostLink) {
			errs = append(errs, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, addressFile)); err == nil {
		if uplink, _, err := defaultLink(ctx); err == nil {
			_, _ = run(ctx, "ip", "neigh", "del", "proxy", strings.TrimSpace(string(data)), "dev", uplink)
		}
	}
	if _, err := exec.LookPath("iptables"); err == nil {
		for _, j := range jumps {
			for ipt(ctx, append([]string{"-C"}, j...)...) == nil {
				if err := ipt(ctx, append([]string{"-D"}, j...)...); err != nil {
					errs = append(errs, err)
					break
				}
			}
		}
		for _, chain := range []string{InputChain, ForwardChain} {
			if ipt(ctx, "-L", chain, "-n") == nil {
				if err := ipt(ctx, "-F", chain); err != nil {
					errs = append(errs, err)
				} else if err := ipt(ctx, "-X", chain); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	path := filepath.Join(dir, NSFile)
	if pinned(path) {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unpinning the pod's network namespace: %w", err))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tearing down the pod's network: %w", err)
	}
	return nil
}

// pinned reports whether path is a network namespace pinned by a bind
// mount.
func pinned(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// pin makes a new network namespace and bind-mounts it on path, unless
// one is pinned there already.
func pin(path string) error {
	if pinned(path) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("pinning the pod's network namespace: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pinning the pod's network namespace: %w", err)
	}
	_ = f.Close()
	err = onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("making a network namespace: %w", err)
		}
		if err := unix.Mount(threadNetns(), path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting the network namespace on %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pinning the pod's network namespace: %w", err)
	}
	return nil
}

func threadNetns() string { return fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()) }

// defaultLink returns the interface of the instance's default route and
// its MTU.
func defaultLink(ctx context.Context) (string, int, error) {
	out, err := run(ctx, "ip", "-o", "-4", "route", "show", "default")
	if err != nil {
		return "", 0, err
	}
	dev := fieldAfter(out, "dev")
	if dev == "" {
		return "", 0, errors.New("finding the instance's interface: no IPv4 default route")
	}
	out, err = run(ctx, "ip", "-o", "link", "show", "dev", dev)
	if err != nil {
		return "", 0, err
	}
	mtu, err := strconv.Atoi(fieldAfter(out, "mtu"))
	if err != nil {
		return "", 0, fmt.Errorf("finding the MTU of %s: %w", dev, err)
	}
	return dev, mtu, nil
}

// fieldAfter returns the word after key in out, or "".
func fieldAfter(out, key string) string {
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == key {
			return f[i+1]
		}
	}
	return ""
}

// configured reports whether HostLink exists and the pod's end has addr:
// an agent started again over a running pod leaves its links alone.
func configured(ctx context.Context, path string, addr netip.Addr) bool {
	if !linkExists(ctx, HostLink) {
		return false
	}
	out, err := run(ctx, "nsenter", "--net="+path, "--", "ip", "-o", "-4", "addr", "show", "dev", PodLink)
	return err == nil && strings.Contains(out, " "+addr.String()+"/32 ")
}

// makeLinks makes the veth pair anew and configures the pod's end.
func makeLinks(ctx context.Context, path string, addr netip.Addr, mtu int) error {
	if linkExists(ctx, HostLink) {
		// Half configured by an interrupted Setup: start over. Deleting
		// one end of a pair deletes the other.
		if _, err := run(ctx, "ip", "link", "del", HostLink); err != nil {
			return err
		}
	}
	m := strconv.Itoa(mtu)
	if _, err := run(ctx, "ip", "link", "add", HostLink, "mtu", m, "type", "veth", "peer", "name", PodLink, "mtu", m, "netns", path); err != nil {
		return err
	}
	in := []string{"nsenter", "--net=" + path, "--", "ip"}
	for _, args := range [][]string{
		{"addr", "replace", addr.String() + "/32", "dev", PodLink},
		{"link", "set", "lo", "up"},
		{"link", "set", PodLink, "up"},
		{"route", "replace", Gateway, "dev", PodLink, "scope", "link"},
		{"route", "replace", "default", "via", Gateway, "dev", PodLink},
	} {
		if _, err := run(ctx, in[0], append(in[1:], args...)...); err != nil {
			return err
		}
	}
	return nil
}

// instanceSide routes addr to HostLink, answers ARP for it on uplink and
// for Gateway on HostLink, and forwards between the two. A cloud's guest
// tools may have claimed addr for the instance (Amazon Linux's
// ec2-net-utils configures secondary addresses on the interface, Compute
// Engine's guest agent adds local routes for alias IPs): that is undone
// first, or the instance would take the pod's packets for itself.
func instanceSide(ctx context.Context, addr netip.Addr, uplink string) error {
	if err := unclaim(ctx, addr); err != nil {
		return err
	}
	for _, s := range []struct{ key, value string }{
		{"ipv4/conf/" + HostLink + "/forwarding", "1"},
		{"ipv4/conf/" + HostLink + "/proxy_arp", "1"},
		{"ipv4/conf/" + HostLink + "/rp_filter", "1"},
		{"ipv4/neigh/" + HostLink + "/proxy_delay", "0"},
		{"ipv4/conf/" + uplink + "/forwarding", "1"},
		{"ipv4/neigh/" + uplink + "/proxy_delay", "0"},
	} {
		if err := os.WriteFile("/proc/sys/net/"+s.key, []byte(s.value), 0o644); err != nil {
			return fmt.Errorf("setting net.%s: %w", strings.ReplaceAll(s.key, "/", "."), err)
		}
	}
	// No IPv6 on the instance's end: the pod has no path but IPv4's.
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+HostLink+"/disable_ipv6", []byte("1"), 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turning IPv6 off on %s: %w", HostLink, err)
	}
	for _, args := range [][]string{
		{"link", "set", HostLink, "up"},
		{"route", "replace", addr.String() + "/32", "dev", HostLink, "scope", "link"},
		{"neigh", "replace", "proxy", addr.String(), "dev", uplink},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// unclaim removes addr from the instance's own addresses and local
// routes, where something put it.
func unclaim(ctx context.Context, addr netip.Addr) error {
	out, err := run(ctx, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// "2: eth0    inet 10.0.0.5/24 brd ... scope global eth0"
		if len(f) < 4 || f[2] != "inet" || !strings.HasPrefix(f[3], addr.String()+"/") || f[1] == HostLink {
			continue
		}
		if _, err := run(ctx, "ip", "addr", "del", f[3], "dev", strings.TrimSuffix(f[1], ":")); err != nil {
			return fmt.Errorf("taking the pod's address off the instance: %w", err)
		}
	}
	if out, err := run(ctx, "ip", "-4", "route", "show", "table", "local", addr.String()+"/32"); err == nil && strings.TrimSpace(out) != "" {
		if _, err := run(ctx, "ip", "route", "del", "local", addr.String()+"/32", "table", "local"); err != nil {
			return fmt.Errorf("taking the pod's address off the instance: %w", err)
		}
	}
	return nil
}

// jumps are the instance's rules that lead HostLink's packets to the
// pod's chains, and accept what goes to the pod whatever the FORWARD
// chain's policy.
var jumps = [][]string{
	{"INPUT", "-i", HostLink, "-j", InputChain},
	{"FORWARD", "-i", HostLink, "-j", ForwardChain},
	{"FORWARD", "-o", HostLink, "-j", "ACCEPT"},
}

// firewall writes the pod's chains and inserts the jumps to them.
func firewall(ctx context.Context, opts Options) error {
	var b strings.Builder
	b.WriteString("*filter\n:" + InputChain + " - [0:0]\n:" + ForwardChain + " - [0:0]\n")
	// Answers to what the instance asked the pod pass; nothing the pod
	// starts does.
	b.WriteString("-A " + InputChain + " -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n")
	b.WriteString("-A " + InputChain + " -j DROP\n")
	for _, a := range Blocked {
		if a == Metadata && opts.Metadata {
			continue
		}
		for _, proto := range []string{"udp", "tcp"} {
			fmt.Fprintf(&b, "-A %s -d %s/32 -p %s --dport 53 -j ACCEPT\n", ForwardChain, a, proto)
		}
		fmt.Fprintf(&b, "-A %s -d %s/32 -j DROP\n", ForwardChain, a)
	}
	b.WriteString("-A " + ForwardChain + " -j ACCEPT\nCOMMIT\n")
	cmd := exec.CommandContext(ctx, "iptables-restore", "--noflush", "-w", "5")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("writing the pod's firewall chains: %w: %s", err, strings.TrimSpace(string(out)))
	}
	for _, j := range jumps {
		if ipt(ctx, append([]string{"-C"}, j...)...) == nil {
			continue
		}
		// First, ahead of whatever else the chain holds.
		if err := ipt(ctx, append([]string{"-I", j[0], "1"}, j[1:]...)...); err != nil {
			return err
		}
	}
	return nil
}

// ipt runs iptables with args, waiting up to 5 s for its lock.
func ipt(ctx context.Context, args ...string) error {
	_, err := run(ctx, "iptables", append([]string{"-w", "5"}, args...)...)
	return err
}

func linkExists(ctx context.Context, name string) bool {
	_, err := run(ctx, "ip", "link", "show", "dev", name)
	return err == nil
}

// run runs a command and returns its output; errors carry the output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput() //nolint:gosec // fixed commands; the arguments are ours
	if err != nil {
		return string(out), fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
