package local

import "net/netip"

// Addresses are not kept in a separate table that could drift from the
// cells: the addresses in use are the ones in the cells' records. Launch
// allocates under the state directory's address lock and writes the new
// cell's record before releasing it, so the next allocation, in this
// process or another, sees the address as taken. Terminate frees an address
// by removing the record.

// gateway is the bridge's address in netns mode: the subnet's first.
func gateway(subnet netip.Prefix) netip.Addr { return subnet.Addr().Next() }

// freeAddress returns the lowest address of subnet that is not in used,
// skipping the network address, the broadcast address and reserved; false
// when the subnet is full.
func freeAddress(subnet netip.Prefix, used map[netip.Addr]bool, reserved ...netip.Addr) (netip.Addr, bool) {
	skip := map[netip.Addr]bool{}
	for _, a := range reserved {
		skip[a] = true
	}
	for a := subnet.Addr().Next(); subnet.Contains(a); a = a.Next() {
		if !subnet.Contains(a.Next()) {
			break // the broadcast address
		}
		if !used[a] && !skip[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// usedAddresses returns the addresses of the records.
func usedAddresses(records []*record) map[netip.Addr]bool {
	used := make(map[netip.Addr]bool, len(records))
	for _, r := range records {
		if a, err := netip.ParseAddr(r.Address); err == nil {
			used[a] = true
		}
	}
	return used
}
