package gcesim

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MachineType is a predefined machine type the simulated project offers.
type MachineType struct {
	Name      string
	GuestCPUs int
	MemoryMiB int
	// SharedCPU marks GCE's shared-core types (e2-micro, e2-small,
	// e2-medium, f1-micro, g1-small): isSharedCpu.
	SharedCPU bool
	// Accelerator and AcceleratorCount are the GPUs the type comes with
	// (a2, g2), by GCE's accelerator type name: nvidia-l4,
	// nvidia-tesla-a100, nvidia-a100-80gb.
	Accelerator      string
	AcceleratorCount int
	// Arch is GCE's architecture, X86_64 or ARM64; empty means X86_64.
	Arch string
	// Zones are the zones that offer the type; empty means every zone of
	// Options.Zones.
	Zones []string
}

// DefaultMachineTypes are common machine types of GCE's general-purpose,
// compute-optimized and GPU families, with GCE's vCPUs and memory (those
// plugins/gce/catalog/gce.json lists, which the tests compare), offered
// in every zone.
var DefaultMachineTypes = []MachineType{
	{Name: "e2-micro", GuestCPUs: 2, MemoryMiB: 1024, SharedCPU: true},
	{Name: "e2-small", GuestCPUs: 2, MemoryMiB: 2048, SharedCPU: true},
	{Name: "e2-medium", GuestCPUs: 2, MemoryMiB: 4096, SharedCPU: true},
	{Name: "e2-standard-2", GuestCPUs: 2, MemoryMiB: 8192},
	{Name: "e2-standard-4", GuestCPUs: 4, MemoryMiB: 16384},
	{Name: "e2-standard-8", GuestCPUs: 8, MemoryMiB: 32768},
	{Name: "e2-standard-16", GuestCPUs: 16, MemoryMiB: 65536},
	{Name: "e2-standard-32", GuestCPUs: 32, MemoryMiB: 131072},
	{Name: "e2-highcpu-2", GuestCPUs: 2, MemoryMiB: 2048},
	{Name: "e2-highcpu-4", GuestCPUs: 4, MemoryMiB: 4096},
	{Name: "e2-highcpu-8", GuestCPUs: 8, MemoryMiB: 8192},
	{Name: "e2-highcpu-16", GuestCPUs: 16, MemoryMiB: 16384},
	{Name: "e2-highmem-2", GuestCPUs: 2, MemoryMiB: 16384},
	{Name: "e2-highmem-4", GuestCPUs: 4, MemoryMiB: 32768},
	{Name: "e2-highmem-8", GuestCPUs: 8, MemoryMiB: 65536},
	{Name: "f1-micro", GuestCPUs: 1, MemoryMiB: 614, SharedCPU: true},
	{Name: "g1-small", GuestCPUs: 1, MemoryMiB: 1740, SharedCPU: true},
	{Name: "n1-standard-1", GuestCPUs: 1, MemoryMiB: 3840},
	{Name: "n1-standard-2", GuestCPUs: 2, MemoryMiB: 7680},
	{Name: "n1-standard-4", GuestCPUs: 4, MemoryMiB: 15360},
	{Name: "n1-standard-8", GuestCPUs: 8, MemoryMiB: 30720},
	{Name: "n2-standard-2", GuestCPUs: 2, MemoryMiB: 8192},
	{Name: "n2-standard-4", GuestCPUs: 4, MemoryMiB: 16384},
	{Name: "n2-standard-8", GuestCPUs: 8, MemoryMiB: 32768},
	{Name: "n2-standard-16", GuestCPUs: 16, MemoryMiB: 65536},
	{Name: "n2-highcpu-2", GuestCPUs: 2, MemoryMiB: 2048},
	{Name: "n2-highcpu-4", GuestCPUs: 4, MemoryMiB: 4096},
	{Name: "n2-highcpu-8", GuestCPUs: 8, MemoryMiB: 8192},
	{Name: "n2-highmem-2", GuestCPUs: 2, MemoryMiB: 16384},
	{Name: "n2-highmem-4", GuestCPUs: 4, MemoryMiB: 32768},
	{Name: "n2d-standard-2", GuestCPUs: 2, MemoryMiB: 8192},
	{Name: "n2d-standard-4", GuestCPUs: 4, MemoryMiB: 16384},
	{Name: "n2d-highcpu-2", GuestCPUs: 2, MemoryMiB: 2048},
	{Name: "n4-standard-2", GuestCPUs: 2, MemoryMiB: 8192},
	{Name: "n4-standard-4", GuestCPUs: 4, MemoryMiB: 16384},
	{Name: "c2d-standard-2", GuestCPUs: 2, MemoryMiB: 8192},
	{Name: "c2d-standard-4", GuestCPUs: 4, MemoryMiB: 16384},
	{Name: "c3-standard-4", GuestCPUs: 4, MemoryMiB: 16384},
	{Name: "c3-standard-8", GuestCPUs: 8, MemoryMiB: 32768},
	{Name: "t2d-standard-1", GuestCPUs: 1, MemoryMiB: 4096},
	{Name: "t2d-standard-2", GuestCPUs: 2, MemoryMiB: 8192},
	{Name: "t2a-standard-1", GuestCPUs: 1, MemoryMiB: 4096, Arch: "ARM64"},
	{Name: "t2a-standard-2", GuestCPUs: 2, MemoryMiB: 8192, Arch: "ARM64"},
	{Name: "t2a-standard-4", GuestCPUs: 4, MemoryMiB: 16384, Arch: "ARM64"},
	{Name: "g2-standard-4", GuestCPUs: 4, MemoryMiB: 16384, Accelerator: "nvidia-l4", AcceleratorCount: 1},
	{Name: "g2-standard-8", GuestCPUs: 8, MemoryMiB: 32768, Accelerator: "nvidia-l4", AcceleratorCount: 1},
	{Name: "a2-highgpu-1g", GuestCPUs: 12, MemoryMiB: 87040, Accelerator: "nvidia-tesla-a100", AcceleratorCount: 1},
}

