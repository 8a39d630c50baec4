package ec2sim

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// InstanceType is an instance type the simulated region offers.
type InstanceType struct {
	Name      string
	VCPUs     int32
	MemoryMiB int64
	// Arch is x86_64 or arm64; empty means x86_64.
	Arch string
	// Zones are the zones that offer the type; empty means every zone.
	Zones []string
	// IPv4PerInterface is how many private IPv4 addresses one network
	// interface of the type takes (EC2's per-type limit); 0 means 2, the
	// least of any type (t3.nano, t3.micro).
	IPv4PerInterface int
	// Attachments is how many EBS volumes and network interfaces the
	// type attaches at once, its root volume and its one network interface
	// included; 0 means 28, a Nitro type's shared limit (every default
	// type is Nitro). The simulator's rule is that one number, where EC2
	// also counts NVMe instance-store volumes and has dedicated EBS limits
	// on some newer types (ec2/latest/instancetypes/ec2-instance-volume-limits.html).
	Attachments int
}

func (t InstanceType) ipv4PerInterface() int { return cmp.Or(t.IPv4PerInterface, 2) }

// nitroAttachments is the attachment limit most Nitro instance types share
// among EBS volumes, network interfaces and NVMe instance-store volumes
// (ec2-instance-volume-limits.html, "Shared volume limits").
const nitroAttachments = 28

// volumeSlots is how many volumes an instance of the type may have
// attached, its root volume included: the shared limit less the network
// interface.
func (t InstanceType) volumeSlots() int { return cmp.Or(t.Attachments, nitroAttachments) - 1 }

// Subnet is a subnet of the simulated VPC.
type Subnet struct {
	ID   string
	Zone string
	// CIDR is the subnet's IPv4 range; instances without a cell get their
	// address from it. Empty means 10.0.<n>.0/24 for the n-th subnet.
	CIDR string
	// VPCID empty means Options.VPCID.
	VPCID string
	Tags  map[string]string
	// DefaultForAZ marks the subnet RunInstances picks when the request
	// names none.
	DefaultForAZ bool
}

// Image is a machine image (AMI) DescribeImages finds and RunInstances
// accepts.
type Image struct {
	ID      string
	Name    string
	OwnerID string
	// OwnerAlias is "amazon" for Amazon's images, empty otherwise.
	OwnerAlias string
	// Arch is x86_64 or arm64; empty means x86_64.
	Arch         string
	CreationDate time.Time
	// State empty means available.
	State  string
	Public bool
	Tags   map[string]string
}

// Debian's AWS account, the owner of the official Debian AMIs.
const DebianOwnerID = "136693071363"

// DefaultImages are Debian 12 images as Debian publishes them: for each
// architecture an older and a newer build, so that "newest CreationDate
// wins" has something to choose from.
var DefaultImages = []Image{
	{ID: "ami-0de0000000000a001", Name: "debian-12-amd64-20260101-2345", OwnerID: DebianOwnerID, Arch: "x86_64", CreationDate: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), Public: true},
	{ID: "ami-0de0000000000a002", Name: "debian-12-amd64-20261101-2650", OwnerID: DebianOwnerID, Arch: "x86_64", CreationDate: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC), Public: true},
	{ID: "ami-0de0000000000b001", Name: "debian-12-arm64-20260101-2345", OwnerID: DebianOwnerID, Arch: "arm64", CreationDate: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), Public: true},
	{ID: "ami-0de0000000000b002", Name: "debian-12-arm64-20261101-2650", OwnerID: DebianOwnerID, Arch: "arm64", CreationDate: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC), Public: true},
}

