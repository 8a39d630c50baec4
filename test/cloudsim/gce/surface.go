package gcesim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Image is a disk image images.get and images.getFromFamily find and
// instances.insert accepts as a boot disk's sourceImage.
type Image struct {
	// Project owns the image: debian-cloud for Debian's; empty means
	// Options.Project.
	Project string
	Name    string
	Family  string
	// Arch is X86_64 or ARM64; empty means X86_64.
	Arch        string
	Description string
	Created     time.Time
	// Deprecated is the image's deprecation state: "" (current),
	// DEPRECATED, OBSOLETE or DELETED. getFromFamily skips all three;
	// insert refuses OBSOLETE and DELETED.
	Deprecated string
	// DiskSizeGB defaults to 10.
	DiskSizeGB int
}

// Debian's image project.
const DebianProject = "debian-cloud"

// DefaultImages are Debian's images as debian-cloud publishes them: per
// family an older build, DEPRECATED as Debian deprecates it when the next
// is out, and the current one, which getFromFamily returns.
var DefaultImages = []Image{
	debianImage("debian-12", "12 (bookworm)", "amd64", "debian-12-bookworm-v20260915", "DEPRECATED"),
	debianImage("debian-12", "12 (bookworm)", "amd64", "debian-12-bookworm-v20261103", ""),
	debianImage("debian-12-arm64", "12 (bookworm)", "arm64", "debian-12-bookworm-arm64-v20260915", "DEPRECATED"),
	debianImage("debian-12-arm64", "12 (bookworm)", "arm64", "debian-12-bookworm-arm64-v20261103", ""),
	debianImage("debian-13", "13 (trixie)", "amd64", "debian-13-trixie-v20261103", ""),
}

// debianImage is one of Debian's images, created the day its name says.
func debianImage(family, release, arch, name, deprecated string) Image {
	day := name[len(name)-8:]
	created, _ := time.Parse("20060102", day)
	return Image{
		Project: DebianProject, Name: name, Family: family, Arch: map[string]string{"amd64": "X86_64", "arm64": "ARM64"}[arch],
		Description: fmt.Sprintf("Debian, Debian GNU/Linux, %s, %s built on %s", release, arch, day),
		Created:     created.Add(21 * time.Hour), Deprecated: deprecated,
	}
}

// Subnetwork is a subnetwork of the project's VPC networks.
type Subnetwork struct {
	Name string
	// Region empty means Options.Region.
	Region string
	// Network names the subnetwork's network; empty means default.
	Network string
	// IPCIDRRange empty means 10.128.0.0/20, the default network's range
	// in us-central1.
	IPCIDRRange string
}

// Network is a VPC network of the project.
type Network struct {
	Name string
	// AutoCreateSubnetworks marks an auto-mode network, as default is.
	AutoCreateSubnetworks bool
}

// DefaultSubnetworks and DefaultNetworks are a new project's: the
// auto-mode network default and its subnetwork default in the region.
var (
	DefaultSubnetworks = []Subnetwork{{Name: "default"}}
	DefaultNetworks    = []Network{{Name: "default", AutoCreateSubnetworks: true}}
)

// surface is the static part of the project, built from Options: its
// machine types, images and networks.
type surface struct {
	typeOrder   []MachineType
	types       map[string]MachineType
	typeIndex   map[string]int
	images      []Image
	subnetworks []Subnetwork
	networks    []Network
}

// newSurface applies the defaults of the machine types, images and
// networks to opts and indexes them.
func newSurface(opts *Options) *surface {
	if opts.MachineTypes == nil {
		opts.MachineTypes = DefaultMachineTypes
	}
	if opts.Images == nil {
		opts.Images = DefaultImages
	}
	if opts.Subnetworks == nil {
		opts.Subnetworks = DefaultSubnetworks
	}
	if opts.Networks == nil {
		opts.Networks = DefaultNetworks
	}
	sf := &surface{types: map[string]MachineType{}, typeIndex: map[string]int{}}
	for i, t := range opts.MachineTypes {
		sf.typeOrder = append(sf.typeOrder, t)
		sf.types[t.Name], sf.typeIndex[t.Name] = t, i
	}
	for _, im := range opts.Images {
		im.Project = cmp.Or(im.Project, opts.Project)
		im.DiskSizeGB = cmp.Or(im.DiskSizeGB, 10)
		sf.images = append(sf.images, im)
	}
	sf.networks = slices.Clone(opts.Networks)
	for _, sn := range opts.Subnetworks {
		sn.Region = cmp.Or(sn.Region, opts.Region)
		sn.Network = cmp.Or(sn.Network, "default")
		sn.IPCIDRRange = cmp.Or(sn.IPCIDRRange, "10.128.0.0/20")
		sf.subnetworks = append(sf.subnetworks, sn)
		if !slices.ContainsFunc(sf.networks, func(n Network) bool { return n.Name == sn.Network }) {
			sf.networks = append(sf.networks, Network{Name: sn.Network})
		}
	}
	return sf
}

