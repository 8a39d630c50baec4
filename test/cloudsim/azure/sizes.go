package azuresim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Size is a VM size the location offers.
type Size struct {
	Name      string
	VCPUs     int
	MemoryMiB int
	GPUs      int
	// Family is the size's quota family (standardDSv3Family); empty means
	// the one its name gives (Family).
	Family string
	// Zones are the zones that offer the size; empty means every zone of
	// Options.Zones.
	Zones []string
	// MaxDataDisks is how many data disks a VM of the size takes; zero
	// means maxDataDisks' table.
	MaxDataDisks int
}

// maxDataDisks is the size's data disk limit (resourceSkus'
// MaxDataDiskCount): MaxDataDisks, else Azure's documented limit of the
// simulator's sizes (https://learn.microsoft.com/azure/virtual-machines/sizes,
// each series' table, "Max data disks"): twice the vCPUs, at most 32, for
// every B, Dv3, Dv4, Dav4, Ddv4, Ev3, Ev4, Eav4, Fsv2, NCv3 and NVv3
// size of DefaultSizes, but Standard_B12ms (16) and Standard_NV12s_v3
// (12).
func (z Size) maxDataDisks() int {
	if z.MaxDataDisks > 0 {
		return z.MaxDataDisks
	}
	if n, ok := dataDiskExceptions[z.Name]; ok {
		return n
	}
	return max(1, min(2*z.VCPUs, 32))
}

// premiumIO reports whether the size takes premium storage (resourceSkus'
// PremiumIO capability): Azure names such sizes with an s among their
// feature letters (Standard_D2s_v3, Standard_B2s; the older DS, GS and FS
// series with it in the series), and Standard_D2_v3 takes none
// (https://learn.microsoft.com/azure/virtual-machines/dv3-dsv3-series:
// "Premium Storage: Not Supported" for Dv3).
func (z Size) premiumIO() bool {
	m := sizePattern.FindStringSubmatch(z.Name)
	if m == nil {
		return strings.Contains(strings.TrimPrefix(z.Name, "Standard_"), "s")
	}
	return strings.Contains(m[3], "s") || strings.Contains(m[1][1:], "S")
}

// dataDiskExceptions are the sizes of DefaultSizes whose data disk limit is
// not twice their vCPUs (at most 32).
var dataDiskExceptions = map[string]int{"Standard_B12ms": 16, "Standard_NV12s_v3": 12}

// family is the size's quota family.
func (z Size) family() string {
	if z.Family != "" {
		return z.Family
	}
	return Family(z.Name)
}

// sizePattern reads a size's name: its series letters, vCPUs (with a
// constrained-core count), feature letters and version.
var sizePattern = regexp.MustCompile(`^Standard_([A-Z]+)(\d+)(?:-\d+)?([a-z]*)(?:_v(\d+))?$`)

// Family is the quota family of a size named as Azure names them, as
// Azure's usage API names it: the series, the feature letters that set
// a family apart (a for AMD, d for a local disk, s for premium storage;
// not m or r), upper case, and the version: Standard_D2s_v3 is
// standardDSv3Family, Standard_D4ads_v5 standardDADSv5Family,
// Standard_NC24rs_v3 standardNCSv3Family; every B-series v1 size is
// standardBSFamily.
func Family(size string) string {
	m := sizePattern.FindStringSubmatch(size)
	if m == nil {
		return ""
	}
	if m[1] == "B" && m[4] == "" {
		return "standardBSFamily"
	}
	feats := strings.Map(func(r rune) rune {
		if strings.ContainsRune("ads", r) {
			return r
		}
		return -1
	}, m[3])
	v := ""
	if m[4] != "" {
		v = "v" + m[4]
	}
	return "standard" + m[1] + strings.ToUpper(feats) + v + "Family"
}

// offered reports whether the size is offered in zone.
func (z Size) offered(zone string) bool { return len(z.Zones) == 0 || slices.Contains(z.Zones, zone) }

// Subnet is a virtual network's subnet that exists.
type Subnet struct {
	ResourceGroup  string // empty means DefaultResourceGroup
	VirtualNetwork string
	Name           string
	AddressPrefix  string
}

