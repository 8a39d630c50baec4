package azuresim

import (
	"fmt"
	"time"
)

// nic is a network interface created from a VM's
// networkInterfaceConfigurations. It exists while its VM does; once the
// VM is gone it is deleted with it (deleteOption Delete) or stays,
// detached (Detach, the default).
type nic struct {
	key      vmKey
	rg, name string
	seq      uint64
	vm       *vm
	ipConfig string
	subnetID string
	// secondaries are the names and subnets of the NIC's other IP
	// configurations, whose addresses are the VM's secondaryAddress.
	secondaries []ipConfig
	nsgID       string
	deleteOpt   string // Delete or Detach
	mac         string
}

func (n *nic) deleteOption() string { return n.deleteOpt }

// exists reports whether the NIC exists at now, and whether it is still
// attached to its VM.
func (n *nic) exists(now time.Time) (exists, attached bool) {
	if !n.vm.gone(now) {
		return true, true
	}
	return n.deleteOpt != "Delete" && !n.vm.replaced, false
}

// addNIC creates v's NIC from its configuration, replacing one of the
// same name that is left detached. The caller holds s.mu.
func (s *Server) addNIC(v *vm, nc *nicConfigSpec) {
	n := &nic{
		key: keyOf(v.rg, nc.Name), rg: v.rg, name: nc.Name, seq: v.seq, vm: v,
		ipConfig: nc.Props.IPConfigs[0].Name, subnetID: nc.Props.IPConfigs[0].Props.Subnet.ID,
		deleteOpt: nc.Props.DeleteOption,
		mac:       fmt.Sprintf("00-0D-3A-%02X-%02X-%02X", byte(v.seq>>16), byte(v.seq>>8), byte(v.seq)),
	}
	for i, ic := range nc.Props.IPConfigs {
		if ic.Props.Primary != nil && *ic.Props.Primary {
			n.ipConfig, n.subnetID = ic.Name, ic.Props.Subnet.ID
			n.secondaries = nil
			for j, other := range nc.Props.IPConfigs {
				if j != i {
					n.secondaries = append(n.secondaries, ipConfig{name: other.Name, subnetID: other.Props.Subnet.ID})
				}
			}
		}
	}
	v.secondaries = len(n.secondaries)
	if n.deleteOpt == "" {
		n.deleteOpt = "Detach"
	}
	if nc.Props.NSG != nil {
		n.nsgID = nc.Props.NSG.ID
	}
	s.nics[n.key] = n
	s.nicOrder = append(s.nicOrder, n)
}

// listNICs answers NetworkInterfaces_List: the resource group's NICs.
func (s *Server) listNICs(q request) (*answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var items []listed
	for _, n := range s.nicOrder {
		if s.nics[n.key] != n || n.key.rg != keyOf(q.rg, "").rg {
			continue
		}
		if ok, attached := n.exists(now); ok {
			items = append(items, listed{n.seq, s.nicJSON(n, attached)})
		}
	}
	return s.pageOf(q, items)
}

// getNIC answers NetworkInterfaces_Get.
func (s *Server) getNIC(q request) (*answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nics[keyOf(q.rg, q.name)]
	if n != nil {
		if ok, attached := n.exists(s.now()); ok {
			return answerOK(s.nicJSON(n, attached)), nil
		}
	}
	return nil, notFound("Microsoft.Network/networkInterfaces", q.rg, q.name)
}

// ipConfig is one of a NIC's IP configurations.
type ipConfig struct{ name, subnetID string }

// nicJSON renders a NIC as Network does: its ipConfigurations with their
// private IPs (the cell's address and its secondary addresses, absent
// until the cell started), subnets, security group and VM.
func (s *Server) nicJSON(n *nic, attached bool) map[string]any {
	id := s.resourceID(n.rg, "Microsoft.Network/networkInterfaces", n.name)
	// ipConfigJSON renders one IP configuration, with its address once the
	// cell has one.
	ipConfigJSON := func(name, subnetID, address string, primary bool) map[string]any {
		p := map[string]any{
			"privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4", "primary": primary,
			"provisioningState": "Succeeded", "subnet": map[string]any{"id": subnetID},
		}
		if address != "" {
			p["privateIPAddress"] = address
		}
		return map[string]any{
			"id": id + "/ipConfigurations/" + name, "name": name, "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
			"etag": etag(id), "properties": p,
		}
	}
	configs := []any{ipConfigJSON(n.ipConfig, n.subnetID, n.vm.cell.Address, true)}
	for k, ic := range n.secondaries {
		configs = append(configs, ipConfigJSON(ic.name, ic.subnetID, n.vm.secondaryAddress(k), false))
	}
	props := map[string]any{
		"provisioningState": "Succeeded", "primary": true, "macAddress": n.mac, "nicType": "Standard",
		"enableAcceleratedNetworking": false, "enableIPForwarding": false,
		"ipConfigurations": configs,
	}
	if attached {
		props["virtualMachine"] = map[string]any{"id": s.resourceID(n.vm.rg, "Microsoft.Compute/virtualMachines", n.vm.name)}
	}
	if n.nsgID != "" {
		props["networkSecurityGroup"] = map[string]any{"id": n.nsgID}
	}
	return map[string]any{
		"id": id, "name": n.name, "type": "Microsoft.Network/networkInterfaces", "location": s.opts.Location,
		"etag": etag(id), "properties": props,
	}
}