// DefaultInstanceTypes are common current-generation types with EC2's
// vCPU and memory, offered in every zone.
var DefaultInstanceTypes = []InstanceType{
	{Name: "t3.nano", VCPUs: 2, MemoryMiB: 512},
	{Name: "t3.micro", VCPUs: 2, MemoryMiB: 1024},
	{Name: "t3.small", VCPUs: 2, MemoryMiB: 2048},
	{Name: "t3.medium", VCPUs: 2, MemoryMiB: 4096},
	{Name: "t3.large", VCPUs: 2, MemoryMiB: 8192},
	{Name: "t3.xlarge", VCPUs: 4, MemoryMiB: 16384},
	{Name: "t3.2xlarge", VCPUs: 8, MemoryMiB: 32768},
	{Name: "t3a.nano", VCPUs: 2, MemoryMiB: 512},
	{Name: "t3a.micro", VCPUs: 2, MemoryMiB: 1024},
	{Name: "t3a.small", VCPUs: 2, MemoryMiB: 2048},
	{Name: "t3a.medium", VCPUs: 2, MemoryMiB: 4096},
	{Name: "t3a.large", VCPUs: 2, MemoryMiB: 8192},
	{Name: "t4g.nano", VCPUs: 2, MemoryMiB: 512, Arch: "arm64"},
	{Name: "t4g.micro", VCPUs: 2, MemoryMiB: 1024, Arch: "arm64"},
	{Name: "t4g.small", VCPUs: 2, MemoryMiB: 2048, Arch: "arm64"},
	{Name: "t4g.medium", VCPUs: 2, MemoryMiB: 4096, Arch: "arm64"},
	{Name: "m5.large", VCPUs: 2, MemoryMiB: 8192},
	{Name: "m5.xlarge", VCPUs: 4, MemoryMiB: 16384},
	{Name: "m5.2xlarge", VCPUs: 8, MemoryMiB: 32768},
	{Name: "m6i.large", VCPUs: 2, MemoryMiB: 8192},
	{Name: "m6i.xlarge", VCPUs: 4, MemoryMiB: 16384},
	{Name: "m7i.large", VCPUs: 2, MemoryMiB: 8192},
	{Name: "m7g.large", VCPUs: 2, MemoryMiB: 8192, Arch: "arm64"},
	{Name: "c5.large", VCPUs: 2, MemoryMiB: 4096},
	{Name: "c5.xlarge", VCPUs: 4, MemoryMiB: 8192},
	{Name: "c6i.large", VCPUs: 2, MemoryMiB: 4096},
	{Name: "c7g.large", VCPUs: 2, MemoryMiB: 4096, Arch: "arm64"},
	{Name: "r5.large", VCPUs: 2, MemoryMiB: 16384},
	{Name: "r6i.large", VCPUs: 2, MemoryMiB: 16384},
	{Name: "g4dn.xlarge", VCPUs: 4, MemoryMiB: 16384},
	{Name: "g5.xlarge", VCPUs: 4, MemoryMiB: 16384},
}

// region is the static part of the simulated region, built from Options.
type region struct {
	name      string
	account   string
	vpcID     string
	zones     []string
	zoneIDs   map[string]string
	subnets   []*subnet
	images    []Image
	types     map[string]InstanceType
	typeOrder []string
}

// subnet is a Subnet with its address pool.
type subnet struct {
	Subnet
	prefix netip.Prefix
	used   map[netip.Addr]bool
}

func (s *subnet) size() int {
	// AWS reserves the first four addresses and the last one.
	return 1<<(32-s.prefix.Bits()) - 5
}

// allocate returns a free address for an instance without a cell.
func (s *subnet) allocate() (netip.Addr, bool) {
	a := s.prefix.Addr()
	for range 4 {
		a = a.Next()
	}
	for ; s.prefix.Contains(a.Next()); a = a.Next() {
		if !s.used[a] {
			s.used[a] = true
			return a, true
		}
	}
	return netip.Addr{}, false
}