// customLimit is a range of custom machine types of a family: vCPU counts
// from minCPU to maxCPU in steps of cpuStep, memory per vCPU between
// minMiB and maxMiB (unless the name ends in -ext, GCE's extended
// memory), in steps of 256 MiB, at most capMiB in all (0: no cap).
// They are GCE's documented limits (plugins/gce/catalog/source/custom.csv).
type customLimit struct {
	minCPU, maxCPU, cpuStep int
	minMiB, maxMiB, capMiB  int
}

// customLimits are the custom families by the name's prefix: custom-
// (N1), e2-custom-, n2-custom-, n2d-custom-, n4-custom-.
var customLimits = map[string][]customLimit{
	"n1": {{1, 1, 1, 1024, 6656, 0}, {2, 2, 2, 1024, 6656, 0}, {4, 96, 2, 922, 6656, 0}},
	"e2": {{2, 32, 2, 512, 8192, 131072}},
	"n2": {{2, 32, 2, 512, 8192, 0}, {36, 80, 4, 512, 8192, 0}},
	"n2d": {{2, 2, 2, 512, 8192, 0}, {4, 4, 4, 512, 8192, 0}, {8, 8, 8, 512, 8192, 0},
		{16, 96, 16, 512, 8192, 0}},
	"n4": {{2, 80, 2, 2048, 8192, 0}},
}

// e2SharedCustom are E2's shared-core custom types (e2-custom-small-2048):
// two vCPUs and memory in a range.
var e2SharedCustom = map[string]struct{ minMiB, maxMiB int }{
	"micro": {1024, 2048}, "small": {2048, 4096}, "medium": {4096, 8192},
}

// customPattern reads a custom machine type's name: the family's prefix
// (none for N1), the vCPUs or E2's shared-core size, the memory in MiB
// and the extended-memory suffix.
var customPattern = regexp.MustCompile(`^(?:([a-z][a-z0-9]*)-)?custom-(\d+|micro|small|medium)-(\d+)(-ext)?$`)

