package share

import (
	"net/netip"
)

// Endpoints only an instance may reach that are not link-local: Azure's
// WireServer (its DNS resolver and the VM agent's channel) and EC2's
// instance metadata over IPv6 (Nitro instances).
var (
	WireServer      = netip.MustParseAddr("168.63.129.16")
	EC2MetadataIPv6 = netip.MustParseAddr("fd00:ec2::254")
)

// Refused says why a pod's cell may not mount an NFS share from addr, or
// "" when it may.
func Refused(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return "it is not an address"
	case addr.IsLoopback():
		return "it is a loopback address, the instance itself"
	case addr.IsUnspecified():
		return "it is the unspecified address, the instance itself"
	case addr.IsLinkLocalUnicast():
		return "it is a link-local address, where the cloud's instance metadata lives"
	case addr.IsMulticast(), addr.IsInterfaceLocalMulticast(), addr.IsLinkLocalMulticast():
		return "it is a multicast address"
	case addr == WireServer:
		return "it is Azure's WireServer, which only the instance may reach"
	case addr == EC2MetadataIPv6:
		return "it is EC2's instance metadata"
	}
	return ""
}