func newRegion(o *Options) (*region, error) {
	r := &region{
		name:    o.Region,
		account: o.AccountID,
		vpcID:   o.VPCID,
		zones:   o.Zones,
		zoneIDs: map[string]string{},
		images:  o.Images,
		types:   map[string]InstanceType{},
	}
	for i, z := range r.zones {
		if !strings.HasPrefix(z, r.name) {
			return nil, fmt.Errorf("checking zone %q: not in region %s", z, r.name)
		}
		r.zoneIDs[z] = fmt.Sprintf("%s-az%d", regionCode(r.name), i+1)
	}
	for _, t := range o.InstanceTypes {
		if t.Arch == "" {
			t.Arch = "x86_64"
		}
		for _, z := range t.Zones {
			if !slices.Contains(r.zones, z) {
				return nil, fmt.Errorf("checking instance type %s: zone %q is not one of %q", t.Name, z, r.zones)
			}
		}
		if _, dup := r.types[t.Name]; dup {
			return nil, fmt.Errorf("checking instance type %s: listed twice", t.Name)
		}
		r.types[t.Name] = t
		r.typeOrder = append(r.typeOrder, t.Name)
	}
	for i := range r.images {
		if r.images[i].Arch == "" {
			r.images[i].Arch = "x86_64"
		}
		if r.images[i].State == "" {
			r.images[i].State = "available"
		}
	}
	subnets := o.Subnets
	if subnets == nil {
		for i, z := range r.zones {
			subnets = append(subnets, Subnet{
				ID: fmt.Sprintf("subnet-0000000000000%04x", i+1), Zone: z, DefaultForAZ: true,
				Tags: map[string]string{"Name": "ec2sim-" + z},
			})
		}
	}
	for i, sn := range subnets {
		if !slices.Contains(r.zones, sn.Zone) {
			return nil, fmt.Errorf("checking subnet %s: zone %q is not one of %q", sn.ID, sn.Zone, r.zones)
		}
		if sn.CIDR == "" {
			sn.CIDR = fmt.Sprintf("10.0.%d.0/24", i+1)
		}
		if sn.VPCID == "" {
			sn.VPCID = r.vpcID
		}
		p, err := netip.ParsePrefix(sn.CIDR)
		if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
			return nil, fmt.Errorf("checking subnet %s: CIDR %q is not an IPv4 range of /28 or larger", sn.ID, sn.CIDR)
		}
		r.subnets = append(r.subnets, &subnet{Subnet: sn, prefix: p.Masked(), used: map[netip.Addr]bool{}})
	}
	return r, nil
}

// regionCode is the prefix of a region's zone IDs: us-east-1 → use1,
// ap-southeast-2 → apse2.
func regionCode(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) < 3 {
		return region
	}
	code := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		for _, dir := range []string{"north", "south"} {
			if rest, ok := strings.CutPrefix(p, dir); ok && rest != "" {
				code += dir[:1]
				p = rest
			}
		}
		if p != "" {
			code += p[:1]
		}
	}
	return code + parts[len(parts)-1]
}