// crossProject are the methods that answer for projects other than
// Options.Project: public images live in their publishers' projects.
var crossProject = map[string]bool{"compute.images.get": true, "compute.images.getFromFamily": true}

// surfaceRoutes are the read methods of this file (machine types, zones,
// regions, images, networks, the serial port), all GET: the path after
// projects/{project}, with * for each variable; the variables are the
// handler's arguments, the zone first where the method is zonal.
var surfaceRoutes = []struct {
	path, method string
	zonal        bool
	handle       func(*Server, request) (any, error)
}{
	{"zones/*/machineTypes", "compute.machineTypes.list", true, (*Server).listMachineTypes},
	{"zones/*/machineTypes/*", "compute.machineTypes.get", true, (*Server).getMachineType},
	{"aggregated/machineTypes", "compute.machineTypes.aggregatedList", false, (*Server).aggregatedMachineTypes},
	{"zones", "compute.zones.list", false, (*Server).listZones},
	{"zones/*", "compute.zones.get", false, (*Server).getZone},
	{"regions/*", "compute.regions.get", false, (*Server).getRegion},
	{"global/images/*", "compute.images.get", false, (*Server).getImage},
	{"global/images/family/*", "compute.images.getFromFamily", false, (*Server).getImageFromFamily},
	{"regions/*/subnetworks/*", "compute.subnetworks.get", false, (*Server).getSubnetwork},
	{"global/networks/*", "compute.networks.get", false, (*Server).getNetwork},
	{"zones/*/instances/*/serialPort", "compute.instances.getSerialPortOutput", true, (*Server).getSerialPortOutput},
}

// surfaceRoute maps a method and the path after projects/{project} to one
// of surfaceRoutes, or false.
func surfaceRoute(method string, p []string) (routed, bool) {
	if method != http.MethodGet {
		return routed{}, false
	}
	for _, r := range surfaceRoutes {
		if args, ok := matchPath(r.path, p); ok {
			return routed{r.method, r.zonal, args, r.handle}, true
		}
	}
	return routed{}, false
}

// matchPath matches p against pattern (segments, * for a variable) and
// returns the variables.
func matchPath(pattern string, p []string) ([]string, bool) {
	parts := strings.Split(pattern, "/")
	if len(parts) != len(p) {
		return nil, false
	}
	var args []string
	for i, part := range parts {
		switch {
		case part == "*":
			args = append(args, p[i])
		case part != p[i]:
			return nil, false
		}
	}
	return args, true
}

// ---- URLs and IDs ----

func (s *Server) projectURL(project string) string { return apiBase + "projects/" + project }

func (s *Server) regionURL(region string) string {
	return s.projectURL(s.opts.Project) + "/regions/" + region
}

func (s *Server) networkURL(name string) string {
	return s.projectURL(s.opts.Project) + "/global/networks/" + name
}

func (s *Server) subnetworkURL(region, name string) string {
	return s.regionURL(region) + "/subnetworks/" + name
}

func (s *Server) imageURL(project, name string) string {
	return s.projectURL(project) + "/global/images/" + name
}

// stableID is a resource ID derived from its path, so that it is the
// same in every answer and every run.
func stableID(path string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(path))
	return strconv.FormatUint(1_000_000_000_000_000_000+h.Sum64()%8_000_000_000_000_000_000, 10)
}

// ---- zones and regions ----

