package local

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/pluginapi"
)

func TestLaunchNetns(t *testing.T) {
	t.Parallel()
	e := newNetnsEnv(t)
	p := e.provider()
	subnet := netip.MustParsePrefix(e.config["subnet"].(string))
	bridge := e.config["bridge"].(string)

	a := e.launch(p, "cell-n1")
	b := e.launch(p, "cell-n2")
	// The bridge holds the first address; each cell gets the next two,
	// its own and its pod's.
	first := subnet.Addr().Next().Next()
	for _, c := range []struct {
		inst            pluginapi.Instance
		address, podAdd netip.Addr
	}{
		{a, first, first.Next()},
		{b, first.Next().Next(), first.Next().Next().Next()},
	} {
		if got := c.inst.PrivateAddress(); got != c.address.String() {
			t.Errorf("%s's address %s, want %s", c.inst.CellID, got, c.address)
		}
		if got := c.inst.PodAddress(); got != c.podAdd.String() {
			t.Errorf("%s's pod address %q, want %s", c.inst.CellID, got, c.podAdd)
		}
	}
	if out, err := here.ip(t.Context(), "-4", "addr", "show", "dev", bridge); err != nil || !strings.Contains(out, subnet.Addr().Next().String()+"/24") {
		t.Errorf("bridge %s: %s %v", bridge, out, err)
	}

	for _, inst := range []pluginapi.Instance{a, b} {
		r, err := readRecord(e.stateDir(), inst.CellID)
		if err != nil {
			t.Fatal(err)
		}
		rep := e.report(inst.CellID)
		// The agent runs in the cell's namespace, not the host's.
		nsInfo, err := os.Stat(filepath.Join(netnsDir, r.Netns))
		if err != nil {
			t.Fatal(err)
		}
		agentNs, err := os.Stat("/proc/" + strconv.Itoa(rep.PID) + "/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(nsInfo, agentNs) {
			t.Errorf("agent of %s is not in network namespace %s (it is in %s)", inst.CellID, r.Netns, rep.Netns)
		}
		if v, ok := rep.Env[EnvCellServiceProxy]; ok {
			t.Errorf("agent of %s got %s=%q; a cell in its own namespace programs its services", inst.CellID, EnvCellServiceProxy, v)
		}
		if rep.PID != r.PID {
			t.Errorf("recorded PID %d, agent PID %d: nsenter should exec the agent", r.PID, rep.PID)
		}
		// It shares the machine's mount namespace, where containerd and
		// runc see the tmpfs it mounts for secrets.
		if own, _ := os.Readlink("/proc/self/ns/mnt"); rep.Mountns != own {
			t.Errorf("agent of %s is in mount namespace %s, want the plugin's %s", inst.CellID, rep.Mountns, own)
		}
		// Its eth0 has the allocated address, and the host reaches it
		// through the bridge.
		out, err := here.ip(t.Context(), "-n", r.Netns, "-4", "addr", "show", "dev", "eth0")
		if err != nil || !strings.Contains(out, inst.PrivateAddress()+"/24") {
			t.Errorf("eth0 in %s: %s %v", r.Netns, out, err)
		}
		eventually(t, 10*time.Second, func() error {
			msg, err := dial(inst.PrivateAddress())
			if err == nil && msg != "hello "+inst.CellID {
				t.Fatalf("agent at %s says %q", inst.PrivateAddress(), msg)
			}
			return err
		})
	}

	// Terminate removes the namespace and the veth; the bridge stays.
	r, _ := readRecord(e.stateDir(), a.CellID)
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	if here.netnsExists(r.Netns) {
		t.Errorf("namespace %s still exists", r.Netns)
	}
	if here.linkExists(t.Context(), r.Veth) {
		t.Errorf("veth %s still exists", r.Veth)
	}
	if !here.linkExists(t.Context(), bridge) {
		t.Errorf("bridge %s was removed with a cell", bridge)
	}
	// Its address is free again, but the next cell gets the address after
	// the last one handed out, not the one just freed (neighbour caches
	// still hold the old veth's MAC for it).
	records, err := readRecords(e.stateDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{a.PrivateAddress(), a.PodAddress()} {
		if usedAddresses(records)[netip.MustParseAddr(addr)] {
			t.Errorf("the terminated cell's address %s is still taken", addr)
		}
	}
	last := readLastAddress(e.stateDir())
	if c := e.launch(p, "cell-n3"); addrOf(c) == a.PrivateAddress() || addrOf(c) != last.Next().String() {
		t.Errorf("next cell got %s, want %s, the one after the last handed out (%s), not the freed %s",
			c.PrivateAddress(), last.Next(), last, a.PrivateAddress())
	}
}

// The bridge keeps the MAC address it had when the first cell came,
// whether the plugin created it or found it: cells joining later (random
// veth addresses, some lower) must not change the gateway's address under
// the cells that know it.
func TestNetnsBridgeKeepsItsAddress(t *testing.T) {
	t.Parallel()
	for _, found := range []bool{false, true} {
		t.Run(fmt.Sprintf("found=%v", found), func(t *testing.T) {
			t.Parallel()
			e := newNetnsEnv(t)
			e.config["agentCommand"] = []string{"sleep", "300"}
			bridge := e.config["bridge"].(string)
			if found {
				// As an administrator, or the e2e framework, creates it.
				if _, err := here.ip(t.Context(), "link", "add", bridge, "type", "bridge"); err != nil {
					t.Fatal(err)
				}
			}
			p := e.provider()
			// Cell IDs of their own: the two subtests run at once.
			prefix := map[bool]string{false: "cell-mn", true: "cell-mf"}[found]
			e.launch(p, prefix+"0")
			kind, first := bridgeAddress(t, bridge)
			if kind != netAddrSet {
				t.Errorf("bridge %s: addr_assign_type %s after the first cell, want %s (set)", bridge, kind, netAddrSet)
			}
			for i := 1; i <= 4; i++ {
				e.launch(p, prefix+strconv.Itoa(i))
				if _, got := bridgeAddress(t, bridge); got != first {
					t.Errorf("bridge %s: address %s after cell %d joined, want %s as at the first", bridge, got, i, first)
				}
			}
		})
	}
}

// bridgeAddress is the bridge's addr_assign_type and MAC address.
func bridgeAddress(t *testing.T, bridge string) (kind, mac string) {
	t.Helper()
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(sysClassNet, bridge, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	return read("addr_assign_type"), read("address")
}

// TestNetnsAddressesAreUniqueUnderConcurrency: cells launched at once by
// two plugin processes sharing the state directory never get the same
// address, their own or their pods'.
func TestNetnsAddressesAreUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newNetnsEnv(t)
	e.config["agentCommand"] = []string{"sleep", "300"}
	p, q := e.provider(), e.provider()
	const n = 6
	addrs := make(chan []string, n)
	errs := make(chan error, n)
	for i := range n {
		prov := p
		if i%2 == 1 {
			prov = q
		}
		go func() {
			resp, err := prov.Launch(t.Context(), e.launchRequest("cell-u"+strconv.Itoa(i)))
			if err != nil {
				errs <- err
				return
			}
			addrs <- []string{addrOf(resp.Instance), resp.Instance.PodAddress()}
		}()
	}
	seen := map[string]bool{}
	for range n {
		select {
		case err := <-errs:
			t.Error(err)
		case got := <-addrs:
			for _, a := range got {
				if seen[a] {
					t.Errorf("address %s given twice", a)
				}
				seen[a] = true
			}
		}
	}
}

func TestNetnsConfigNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("only a non-root plugin is refused network netns")
	}
	p := New(testLogger(t))
	_, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{
		ClusterID: "c", Config: []byte(`{"agentCommand": ["sleep"], "network": "netns"}`),
	})
	var invalid *pluginapi.InvalidConfigError
	if !errors.As(err, &invalid) || invalid.Key != "network" {
		t.Errorf("Configure netns as non-root = %v, want InvalidConfig for network", err)
	}
}