func (r *region) subnet(id string) *subnet {
	for _, s := range r.subnets {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func (r *region) image(id string) (Image, bool) {
	for _, im := range r.images {
		if im.ID == id {
			return im, true
		}
	}
	return Image{}, false
}

// offered reports whether zone offers instance type t.
func (t InstanceType) offered(zone string) bool {
	return len(t.Zones) == 0 || slices.Contains(t.Zones, zone)
}

// zonesOffering lists the region's zones that offer t.
func (r *region) zonesOffering(t InstanceType) []string {
	var out []string
	for _, z := range r.zones {
		if t.offered(z) {
			out = append(out, z)
		}
	}
	return out
}

// ---- DescribeAvailabilityZones ----

type xmlZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	ZoneType           string `xml:"zoneType"`
}

type describeZonesResponse struct {
	XMLName xml.Name `xml:"DescribeAvailabilityZonesResponse"`
	responseMeta
	Zones []xmlZone `xml:"availabilityZoneInfo>item"`
}

var zoneFields = map[string]fieldFunc[xmlZone]{
	"zone-name":            func(z xmlZone) []string { return []string{z.ZoneName} },
	"zone-id":              func(z xmlZone) []string { return []string{z.ZoneID} },
	"state":                func(z xmlZone) []string { return []string{z.ZoneState} },
	"region-name":          func(z xmlZone) []string { return []string{z.RegionName} },
	"group-name":           func(z xmlZone) []string { return []string{z.GroupName} },
	"zone-type":            func(z xmlZone) []string { return []string{z.ZoneType} },
	"opt-in-status":        func(z xmlZone) []string { return []string{z.OptInStatus} },
	"network-border-group": func(z xmlZone) []string { return []string{z.NetworkBorderGroup} },
}

func (s *Server) describeAvailabilityZones(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	filters := f.filters()
	if err := checkFilters(filters, zoneFields, false); err != nil {
		return nil, err
	}
	names, ids := f.list("ZoneName"), f.list("ZoneId")
	for _, n := range names {
		if !slices.Contains(s.region.zones, n) {
			return nil, clientError(codeInvalidParameter, "The zone '%s' does not exist.", n)
		}
	}
	resp := &describeZonesResponse{}
	for _, z := range s.region.zones {
		x := xmlZone{
			ZoneName: z, ZoneID: s.region.zoneIDs[z], ZoneState: "available", RegionName: s.region.name,
			GroupName: s.region.name, NetworkBorderGroup: s.region.name, OptInStatus: "opt-in-not-required", ZoneType: "availability-zone",
		}
		if (len(names) > 0 || len(ids) > 0) && !slices.Contains(names, z) && !slices.Contains(ids, x.ZoneID) {
			continue
		}
		if matchFilters(x, filters, zoneFields, nil) {
			resp.Zones = append(resp.Zones, x)
		}
	}
	return resp, nil
}

// ---- DescribeInstanceTypeOfferings ----

type xmlOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
	pos          int64
}

type describeOfferingsResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceTypeOfferingsResponse"`
	responseMeta
	Offerings []xmlOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}

var offeringFields = map[string]fieldFunc[xmlOffering]{
	"instance-type": func(o xmlOffering) []string { return []string{o.InstanceType} },
	"location":      func(o xmlOffering) []string { return []string{o.Location} },
}

func (s *Server) describeInstanceTypeOfferings(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	filters := f.filters()
	if err := checkFilters(filters, offeringFields, false); err != nil {
		return nil, err
	}
	maxResults, after, err := pageParams(f)
	if err != nil {
		return nil, err
	}
	locType := f.get("LocationType")
	if locType == "" {
		locType = "region"
	}
	var all []xmlOffering
	add := func(t, loc string) {
		all = append(all, xmlOffering{InstanceType: t, LocationType: locType, Location: loc, pos: int64(len(all))})
	}
	for _, name := range s.region.typeOrder {
		t := s.region.types[name]
		switch locType {
		case "region":
			add(name, s.region.name)
		case "availability-zone":
			for _, z := range s.region.zonesOffering(t) {
				add(name, z)
			}
		case "availability-zone-id":
			for _, z := range s.region.zonesOffering(t) {
				add(name, s.region.zoneIDs[z])
			}
		default:
			return nil, clientError(codeInvalidParameter, "Value (%s) for parameter locationType is invalid. Valid values: region, availability-zone, availability-zone-id", locType)
		}
	}
	var matched []xmlOffering
	for _, o := range all {
		if matchFilters(o, filters, offeringFields, nil) {
			matched = append(matched, o)
		}
	}
	page, next := paginate(matched, func(o xmlOffering) int64 { return o.pos }, maxResults, after)
	return &describeOfferingsResponse{Offerings: page, NextToken: next}, nil
}