type zoneJSON struct {
	Kind                  string   `json:"kind"`
	ID                    string   `json:"id"`
	CreationTimestamp     string   `json:"creationTimestamp"`
	Name                  string   `json:"name"`
	Description           string   `json:"description"`
	Status                string   `json:"status"`
	Region                string   `json:"region"`
	SelfLink              string   `json:"selfLink"`
	AvailableCPUPlatforms []string `json:"availableCpuPlatforms"`
	SupportsPzs           bool     `json:"supportsPzs"`
}

func (s *Server) zoneJSON(zone string) zoneJSON {
	return zoneJSON{
		Kind: "compute#zone", ID: stableID("zones/" + zone), CreationTimestamp: epoch, Name: zone, Description: zone,
		Status: "UP", Region: s.regionURL(s.opts.Region), SelfLink: s.zoneURL(zone),
		AvailableCPUPlatforms: []string{"Intel Sapphire Rapids", "Intel Ice Lake", "Intel Cascade Lake", "AMD Milan", "AMD Rome", "Ampere Altra"},
	}
}

// getZone answers zones.get: a zone of Options.Zones, or notFound.
func (s *Server) getZone(q request) (any, error) {
	if !slices.Contains(s.opts.Zones, q.args[0]) {
		return nil, notFound("projects/" + s.opts.Project + "/zones/" + q.args[0])
	}
	return s.zoneJSON(q.args[0]), nil
}

// listZones answers zones.list: Options.Zones, filtered by name, status
// or region, and paged.
func (s *Server) listZones(q request) (any, error) {
	match, err := parseFilter(q.r.URL.Query().Get("filter"), map[string]bool{"name": true, "status": true, "region": true})
	if err != nil {
		return nil, err
	}
	var all []zoneJSON
	for _, zone := range s.opts.Zones {
		z := s.zoneJSON(zone)
		fields := map[string]string{"name": z.Name, "status": z.Status, "region": z.Region}
		if match(func(f string) (string, bool) { v, ok := fields[f]; return v, ok }) {
			all = append(all, z)
		}
	}
	return pagedList(q, "compute#zoneList", "projects/"+s.opts.Project+"/zones", s.projectURL(s.opts.Project)+"/zones", all)
}

// getRegion answers regions.get for Options.Region; another is notFound.
func (s *Server) getRegion(q request) (any, error) {
	region := q.args[0]
	if region != s.opts.Region {
		return nil, notFound("projects/" + s.opts.Project + "/regions/" + region)
	}
	zones := make([]string, 0, len(s.opts.Zones))
	for _, z := range s.opts.Zones {
		zones = append(zones, s.zoneURL(z))
	}
	return map[string]any{
		"kind": "compute#region", "id": stableID("regions/" + region), "creationTimestamp": epoch,
		"name": region, "description": region, "status": "UP", "zones": zones,
		"selfLink": s.regionURL(region), "supportsPzs": false,
	}, nil
}

// ---- images ----

type imageJSON struct {
	Kind              string            `json:"kind"`
	ID                string            `json:"id"`
	CreationTimestamp string            `json:"creationTimestamp"`
	Name              string            `json:"name"`
	Description       string            `json:"description,omitempty"`
	SourceType        string            `json:"sourceType"`
	Status            string            `json:"status"`
	ArchiveSizeBytes  string            `json:"archiveSizeBytes"`
	DiskSizeGb        string            `json:"diskSizeGb"`
	Family            string            `json:"family,omitempty"`
	SelfLink          string            `json:"selfLink"`
	LabelFingerprint  string            `json:"labelFingerprint"`
	GuestOsFeatures   []map[string]any  `json:"guestOsFeatures"`
	StorageLocations  []string          `json:"storageLocations"`
	Architecture      string            `json:"architecture"`
	Deprecated        map[string]string `json:"deprecated,omitempty"`
}

