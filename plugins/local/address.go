package local

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Addresses are not kept in a separate table that could drift from the
// cells: the addresses in use are the ones in the cells' records. Launch
// allocates under the state directory's address lock and writes the new
// cell's record before releasing it, so the next allocation, in this
// process or another, sees the address as taken. Terminate frees an address
// by removing the record.
//
// Allocation goes round the subnet, from the address after the last one
// handed out (kept in lastAddressFile), as CNI's host-local IPAM does,
// rather than taking the lowest free one: an address freed a moment ago
// is still in the neighbour (ARP) caches of this machine and of the other
// cells with the MAC of the veth that is gone, and a new cell given it at
// once is unreachable until those entries expire (20 s and more was seen).

// gateway is the bridge's address in netns mode: the subnet's first.
func gateway(subnet netip.Prefix) netip.Addr { return subnet.Addr().Next() }

// lastAddressFile, in the state directory, holds the address Launch
// handed out last.
const lastAddressFile = "last-address"

// freeAddress returns the first address of subnet after last, going round
// to the subnet's start, that is not in used, skipping the network
// address, the broadcast address and reserved; false when the subnet is
// full. A last outside subnet (none yet, or the subnet changed) starts at
// the subnet's first address.
func freeAddress(subnet netip.Prefix, used map[netip.Addr]bool, last netip.Addr, reserved ...netip.Addr) (netip.Addr, bool) {
	skip := map[netip.Addr]bool{}
	for _, a := range reserved {
		skip[a] = true
	}
	var candidates []netip.Addr
	for a := subnet.Addr().Next(); subnet.Contains(a) && subnet.Contains(a.Next()); a = a.Next() {
		candidates = append(candidates, a) // all but the network and broadcast addresses
	}
	start := 0
	for i, a := range candidates {
		if a == last {
			start = i + 1
			break
		}
	}
	for i := range candidates {
		a := candidates[(start+i)%len(candidates)]
		if !used[a] && !skip[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// readLastAddress returns the address recorded in stateDir as handed out
// last; the zero Addr when there is none or it cannot be read.
func readLastAddress(stateDir string) netip.Addr {
	data, err := os.ReadFile(filepath.Join(stateDir, lastAddressFile))
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(strings.TrimSpace(string(data)))
	return a
}

// writeLastAddress records a as the address handed out last.
func writeLastAddress(stateDir string, a netip.Addr) error {
	return os.WriteFile(filepath.Join(stateDir, lastAddressFile), []byte(a.String()+"\n"), 0o600)
}

// usedAddresses returns the addresses of the records, the cells' and
// their pods'.
func usedAddresses(records []*record) map[netip.Addr]bool {
	used := make(map[netip.Addr]bool, len(records))
	for _, r := range records {
		for _, s := range []string{r.Address, r.PodAddress} {
			if a, err := netip.ParseAddr(s); err == nil {
				used[a] = true
			}
		}
	}
	return used
}