// SecurityGroup is a network security group that exists.
type SecurityGroup struct {
	ResourceGroup string // empty means DefaultResourceGroup
	Name          string
}

// DefaultSubnets is subnet default of virtual network kip-vnet
// (10.0.0.0/16) in kip-rg.
var DefaultSubnets = []Subnet{{VirtualNetwork: "kip-vnet", Name: "default", AddressPrefix: "10.0.0.0/24"}}

// DefaultSecurityGroups is kip-nsg in kip-rg.
var DefaultSecurityGroups = []SecurityGroup{{Name: "kip-nsg"}}

// rgOr is rg, or DefaultResourceGroup when empty.
func rgOr(rg string) string {
	if rg == "" {
		return DefaultResourceGroup
	}
	return rg
}

// SubnetID is the ARM ID of a subnet, as a VM's ipConfiguration names it.
func (s *Server) SubnetID(sn Subnet) string {
	return s.resourceID(rgOr(sn.ResourceGroup), "Microsoft.Network/virtualNetworks", sn.VirtualNetwork) + "/subnets/" + sn.Name
}

// SecurityGroupID is the ARM ID of a network security group.
func (s *Server) SecurityGroupID(g SecurityGroup) string {
	return s.resourceID(rgOr(g.ResourceGroup), "Microsoft.Network/networkSecurityGroups", g.Name)
}

// subnetByID is the subnet whose ID is id (case-insensitive), or false.
func (s *Server) subnetByID(id string) (Subnet, bool) {
	for _, sn := range s.opts.Subnets {
		if strings.EqualFold(s.SubnetID(sn), id) {
			return sn, true
		}
	}
	return Subnet{}, false
}

// getSubnet answers Subnets_Get.
func (s *Server) getSubnet(q request) (*answer, error) {
	for _, sn := range s.opts.Subnets {
		if strings.EqualFold(rgOr(sn.ResourceGroup), q.rg) && strings.EqualFold(sn.VirtualNetwork, q.name) && strings.EqualFold(sn.Name, q.sub) {
			id := s.SubnetID(sn)
			return answerOK(map[string]any{
				"id": id, "name": sn.Name, "type": "Microsoft.Network/virtualNetworks/subnets", "etag": etag(id),
				"properties": map[string]any{"addressPrefix": sn.AddressPrefix, "provisioningState": "Succeeded",
					"privateEndpointNetworkPolicies": "Disabled", "privateLinkServiceNetworkPolicies": "Enabled"},
			}), nil
		}
	}
	return nil, notFound("Microsoft.Network/virtualNetworks/"+q.name+"/subnets", q.rg, q.sub)
}

// getSecurityGroup answers NetworkSecurityGroups_Get.
func (s *Server) getSecurityGroup(q request) (*answer, error) {
	for _, g := range s.opts.SecurityGroups {
		if strings.EqualFold(rgOr(g.ResourceGroup), q.rg) && strings.EqualFold(g.Name, q.name) {
			id := s.SecurityGroupID(g)
			return answerOK(map[string]any{
				"id": id, "name": g.Name, "type": "Microsoft.Network/networkSecurityGroups", "location": s.opts.Location, "etag": etag(id),
				"properties": map[string]any{"provisioningState": "Succeeded", "securityRules": []any{}},
			}), nil
		}
	}
	return nil, notFound("Microsoft.Network/networkSecurityGroups", q.rg, q.name)
}