func (s *Server) imageJSON(im Image) imageJSON {
	out := imageJSON{
		Kind: "compute#image", ID: stableID(im.Project + "/images/" + im.Name), CreationTimestamp: formatTime(im.Created),
		Name: im.Name, Description: im.Description, SourceType: "RAW", Status: "READY",
		ArchiveSizeBytes: strconv.Itoa(im.DiskSizeGB * 40_000_000), DiskSizeGb: strconv.Itoa(im.DiskSizeGB),
		Family: im.Family, SelfLink: s.imageURL(im.Project, im.Name), LabelFingerprint: "42WmSpB8rSM=",
		GuestOsFeatures:  []map[string]any{{"type": "UEFI_COMPATIBLE"}, {"type": "VIRTIO_SCSI_MULTIQUEUE"}, {"type": "GVNIC"}},
		StorageLocations: []string{"eu", "us", "asia"}, Architecture: cmp.Or(im.Arch, "X86_64"),
	}
	if im.Deprecated != "" {
		out.Deprecated = map[string]string{"state": im.Deprecated}
		if current, ok := s.familyImage(im.Project, im.Family); ok && im.Family != "" {
			out.Deprecated["replacement"] = s.imageURL(current.Project, current.Name)
		}
	}
	return out
}

// image returns project's image named name.
func (s *Server) image(project, name string) (Image, bool) {
	i := slices.IndexFunc(s.surface.images, func(im Image) bool { return im.Project == project && im.Name == name })
	if i < 0 {
		return Image{}, false
	}
	return s.surface.images[i], true
}

// familyImage returns the newest image of project's family that is not
// deprecated, as getFromFamily does.
func (s *Server) familyImage(project, family string) (Image, bool) {
	var best Image
	found := false
	for _, im := range s.surface.images {
		if im.Project == project && im.Family == family && im.Deprecated == "" && (!found || im.Created.After(best.Created)) {
			best, found = im, true
		}
	}
	return best, found
}

// getImage answers images.get, in any project.
func (s *Server) getImage(q request) (any, error) {
	im, ok := s.image(q.project, q.args[0])
	if !ok {
		return nil, notFound("projects/" + q.project + "/global/images/" + q.args[0])
	}
	return s.imageJSON(im), nil
}

// getImageFromFamily answers images.getFromFamily, in any project.
func (s *Server) getImageFromFamily(q request) (any, error) {
	im, ok := s.familyImage(q.project, q.args[0])
	if !ok {
		return nil, notFound("projects/" + q.project + "/global/images/family/" + q.args[0])
	}
	return s.imageJSON(im), nil
}

// ---- networks ----

// getSubnetwork answers subnetworks.get.
func (s *Server) getSubnetwork(q request) (any, error) {
	region, name := q.args[0], q.args[1]
	i := slices.IndexFunc(s.surface.subnetworks, func(sn Subnetwork) bool { return sn.Region == region && sn.Name == name })
	if i < 0 {
		return nil, notFound(fmt.Sprintf("projects/%s/regions/%s/subnetworks/%s", s.opts.Project, region, name))
	}
	sn := s.surface.subnetworks[i]
	out := map[string]any{
		"kind": "compute#subnetwork", "id": stableID("subnetworks/" + region + "/" + name), "creationTimestamp": epoch,
		"name": name, "network": s.networkURL(sn.Network), "ipCidrRange": sn.IPCIDRRange,
		"region": s.regionURL(region), "selfLink": s.subnetworkURL(region, name),
		"privateIpGoogleAccess": false, "fingerprint": "ExKTy0IRv3k=", "stackType": "IPV4_ONLY", "purpose": "PRIVATE",
	}
	if p, err := netip.ParsePrefix(sn.IPCIDRRange); err == nil {
		out["gatewayAddress"] = p.Masked().Addr().Next().String()
	}
	return out, nil
}

// getNetwork answers networks.get.
func (s *Server) getNetwork(q request) (any, error) {
	name := q.args[0]
	i := slices.IndexFunc(s.surface.networks, func(n Network) bool { return n.Name == name })
	if i < 0 {
		return nil, notFound("projects/" + s.opts.Project + "/global/networks/" + name)
	}
	var subnets []string
	for _, sn := range s.surface.subnetworks {
		if sn.Network == name {
			subnets = append(subnets, s.subnetworkURL(sn.Region, sn.Name))
		}
	}
	return map[string]any{
		"kind": "compute#network", "id": stableID("networks/" + name), "creationTimestamp": epoch, "name": name,
		"selfLink": s.networkURL(name), "autoCreateSubnetworks": s.surface.networks[i].AutoCreateSubnetworks,
		"subnetworks": subnets, "routingConfig": map[string]any{"routingMode": "REGIONAL"}, "mtu": 1460,
		"networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL",
	}, nil
}