// here runs commands in the test's own mount namespace.
var here machine

// With masquerade, the machine forwards what comes from the cells' bridge
// and masquerades what they send beyond their subnet; the rules are added
// once however many cells launch. Run in a network namespace of the
// test's own, whose IPv4 forwarding and iptables are its own.
func TestMasquerade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("iptables needs root")
	}
	if _, err := exec.LookPath("iptables-save"); err != nil {
		t.Skip("needs iptables")
	}
	// Never unlocked: the thread, in the test's namespace, ends with it.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix("10.213.77.0/24")
	for range 2 {
		if err := here.ensureMasquerade(t.Context(), "kipt0", subnet); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v\n%s", err, out)
	}
	for _, want := range []string{
		`-A POSTROUTING -s 10.213.77.0/24 ! -d 10.213.77.0/24 -m comment --comment "kip-plugin-local masquerade" -j MASQUERADE`,
		`-A FORWARD -i kipt0 -m comment --comment "kip-plugin-local masquerade" -j ACCEPT`,
		`-A FORWARD -o kipt0 -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment "kip-plugin-local masquerade" -j ACCEPT`,
	} {
		if n := strings.Count(string(out), want+"\n"); n != 1 {
			t.Errorf("%d times in iptables-save, want once: %s\n%s", n, want, out)
		}
	}
	if fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(fwd)) != "1" {
		t.Errorf("ip_forward = %q (%v), want 1", fwd, err)
	}
}