// ---- DescribeSubnets ----

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xmlTags(tags map[string]string) []xmlTag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]xmlTag, 0, len(keys))
	for _, k := range keys {
		out = append(out, xmlTag{k, tags[k]})
	}
	return out
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VpcID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	Tags                    []xmlTag `xml:"tagSet>item"`
	tags                    map[string]string
	pos                     int64
}

type describeSubnetsResponse struct {
	XMLName xml.Name `xml:"DescribeSubnetsResponse"`
	responseMeta
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

var subnetFields = map[string]fieldFunc[xmlSubnet]{
	"subnet-id":                  func(s xmlSubnet) []string { return []string{s.SubnetID} },
	"vpc-id":                     func(s xmlSubnet) []string { return []string{s.VpcID} },
	"availability-zone":          func(s xmlSubnet) []string { return []string{s.AvailabilityZone} },
	"availability-zone-id":       func(s xmlSubnet) []string { return []string{s.AvailabilityZoneID} },
	"state":                      func(s xmlSubnet) []string { return []string{s.State} },
	"cidr-block":                 func(s xmlSubnet) []string { return []string{s.CidrBlock} },
	"default-for-az":             func(s xmlSubnet) []string { return []string{fmt.Sprint(s.DefaultForAz)} },
	"owner-id":                   func(s xmlSubnet) []string { return []string{s.OwnerID} },
	"subnet-arn":                 func(s xmlSubnet) []string { return []string{s.SubnetArn} },
	"available-ip-address-count": func(s xmlSubnet) []string { return []string{fmt.Sprint(s.AvailableIPAddressCount)} },
}

// describeSubnets runs under s.mu: available address counts depend on the
// instances.
func (s *Server) describeSubnets(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	filters := f.filters()
	if err := checkFilters(filters, subnetFields, true); err != nil {
		return nil, err
	}
	maxResults, after, err := pageParams(f)
	if err != nil {
		return nil, err
	}
	ids := f.list("SubnetId")
	for _, id := range ids {
		if s.region.subnet(id) == nil {
			return nil, clientError(codeSubnetNotFound, "The subnet ID '%s' does not exist", id)
		}
	}
	inUse := map[string]int{}
	for _, in := range s.order {
		if in.state != stateTerminated {
			inUse[in.subnet.ID]++
		}
	}
	var matched []xmlSubnet
	for i, sn := range s.region.subnets {
		if len(ids) > 0 && !slices.Contains(ids, sn.ID) {
			continue
		}
		x := xmlSubnet{
			SubnetID: sn.ID, SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.region.name, s.region.account, sn.ID),
			State: "available", VpcID: sn.VPCID, OwnerID: s.region.account, CidrBlock: sn.prefix.String(),
			AvailableIPAddressCount: sn.size() - inUse[sn.ID], AvailabilityZone: sn.Zone, AvailabilityZoneID: s.region.zoneIDs[sn.Zone],
			DefaultForAz: sn.DefaultForAZ, Tags: xmlTags(sn.Tags), tags: sn.Tags, pos: int64(i),
		}
		if matchFilters(x, filters, subnetFields, func(x xmlSubnet) map[string]string { return x.tags }) {
			matched = append(matched, x)
		}
	}
	page, next := paginate(matched, func(x xmlSubnet) int64 { return x.pos }, maxResults, after)
	return &describeSubnetsResponse{Subnets: page, NextToken: next}, nil
}

// ---- DescribeImages ----

type xmlImage struct {
	ImageID            string   `xml:"imageId"`
	ImageLocation      string   `xml:"imageLocation"`
	ImageState         string   `xml:"imageState"`
	ImageOwnerID       string   `xml:"imageOwnerId"`
	ImageOwnerAlias    string   `xml:"imageOwnerAlias,omitempty"`
	CreationDate       string   `xml:"creationDate"`
	IsPublic           bool     `xml:"isPublic"`
	Architecture       string   `xml:"architecture"`
	ImageType          string   `xml:"imageType"`
	Name               string   `xml:"name"`
	RootDeviceType     string   `xml:"rootDeviceType"`
	RootDeviceName     string   `xml:"rootDeviceName"`
	VirtualizationType string   `xml:"virtualizationType"`
	Hypervisor         string   `xml:"hypervisor"`
	EnaSupport         bool     `xml:"enaSupport"`
	PlatformDetails    string   `xml:"platformDetails"`
	Tags               []xmlTag `xml:"tagSet>item"`
	image              Image
	pos                int64
}