// ---- references in instances.insert ----

// urlPrefix is what may come before a resource's path in a reference:
// the API's address and the project (the group), both optional.
const urlPrefix = `(?:https?://[^/]+/compute/(?:v1|beta|alpha)/)?(?:projects/([^/]+)/)?`

var (
	// subnetworkPattern reads a subnetwork's full or partial URL (with or
	// without the API's address and the project).
	subnetworkPattern = regexp.MustCompile(`^` + urlPrefix + `regions/([^/]+)/subnetworks/([^/]+)$`)
	// networkPattern reads a network's full or partial URL.
	networkPattern = regexp.MustCompile(`^` + urlPrefix + `global/networks/([^/]+)$`)
	// imagePattern reads a sourceImage: an image or a family, of a project
	// or the instance's.
	imagePattern = regexp.MustCompile(`^` + urlPrefix + `global/images/(family/)?([^/]+)$`)
)

// checkReferences checks what an inserted instance names as GCE checks
// it: its machine type in zone (400 invalid, as GCE answers a type that
// does not exist), its network interfaces' network and subnetwork and its
// disks' sourceImage (404 notFound for one that does not exist), and that
// the boot image's architecture is the machine type's (400 invalid).
func (s *Server) checkReferences(zone string, body map[string]any) error {
	mtURL, _ := body["machineType"].(string)
	name := mtURL[strings.LastIndex(mtURL, "/")+1:]
	mt, ok, why := s.machineType(zone, name)
	if !ok {
		return invalid("resource.machineType", mtURL, cmp.Or(why, fmt.Sprintf("Machine type with name '%s' does not exist in zone '%s'.", name, zone)))
	}
	nics, _ := body["networkInterfaces"].([]any)
	for i, n := range nics {
		nic, _ := n.(map[string]any)
		if err := s.checkNIC(i, nic); err != nil {
			return err
		}
	}
	disks, _ := body["disks"].([]any)
	for i, d := range disks {
		disk, _ := d.(map[string]any)
		params, _ := disk["initializeParams"].(map[string]any)
		src, ok := params["sourceImage"].(string)
		if !ok {
			continue
		}
		field := fmt.Sprintf("resource.disks[%d].initializeParams.sourceImage", i)
		im, err := s.checkImage(field, src)
		if err != nil {
			return err
		}
		if boot, _ := disk["boot"].(bool); (boot || i == 0) && cmp.Or(im.Arch, "X86_64") != cmp.Or(mt.Arch, "X86_64") {
			return invalid(field, src, fmt.Sprintf("The image's architecture %s is not compatible with the machine type %s, whose architecture is %s.",
				cmp.Or(im.Arch, "X86_64"), name, cmp.Or(mt.Arch, "X86_64")))
		}
	}
	return nil
}