// etag is a stable entity tag of a resource.
func etag(id string) string {
	var h uint32 = 2166136261
	for i := range len(id) {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return fmt.Sprintf(`W/"%08x-0000-0000-0000-000000000000"`, h)
}

// locationFilter reads resourceSkus' $filter, which ARM takes only as
// location eq '<location>'; none lists every location.
var locationFilter = regexp.MustCompile(`^\s*location\s+eq\s+'([^']*)'\s*$`)

// listSkus answers ResourceSkus_List: every size of the location as a
// virtualMachines SKU with its capabilities, its zones, and restrictions
// where SkuNotAvailable made it unavailable (a zone or the location).
func (s *Server) listSkus(q request) (*answer, error) {
	if f := q.r.URL.Query().Get("$filter"); f != "" {
		m := locationFilter.FindStringSubmatch(f)
		if m == nil {
			return nil, &armError{Status: http.StatusBadRequest, Code: "InvalidFilter",
				Message: fmt.Sprintf("The filter '%s' is not supported: only location eq '<location>' is.", f)}
		}
		if !strings.EqualFold(m[1], s.opts.Location) {
			return &answer{status: http.StatusOK, body: map[string]any{"value": []any{}}}, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]listed, 0, len(s.opts.Sizes))
	for i, sz := range s.opts.Sizes {
		items = append(items, listed{uint64(i), s.skuJSON(sz)}) //nolint:gosec // an index
	}
	return s.pageOf(q, items)
}

// skuJSON renders a size as resourceSkus lists it.
func (s *Server) skuJSON(sz Size) map[string]any {
	var zones []string
	for _, z := range s.opts.Zones {
		if sz.offered(z) {
			zones = append(zones, z)
		}
	}
	capability := func(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
	caps := []any{
		capability("vCPUs", strconv.Itoa(sz.VCPUs)),
		capability("vCPUsAvailable", strconv.Itoa(sz.VCPUs)),
		capability("MemoryGB", strconv.FormatFloat(float64(sz.MemoryMiB)/1024, 'f', -1, 64)),
		capability("GPUs", strconv.Itoa(sz.GPUs)),
		capability("CpuArchitectureType", "x64"),
		capability("HyperVGenerations", "V1,V2"),
		capability("LowPriorityCapable", "True"),
		// ARM writes a boolean capability True or False (as
		// LowPriorityCapable above).
		capability("PremiumIO", map[bool]string{true: "True", false: "False"}[sz.premiumIO()]),
		capability("MaxDataDiskCount", strconv.Itoa(sz.maxDataDisks())),
	}
	restrictions := []any{}
	var restricted []string
	for _, z := range zones {
		if s.skuUnavailable(sz.Name, z) {
			restricted = append(restricted, z)
		}
	}
	switch {
	case s.skuUnavailable(sz.Name, "") && len(restricted) == len(zones):
		restrictions = append(restrictions, map[string]any{
			"type": "Location", "values": []string{s.opts.Location}, "reasonCode": "NotAvailableForSubscription",
			"restrictionInfo": map[string]any{"locations": []string{s.opts.Location}},
		})
	case len(restricted) > 0:
		restrictions = append(restrictions, map[string]any{
			"type": "Zone", "values": []string{s.opts.Location}, "reasonCode": "NotAvailableForSubscription",
			"restrictionInfo": map[string]any{"locations": []string{s.opts.Location}, "zones": restricted},
		})
	}
	return map[string]any{
		"resourceType": "virtualMachines", "name": sz.Name, "tier": "Standard",
		"size": strings.TrimPrefix(sz.Name, "Standard_"), "family": sz.family(),
		"locations":    []string{s.opts.Location},
		"locationInfo": []any{map[string]any{"location": s.opts.Location, "zones": zones, "zoneDetails": []any{}}},
		"capabilities": caps, "restrictions": restrictions,
	}
}

// DefaultSizes are the VM sizes of plugins/azure/catalog/azure.json (a
// test keeps them equal), with Azure's vCPUs, memory and GPUs, offered in
// every zone.
var DefaultSizes = []Size{
	{Name: "Standard_B12ms", VCPUs: 12, MemoryMiB: 49152},
	{Name: "Standard_B16ms", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_B1ms", VCPUs: 1, MemoryMiB: 2048},
	{Name: "Standard_B1s", VCPUs: 1, MemoryMiB: 1024},
	{Name: "Standard_B20ms", VCPUs: 20, MemoryMiB: 81920},
	{Name: "Standard_B2ms", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_B2s", VCPUs: 2, MemoryMiB: 4096},
	{Name: "Standard_B4ms", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_B8ms", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D16_v3", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16_v4", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16a_v4", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16as_v4", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16d_v4", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16ds_v4", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16s_v3", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D16s_v4", VCPUs: 16, MemoryMiB: 65536},
	{Name: "Standard_D2_v3", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2_v4", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2a_v4", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2as_v4", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2d_v4", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2ds_v4", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2s_v3", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D2s_v4", VCPUs: 2, MemoryMiB: 8192},
	{Name: "Standard_D32_v3", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32_v4", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32a_v4", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32as_v4", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32d_v4", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32ds_v4", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32s_v3", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D32s_v4", VCPUs: 32, MemoryMiB: 131072},
	{Name: "Standard_D48_v3", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48_v4", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48a_v4", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48as_v4", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48d_v4", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48ds_v4", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48s_v3", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D48s_v4", VCPUs: 48, MemoryMiB: 196608},
	{Name: "Standard_D4_v3", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4_v4", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4a_v4", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4as_v4", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4d_v4", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4ds_v4", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4s_v3", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D4s_v4", VCPUs: 4, MemoryMiB: 16384},
	{Name: "Standard_D64_v3", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64_v4", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64a_v4", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64as_v4", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64d_v4", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64ds_v4", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64s_v3", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D64s_v4", VCPUs: 64, MemoryMiB: 262144},
	{Name: "Standard_D8_v3", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8_v4", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8a_v4", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8as_v4", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8d_v4", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8ds_v4", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8s_v3", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D8s_v4", VCPUs: 8, MemoryMiB: 32768},
	{Name: "Standard_D96a_v4", VCPUs: 96, MemoryMiB: 393216},
	{Name: "Standard_D96as_v4", VCPUs: 96, MemoryMiB: 393216},
	{Name: "Standard_E16_v3", VCPUs: 16, MemoryMiB: 131072},
	{Name: "Standard_E16_v4", VCPUs: 16, MemoryMiB: 131072},
	{Name: "Standard_E16a_v4", VCPUs: 16, MemoryMiB: 131072},
	{Name: "Standard_E16as_v4", VCPUs: 16, MemoryMiB: 131072},
	{Name: "Standard_E16s_v3", VCPUs: 16, MemoryMiB: 131072},
	{Name: "Standard_E16s_v4", VCPUs: 16, MemoryMiB: 131072},
	{Name: "Standard_E20_v3", VCPUs: 20, MemoryMiB: 163840},
	{Name: "Standard_E20_v4", VCPUs: 20, MemoryMiB: 163840},
	{Name: "Standard_E20a_v4", VCPUs: 20, MemoryMiB: 163840},
	{Name: "Standard_E20as_v4", VCPUs: 20, MemoryMiB: 163840},
	{Name: "Standard_E20s_v3", VCPUs: 20, MemoryMiB: 163840},
	{Name: "Standard_E20s_v4", VCPUs: 20, MemoryMiB: 163840},
	{Name: "Standard_E2_v3", VCPUs: 2, MemoryMiB: 16384},
	{Name: "Standard_E2_v4", VCPUs: 2, MemoryMiB: 16384},
	{Name: "Standard_E2a_v4", VCPUs: 2, MemoryMiB: 16384},
	{Name: "Standard_E2as_v4", VCPUs: 2, MemoryMiB: 16384},
	{Name: "Standard_E2s_v3", VCPUs: 2, MemoryMiB: 16384},
	{Name: "Standard_E2s_v4", VCPUs: 2, MemoryMiB: 16384},
	{Name: "Standard_E32_v3", VCPUs: 32, MemoryMiB: 262144},
	{Name: "Standard_E32_v4", VCPUs: 32, MemoryMiB: 262144},
	{Name: "Standard_E32a_v4", VCPUs: 32, MemoryMiB: 262144},
	{Name: "Standard_E32as_v4", VCPUs: 32, MemoryMiB: 262144},
	{Name: "Standard_E32s_v3", VCPUs: 32, MemoryMiB: 262144},
	{Name: "Standard_E32s_v4", VCPUs: 32, MemoryMiB: 262144},
	{Name: "Standard_E48_v3", VCPUs: 48, MemoryMiB: 393216},
	{Name: "Standard_E48_v4", VCPUs: 48, MemoryMiB: 393216},
	{Name: "Standard_E48a_v4", VCPUs: 48, MemoryMiB: 393216},
	{Name: "Standard_E48as_v4", VCPUs: 48, MemoryMiB: 393216},
	{Name: "Standard_E48s_v3", VCPUs: 48, MemoryMiB: 393216},
	{Name: "Standard_E48s_v4", VCPUs: 48, MemoryMiB: 393216},
	{Name: "Standard_E4_v3", VCPUs: 4, MemoryMiB: 32768},
	{Name: "Standard_E4_v4", VCPUs: 4, MemoryMiB: 32768},
	{Name: "Standard_E4a_v4", VCPUs: 4, MemoryMiB: 32768},
	{Name: "Standard_E4as_v4", VCPUs: 4, MemoryMiB: 32768},
	{Name: "Standard_E4s_v3", VCPUs: 4, MemoryMiB: 32768},
	{Name: "Standard_E4s_v4", VCPUs: 4, MemoryMiB: 32768},
	{Name: "Standard_E64_v3", VCPUs: 64, MemoryMiB: 442368},
	{Name: "Standard_E64_v4", VCPUs: 64, MemoryMiB: 516096},
	{Name: "Standard_E64a_v4", VCPUs: 64, MemoryMiB: 524288},
	{Name: "Standard_E64as_v4", VCPUs: 64, MemoryMiB: 524288},
	{Name: "Standard_E64s_v3", VCPUs: 64, MemoryMiB: 442368},
	{Name: "Standard_E64s_v4", VCPUs: 64, MemoryMiB: 516096},
	{Name: "Standard_E8_v3", VCPUs: 8, MemoryMiB: 65536},
	{Name: "Standard_E8_v4", VCPUs: 8, MemoryMiB: 65536},
	{Name: "Standard_E8a_v4", VCPUs: 8, MemoryMiB: 65536},
	{Name: "Standard_E8as_v4", VCPUs: 8, MemoryMiB: 65536},
	{Name: "Standard_E8s_v3", VCPUs: 8, MemoryMiB: 65536},
	{Name: "Standard_E8s_v4", VCPUs: 8, MemoryMiB: 65536},
	{Name: "Standard_E96a_v4", VCPUs: 96, MemoryMiB: 688128},
	{Name: "Standard_E96as_v4", VCPUs: 96, MemoryMiB: 688128},
	{Name: "Standard_F16s_v2", VCPUs: 16, MemoryMiB: 32768},
	{Name: "Standard_F2s_v2", VCPUs: 2, MemoryMiB: 4096},
	{Name: "Standard_F32s_v2", VCPUs: 32, MemoryMiB: 65536},
	{Name: "Standard_F48s_v2", VCPUs: 48, MemoryMiB: 98304},
	{Name: "Standard_F4s_v2", VCPUs: 4, MemoryMiB: 8192},
	{Name: "Standard_F64s_v2", VCPUs: 64, MemoryMiB: 131072},
	{Name: "Standard_F72s_v2", VCPUs: 72, MemoryMiB: 147456},
	{Name: "Standard_F8s_v2", VCPUs: 8, MemoryMiB: 16384},
	{Name: "Standard_NC12s_v3", VCPUs: 12, MemoryMiB: 229376, GPUs: 2},
	{Name: "Standard_NC24rs_v3", VCPUs: 24, MemoryMiB: 458752, GPUs: 4},
	{Name: "Standard_NC24s_v3", VCPUs: 24, MemoryMiB: 458752, GPUs: 4},
	{Name: "Standard_NC6s_v3", VCPUs: 6, MemoryMiB: 114688, GPUs: 1},
	{Name: "Standard_NV12s_v3", VCPUs: 12, MemoryMiB: 114688, GPUs: 1},
	{Name: "Standard_NV24s_v3", VCPUs: 24, MemoryMiB: 229376, GPUs: 2},
	{Name: "Standard_NV48s_v3", VCPUs: 48, MemoryMiB: 458752, GPUs: 4},
}