// customMachineType resolves a custom machine type's name as GCE does:
// false when name is not a custom type's; for one outside its family's
// limits, why says what GCE says.
func customMachineType(name string) (mt MachineType, isCustom bool, why string) {
	m := customPattern.FindStringSubmatch(name)
	if m == nil {
		return MachineType{}, false, ""
	}
	family, size, ext := cmp.Or(m[1], "n1"), m[2], m[4] != ""
	bad := func(format string, args ...any) (MachineType, bool, string) {
		return MachineType{}, true, fmt.Sprintf(format, args...)
	}
	memory, err := strconv.Atoi(m[3])
	if err != nil {
		return bad("Invalid custom machine type name.")
	}
	if memory%256 != 0 {
		return bad("Memory should be a multiple of 256MiB, while %dMiB is requested.", memory)
	}
	mt = MachineType{Name: name, MemoryMiB: memory}
	if shared, ok := e2SharedCustom[size]; ok {
		if family != "e2" || ext {
			return bad("Shared-core custom machine types are E2's only.")
		}
		if memory < shared.minMiB || memory > shared.maxMiB {
			return bad("Memory of e2-custom-%s should be between %dMiB and %dMiB, while %dMiB is requested.", size, shared.minMiB, shared.maxMiB, memory)
		}
		mt.GuestCPUs, mt.SharedCPU = 2, true
		return mt, true, ""
	}
	limits, ok := customLimits[family]
	if !ok {
		return bad("Custom machine types are not available for the %s machine series.", strings.ToUpper(family))
	}
	cpus, err := strconv.Atoi(size)
	if err != nil {
		return bad("Invalid custom machine type name.")
	}
	i := slices.IndexFunc(limits, func(l customLimit) bool {
		return cpus >= l.minCPU && cpus <= l.maxCPU && (cpus-l.minCPU)%l.cpuStep == 0
	})
	if i < 0 {
		return bad("Invalid number of vCPUs for a custom machine type of the %s machine series: %d.", strings.ToUpper(family), cpus)
	}
	l := limits[i]
	if memory < cpus*l.minMiB || (!ext && memory > cpus*l.maxMiB) {
		return bad("Memory should be between %dMiB and %dMiB for %d vCPUs, while %dMiB is requested.", cpus*l.minMiB, cpus*l.maxMiB, cpus, memory)
	}
	if l.capMiB > 0 && memory > l.capMiB {
		return bad("Memory should be at most %dMiB, while %dMiB is requested.", l.capMiB, memory)
	}
	mt.GuestCPUs = cpus
	return mt, true, ""
}

// customFamily is the machine series whose predefined types must be
// offered in a zone for the custom types of the series to be: n1 for
// custom-…, e2 for e2-custom-…
func customFamily(name string) string {
	family, _, ok := strings.Cut(name, "-custom-")
	if !ok {
		return "n1"
	}
	return family
}

// offered reports whether the zone offers t.
func (t MachineType) offered(zone string) bool {
	return len(t.Zones) == 0 || slices.Contains(t.Zones, zone)
}

// machineType resolves a type's name in zone: a predefined type the zone
// offers, or a custom type of a series the zone offers. Otherwise ok is
// false, and why says what is wrong with a custom type outside its
// limits ("" for a type that does not exist).
func (s *Server) machineType(zone, name string) (t MachineType, ok bool, why string) {
	if t, ok := s.surface.types[name]; ok && t.offered(zone) {
		return t, true, ""
	}
	custom, isCustom, why := customMachineType(name)
	if !isCustom || why != "" {
		return MachineType{}, false, why
	}
	family := customFamily(name)
	for _, t := range s.surface.typeOrder {
		if strings.HasPrefix(t.Name, family+"-") && t.offered(zone) {
			return custom, true, ""
		}
	}
	return MachineType{}, false, ""
}

// machineTypeJSON is the MachineType resource as GCE writes it.
type machineTypeJSON struct {
	Kind                         string            `json:"kind"`
	ID                           string            `json:"id,omitempty"`
	CreationTimestamp            string            `json:"creationTimestamp"`
	Name                         string            `json:"name"`
	Description                  string            `json:"description"`
	GuestCPUs                    int               `json:"guestCpus"`
	MemoryMb                     int               `json:"memoryMb"`
	ImageSpaceGb                 int               `json:"imageSpaceGb"`
	MaximumPersistentDisks       int               `json:"maximumPersistentDisks"`
	MaximumPersistentDisksSizeGb string            `json:"maximumPersistentDisksSizeGb"`
	Zone                         string            `json:"zone"`
	SelfLink                     string            `json:"selfLink"`
	IsSharedCPU                  bool              `json:"isSharedCpu"`
	Accelerators                 []acceleratorJSON `json:"accelerators,omitempty"`
	Architecture                 string            `json:"architecture,omitempty"`
}

type acceleratorJSON struct {
	GuestAcceleratorType  string `json:"guestAcceleratorType"`
	GuestAcceleratorCount int    `json:"guestAcceleratorCount"`
}

// epoch is the creationTimestamp GCE gives its predefined resources.
const epoch = "1969-12-31T16:00:00.000-08:00"