// checkNIC checks the i-th network interface's network, subnetwork and
// alias IP ranges. The simulator gives an alias IP range of one address
// ("/32", the form GKE and kip ask in); it refuses a range it would not
// allocate as GCE does (a wider netmask, a chosen address, a secondary
// range: the simulated subnetworks have none) rather than ignore it.
func (s *Server) checkNIC(i int, nic map[string]any) error {
	ranges, _ := nic["aliasIpRanges"].([]any)
	for j, r := range ranges {
		ar, _ := r.(map[string]any)
		field := fmt.Sprintf("resource.networkInterfaces[%d].aliasIpRanges[%d]", i, j)
		if name, _ := ar["subnetworkRangeName"].(string); name != "" {
			return invalid(field+".subnetworkRangeName", name, "The subnetwork has no secondary range of that name.")
		}
		cidr, _ := ar["ipCidrRange"].(string)
		if !strings.HasPrefix(cidr, "/") {
			if _, err := netip.ParsePrefix(cidr); err != nil {
				if _, err := netip.ParseAddr(cidr); err != nil {
					return invalid(field+".ipCidrRange", cidr, "The IP CIDR range is invalid.")
				}
			}
			return invalid(field+".ipCidrRange", cidr, "The GCE simulator allocates alias IP ranges (\"/32\") and does not take a chosen one.")
		}
		if bits, err := strconv.Atoi(cidr[1:]); err != nil || bits < 0 || bits > 32 {
			return invalid(field+".ipCidrRange", cidr, "The IP CIDR range is invalid.")
		} else if bits != 32 {
			return invalid(field+".ipCidrRange", cidr, "The GCE simulator allocates alias IP ranges of one address (\"/32\") only.")
		}
	}
	if len(ranges) > 1 {
		return invalid(fmt.Sprintf("resource.networkInterfaces[%d].aliasIpRanges", i), fmt.Sprint(len(ranges)), "The GCE simulator allocates one alias IP range per network interface.")
	}
	if u, ok := nic["network"].(string); ok {
		m := networkPattern.FindStringSubmatch(u)
		if m == nil {
			return invalid(fmt.Sprintf("resource.networkInterfaces[%d].network", i), u, "The URL is malformed.")
		}
		project := cmp.Or(m[1], s.opts.Project)
		if project != s.opts.Project || !slices.ContainsFunc(s.surface.networks, func(n Network) bool { return n.Name == m[2] }) {
			return notFound("projects/" + project + "/global/networks/" + m[2])
		}
	}
	if u, ok := nic["subnetwork"].(string); ok {
		m := subnetworkPattern.FindStringSubmatch(u)
		if m == nil {
			return invalid(fmt.Sprintf("resource.networkInterfaces[%d].subnetwork", i), u, "The URL is malformed.")
		}
		project, region, name := cmp.Or(m[1], s.opts.Project), m[2], m[3]
		if project != s.opts.Project || !slices.ContainsFunc(s.surface.subnetworks, func(sn Subnetwork) bool { return sn.Region == region && sn.Name == name }) {
			return notFound(fmt.Sprintf("projects/%s/regions/%s/subnetworks/%s", project, region, name))
		}
		if region != s.opts.Region {
			return invalid(fmt.Sprintf("resource.networkInterfaces[%d].subnetwork", i), u, "Subnetwork should belong to the instance region.")
		}
	}
	return nil
}

// linkNIC writes an instance's network interface's network and
// subnetwork as GCE answers them: full URLs, the subnetwork's network when
// the client named only the subnetwork, and the default network's
// subnetwork in the region when it named neither. insert checked both.
func (s *Server) linkNIC(nic map[string]any) {
	region, subnetwork, network := s.opts.Region, "", ""
	if u, _ := nic["subnetwork"].(string); u != "" {
		if m := subnetworkPattern.FindStringSubmatch(u); m != nil {
			region, subnetwork = m[2], m[3]
		}
	}
	if u, _ := nic["network"].(string); u != "" {
		if m := networkPattern.FindStringSubmatch(u); m != nil {
			network = m[2]
		}
	}
	for _, sn := range s.surface.subnetworks {
		switch {
		case subnetwork == "" && sn.Region == region && sn.Network == cmp.Or(network, "default"):
			subnetwork = sn.Name
		case network == "" && sn.Region == region && sn.Name == subnetwork:
			network = sn.Network
		}
	}
	nic["network"] = s.networkURL(cmp.Or(network, "default"))
	nic["subnetwork"] = s.subnetworkURL(region, cmp.Or(subnetwork, "default"))
}

// checkImage checks a disk's sourceImage, an image or a family, and
// returns the image: one that exists, not OBSOLETE or DELETED.
func (s *Server) checkImage(field, src string) (Image, error) {
	m := imagePattern.FindStringSubmatch(src)
	if m == nil {
		return Image{}, invalid(field, src, "The URL is malformed.")
	}
	project, family, name := cmp.Or(m[1], s.opts.Project), m[2] != "", m[3]
	var im Image
	var ok bool
	if family {
		im, ok = s.familyImage(project, name)
	} else {
		im, ok = s.image(project, name)
	}
	if !ok {
		return Image{}, notFound("projects/" + project + "/global/images/" + m[2] + name)
	}
	if im.Deprecated == "OBSOLETE" || im.Deprecated == "DELETED" {
		return Image{}, invalid(field, src, fmt.Sprintf("The image 'projects/%s/global/images/%s' is %s.", project, im.Name, strings.ToLower(im.Deprecated)))
	}
	return im, nil
}