type describeImagesResponse struct {
	XMLName xml.Name `xml:"DescribeImagesResponse"`
	responseMeta
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

var imageFields = map[string]fieldFunc[xmlImage]{
	"image-id":            func(x xmlImage) []string { return []string{x.ImageID} },
	"name":                func(x xmlImage) []string { return []string{x.Name} },
	"architecture":        func(x xmlImage) []string { return []string{x.Architecture} },
	"state":               func(x xmlImage) []string { return []string{x.ImageState} },
	"owner-id":            func(x xmlImage) []string { return []string{x.ImageOwnerID} },
	"owner-alias":         func(x xmlImage) []string { return []string{x.ImageOwnerAlias} },
	"is-public":           func(x xmlImage) []string { return []string{fmt.Sprint(x.IsPublic)} },
	"image-type":          func(x xmlImage) []string { return []string{x.ImageType} },
	"root-device-type":    func(x xmlImage) []string { return []string{x.RootDeviceType} },
	"virtualization-type": func(x xmlImage) []string { return []string{x.VirtualizationType} },
}

func (s *Server) describeImages(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	filters := f.filters()
	if err := checkFilters(filters, imageFields, true); err != nil {
		return nil, err
	}
	maxResults, after, err := pageParams(f)
	if err != nil {
		return nil, err
	}
	ids, owners := f.list("ImageId"), f.list("Owner")
	if len(ids) > 0 && f.has("MaxResults") {
		return nil, clientError(codeInvalidCombination, "The parameter imageIdsSet cannot be used with the parameter maxResults")
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "ami-") {
			return nil, clientError(codeAMIMalformed, "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
		if _, ok := s.region.image(id); !ok {
			return nil, clientError(codeAMINotFound, "The image id '[%s]' does not exist", id)
		}
	}
	var matched []xmlImage
	for i, im := range s.region.images {
		if len(ids) > 0 && !slices.Contains(ids, im.ID) {
			continue
		}
		if len(owners) > 0 && !slices.ContainsFunc(owners, func(o string) bool {
			return o == im.OwnerID || (o == "self" && im.OwnerID == s.region.account) || (o != "" && o == im.OwnerAlias)
		}) {
			continue
		}
		if len(ids) == 0 && len(owners) == 0 && !im.Public && im.OwnerID != s.region.account {
			continue
		}
		x := xmlImage{
			ImageID: im.ID, ImageLocation: im.OwnerID + "/" + im.Name, ImageState: im.State, ImageOwnerID: im.OwnerID,
			ImageOwnerAlias: im.OwnerAlias, CreationDate: im.CreationDate.UTC().Format("2006-01-02T15:04:05.000Z"),
			IsPublic: im.Public, Architecture: im.Arch, ImageType: "machine", Name: im.Name, RootDeviceType: "ebs",
			RootDeviceName: defaultInstanceRootName, VirtualizationType: "hvm", Hypervisor: "xen", EnaSupport: true,
			PlatformDetails: "Linux/UNIX", Tags: xmlTags(im.Tags), image: im, pos: int64(i),
		}
		if matchFilters(x, filters, imageFields, func(x xmlImage) map[string]string { return x.image.Tags }) {
			matched = append(matched, x)
		}
	}
	page, next := paginate(matched, func(x xmlImage) int64 { return x.pos }, maxResults, after)
	return &describeImagesResponse{Images: page, NextToken: next}, nil
}