// machineTypeJSON renders t in zone as GCE does: the zone by name (not
// URL), no deprecated field for a current type, no id for a custom one.
func (s *Server) machineTypeJSON(t MachineType, zone string) machineTypeJSON {
	out := machineTypeJSON{
		Kind: "compute#machineType", CreationTimestamp: epoch, Name: t.Name,
		GuestCPUs: t.GuestCPUs, MemoryMb: t.MemoryMiB, MaximumPersistentDisks: 128, MaximumPersistentDisksSizeGb: "263168",
		Zone: zone, SelfLink: s.zoneURL(zone) + "/machineTypes/" + t.Name, IsSharedCPU: t.SharedCPU,
		Architecture: cmp.Or(t.Arch, "X86_64"),
	}
	if t.SharedCPU {
		out.MaximumPersistentDisks, out.MaximumPersistentDisksSizeGb = 16, "3072"
	}
	if i, ok := s.surface.typeIndex[t.Name]; ok {
		out.ID = strconv.Itoa(1_000_000 + i)
		out.Description = fmt.Sprintf("%d vCPU%s, %s GB RAM", t.GuestCPUs, plural(t.GuestCPUs), gb(t.MemoryMiB))
	} else {
		out.Description = "Custom created machine type."
		out.Architecture = ""
	}
	if t.AcceleratorCount > 0 {
		out.Accelerators = []acceleratorJSON{{t.Accelerator, t.AcceleratorCount}}
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// gb writes MiB as GCE's descriptions write GB: 3.75, 16, 0.60.
func gb(mib int) string {
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(float64(mib)/1024, 'f', 2, 64), "0"), ".")
}

// machineTypeFields are what a machine type list's filter may name.
var machineTypeFields = map[string]bool{"name": true, "zone": true, "guestCpus": true, "memoryMb": true, "isSharedCpu": true}

// zoneMachineTypes are the types zone offers that match filter, in the
// order of Options.MachineTypes. The caller checked the filter.
func (s *Server) zoneMachineTypes(zone string, match func(func(string) (string, bool)) bool) []machineTypeJSON {
	var out []machineTypeJSON
	for _, t := range s.surface.typeOrder {
		if !t.offered(zone) {
			continue
		}
		j := s.machineTypeJSON(t, zone)
		fields := map[string]string{
			"name": j.Name, "zone": zone, "guestCpus": strconv.Itoa(j.GuestCPUs),
			"memoryMb": strconv.Itoa(j.MemoryMb), "isSharedCpu": strconv.FormatBool(j.IsSharedCPU),
		}
		if match(func(f string) (string, bool) { v, ok := fields[f]; return v, ok }) {
			out = append(out, j)
		}
	}
	return out
}

// getMachineType answers machineTypes.get, custom types included.
func (s *Server) getMachineType(q request) (any, error) {
	t, ok, why := s.machineType(q.zone(), q.args[1])
	switch {
	case why != "":
		return nil, invalid("machineType", q.args[1], why)
	case !ok:
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/machineTypes/%s", s.opts.Project, q.zone(), q.args[1]))
	}
	return s.machineTypeJSON(t, q.zone()), nil
}

// listMachineTypes answers machineTypes.list: the zone's predefined
// types (GCE lists no custom type), filtered and paged.
func (s *Server) listMachineTypes(q request) (any, error) {
	match, err := parseFilter(q.r.URL.Query().Get("filter"), machineTypeFields)
	if err != nil {
		return nil, err
	}
	return pagedList(q, "compute#machineTypeList", "projects/"+s.opts.Project+"/zones/"+q.zone()+"/machineTypes",
		s.zoneURL(q.zone())+"/machineTypes", s.zoneMachineTypes(q.zone(), match))
}

// aggregatedMachineTypes answers machineTypes.aggregatedList: every zone
// a scope, its types on this page or GCE's NO_RESULTS_ON_PAGE warning;
// maxResults counts types over all zones.
func (s *Server) aggregatedMachineTypes(q request) (any, error) {
	match, err := parseFilter(q.r.URL.Query().Get("filter"), machineTypeFields)
	if err != nil {
		return nil, err
	}
	var all []machineTypeJSON
	for _, zone := range s.opts.Zones {
		all = append(all, s.zoneMachineTypes(zone, match)...)
	}
	from, to, next, err := staticPage(q, len(all))
	if err != nil {
		return nil, err
	}
	items := map[string]any{}
	for _, zone := range s.opts.Zones {
		var list []machineTypeJSON
		for _, t := range all[from:to] {
			if t.Zone == zone {
				list = append(list, t)
			}
		}
		if len(list) > 0 {
			items["zones/"+zone] = map[string]any{"machineTypes": list}
		} else {
			items["zones/"+zone] = noResultsOnPage("zones/" + zone)
		}
	}
	out := map[string]any{
		"kind": "compute#machineTypeAggregatedList", "id": "projects/" + s.opts.Project + "/aggregated/machineTypes",
		"items": items, "selfLink": apiBase + "projects/" + s.opts.Project + "/aggregated/machineTypes",
	}
	if next != "" {
		out["nextPageToken"] = next
	}
	return out, nil
}
