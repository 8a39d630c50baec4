package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Schema is the version of the catalog document this package reads and
// writes.
const Schema = 1

// Catalog is one cloud's instance types and prices.
type Catalog struct {
	Schema int `json:"schema"`
	// Cloud names the cloud, such as "aws".
	Cloud string `json:"cloud"`
	// GeneratedAt is the date the catalog's figures are as of: the oldest
	// price source it was built from (prices go stale first), or the date
	// its sources were transcribed when they carry none.
	GeneratedAt time.Time `json:"generatedAt"`
	// Live is set on a catalog generated from the cloud's APIs rather than
	// from files in the repository: it cannot be rebuilt offline, so a
	// generator's -check validates it instead of comparing (WriteOrCheck).
	Live bool `json:"live,omitempty"`
	// Sources name where every figure came from.
	Sources []Source `json:"sources"`
	// Types are the instance types, sorted by name.
	Types []Type `json:"types"`
	// Regions hold the prices, sorted by name.
	Regions []Region `json:"regions"`

	index map[string]int
}

// Source is one origin of catalog figures.
type Source struct {
	// Name identifies the source: a repository and path, an API, a page.
	Name string `json:"name"`
	// Ref pins it: a commit, a module version, a URL.
	Ref string `json:"ref,omitempty"`
	// License is the source's licence, when it has one.
	License string `json:"license,omitempty"`
	// Date is when the source's data was produced, when it says.
	Date time.Time `json:"date,omitzero"`
	// Covers says which figures came from it.
	Covers string `json:"covers"`
}

// Type is one instance type's size.
type Type struct {
	Name      string `json:"name"`
	VCPU      int64  `json:"vcpu"`
	MemoryMiB int64  `json:"memoryMiB"`
	Arch      string `json:"arch"`
	GPU       *GPU   `json:"gpu,omitempty"`
	// BaselineMilliCPU is a burstable type's sustained CPU for the whole
	// instance; zero for a type that is not burstable.
	BaselineMilliCPU int64 `json:"baselineMilliCPU,omitempty"`
	// NoSpot is set when the cloud does not sell the type as spot.
	NoSpot bool `json:"noSpot,omitempty"`
}

// GPU describes a type's accelerators.
type GPU struct {
	Count int32  `json:"count"`
	Kind  string `json:"kind,omitempty"`
	// MemoryMiB is per accelerator; zero when no source states it.
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

// Region holds the types sold in one region and their prices.
type Region struct {
	Name string `json:"name"`
	// Prices maps every type sold in the region to its prices.
	Prices map[string]Price `json:"prices"`
}

// Price is a type's hourly prices in US dollars in one region; nil means
// no source gave the figure.
type Price struct {
	OnDemand *float64 `json:"onDemand,omitempty"`
	Spot     *float64 `json:"spot,omitempty"`
	// SpotByZone holds zone-specific spot prices (clouds such as AWS price
	// spot per zone); a zone it lacks falls back to Spot.
	SpotByZone map[string]float64 `json:"spotByZone,omitempty"`
}

// Parse reads and validates a catalog document.
func Parse(data []byte) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decoding catalog: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the catalog's invariants and indexes its types. A
// generator calls it before writing; Parse calls it after reading.
func (c *Catalog) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Schema != Schema {
		return fmt.Errorf("reading catalog: schema %d, this build reads %d", c.Schema, Schema)
	}
	if c.Cloud == "" {
		bad("cloud is empty")
	}
	if c.GeneratedAt.IsZero() {
		bad("generatedAt is missing")
	}
	if len(c.Sources) == 0 {
		bad("no sources: every figure must name where it came from")
	}
	for i, s := range c.Sources {
		if s.Name == "" || s.Covers == "" {
			bad("sources[%d]: name and covers are required", i)
		}
	}
	c.index = make(map[string]int, len(c.Types))
	for i, t := range c.Types {
		switch {
		case t.Name == "":
			bad("types[%d]: name is empty", i)
		case i > 0 && c.Types[i-1].Name >= t.Name:
			bad("types[%d] %q: not sorted by name, or duplicate", i, t.Name)
		case t.VCPU <= 0 || t.MemoryMiB <= 0:
			bad("type %q: vcpu and memoryMiB must be positive", t.Name)
		case t.Arch != string(pluginapi.ArchAMD64) && t.Arch != string(pluginapi.ArchARM64):
			bad("type %q: arch %q is neither amd64 nor arm64", t.Name, t.Arch)
		case t.GPU != nil && t.GPU.Count <= 0:
			bad("type %q: gpu.count must be positive when gpu is set", t.Name)
		case t.BaselineMilliCPU < 0 || t.BaselineMilliCPU > t.VCPU*1000:
			bad("type %q: baselineMilliCPU %d outside 0..%d", t.Name, t.BaselineMilliCPU, t.VCPU*1000)
		}
		c.index[t.Name] = i
	}
	for i, r := range c.Regions {
		if r.Name == "" {
			bad("regions[%d]: name is empty", i)
		}
		if i > 0 && c.Regions[i-1].Name >= r.Name {
			bad("regions[%d] %q: not sorted by name, or duplicate", i, r.Name)
		}
		for name, p := range r.Prices {
			if _, ok := c.index[name]; !ok {
				bad("region %q prices type %q, which the catalog does not list", r.Name, name)
			}
			for what, v := range map[string]*float64{"onDemand": p.OnDemand, "spot": p.Spot} {
				if v != nil && !validPrice(*v) {
					bad("region %q type %q: %s price %v is not a finite number >= 0", r.Name, name, what, *v)
				}
			}
			for zone, v := range p.SpotByZone {
				if zone == "" || !validPrice(v) {
					bad("region %q type %q: spot price %v in zone %q is not a finite number >= 0 in a named zone", r.Name, name, v, zone)
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("validating %s catalog: %w", c.Cloud, errors.Join(errs...))
	}
	return nil
}

func validPrice(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// Type returns the named type.
func (c *Catalog) Type(name string) (Type, bool) {
	i, ok := c.index[name]
	if !ok {
		return Type{}, false
	}
	return c.Types[i], true
}

// Region returns the named region's prices.
func (c *Catalog) Region(name string) (Region, bool) {
	i := sort.Search(len(c.Regions), func(i int) bool { return c.Regions[i].Name >= name })
	if i < len(c.Regions) && c.Regions[i].Name == name {
		return c.Regions[i], true
	}
	return Region{}, false
}

// Info is the provenance GetInfo reports: the sources and the date.
func (c *Catalog) Info() pluginapi.CatalogInfo {
	parts := make([]string, 0, len(c.Sources))
	for _, s := range c.Sources {
		p := s.Name
		if s.Ref != "" {
			p += "@" + s.Ref
		}
		parts = append(parts, p+" ("+s.Covers+")")
	}
	return pluginapi.CatalogInfo{Source: c.Cloud + " catalog: " + strings.Join(parts, "; "), GeneratedAt: c.GeneratedAt}
}

// InstanceTypes turns one region into the plugin contract's catalog. Every
// type sold in the region gets an on-demand and (unless NoSpot) a spot
// offering in each zone, or one zone-less offering of each when zones is
// empty; a price the catalog lacks is PriceKnown false. A region the
// catalog has no prices for yields every type with unknown prices and a
// warning saying so.
func (c *Catalog) InstanceTypes(region string, zones []string) ([]pluginapi.InstanceType, []string) {
	if len(zones) == 0 {
		zones = []string{""}
	}
	var warnings []string
	r, ok := c.Region(region)
	names := make([]string, 0, len(c.Types))
	if ok {
		for name := range r.Prices {
			names = append(names, name)
		}
		slices.Sort(names)
	} else {
		for _, t := range c.Types {
			names = append(names, t.Name)
		}
		known := make([]string, 0, len(c.Regions))
		for _, r := range c.Regions {
			known = append(known, r.Name)
		}
		warnings = append(warnings, fmt.Sprintf(
			"the %s catalog has no prices for region %q (it has %s): every price is unknown, so pods get the smallest type that fits",
			c.Cloud, region, orNone(known)))
	}
	out := make([]pluginapi.InstanceType, 0, len(names))
	for _, name := range names {
		t := c.Types[c.index[name]]
		p := r.Prices[name]
		it := pluginapi.InstanceType{
			Name:                      t.Name,
			MilliCPU:                  t.VCPU * 1000,
			MemoryBytes:               t.MemoryMiB << 20,
			Arch:                      pluginapi.Arch(t.Arch),
			BurstableBaselineMilliCPU: t.BaselineMilliCPU,
		}
		if t.GPU != nil {
			it.GPU = pluginapi.GPU{Count: t.GPU.Count, Kind: t.GPU.Kind, MemoryBytes: t.GPU.MemoryMiB << 20}
		}
		type priced struct {
			ct    pluginapi.CapacityType
			price *float64
		}
		capacity := []priced{{pluginapi.CapacityOnDemand, p.OnDemand}}
		if !t.NoSpot {
			capacity = append(capacity, priced{pluginapi.CapacitySpot, p.Spot})
		}
		it.Offerings = make([]pluginapi.Offering, 0, len(zones)*len(capacity))
		for _, z := range zones {
			for _, cp := range capacity {
				o := pluginapi.Offering{Zone: z, CapacityType: cp.ct, Available: true}
				if cp.price != nil {
					o.HourlyPrice, o.PriceKnown = *cp.price, true
				}
				if v, ok := p.SpotByZone[z]; ok && cp.ct == pluginapi.CapacitySpot {
					o.HourlyPrice, o.PriceKnown = v, true
				}
				it.Offerings = append(it.Offerings, o)
			}
		}
		out = append(out, it)
	}
	return out, warnings
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Marshal writes the catalog deterministically: types and regions sorted,
// one type or price per line so that a regenerated catalog diffs by line.
func (c *Catalog) Marshal() ([]byte, error) {
	slices.SortFunc(c.Types, func(a, b Type) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Regions, func(a, b Region) int { return strings.Compare(a.Name, b.Name) })
	c.Schema = Schema
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	field := func(name string, v any, comma bool) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", name, err)
		}
		fmt.Fprintf(&b, "  %q: %s", name, data)
		if comma {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		return nil
	}
	list := func(name string, n int, item func(i int) ([]byte, error)) error {
		fmt.Fprintf(&b, "  %q: [\n", name)
		for i := range n {
			data, err := item(i)
			if err != nil {
				return fmt.Errorf("encoding %s[%d]: %w", name, i, err)
			}
			b.WriteString("    ")
			b.Write(data)
			if i < n-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("  ]")
		return nil
	}
	b.WriteString("{\n")
	for _, f := range []struct {
		name string
		v    any
	}{{"schema", c.Schema}, {"cloud", c.Cloud}, {"generatedAt", c.GeneratedAt.UTC()}} {
		if err := field(f.name, f.v, true); err != nil {
			return nil, err
		}
	}
	if c.Live {
		if err := field("live", true, true); err != nil {
			return nil, err
		}
	}
	if err := list("sources", len(c.Sources), func(i int) ([]byte, error) { return json.Marshal(c.Sources[i]) }); err != nil {
		return nil, err
	}
	b.WriteString(",\n")
	if err := list("types", len(c.Types), func(i int) ([]byte, error) { return json.Marshal(c.Types[i]) }); err != nil {
		return nil, err
	}
	b.WriteString(",\n  \"regions\": [\n")
	for ri, r := range c.Regions {
		fmt.Fprintf(&b, "    {\"name\": %q, \"prices\": {\n", r.Name)
		names := make([]string, 0, len(r.Prices))
		for name := range r.Prices {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			data, err := json.Marshal(r.Prices[name])
			if err != nil {
				return nil, fmt.Errorf("encoding region %s price of %s: %w", r.Name, name, err)
			}
			fmt.Fprintf(&b, "      %q: %s", name, data)
			if i < len(names)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("    }}")
		if ri < len(c.Regions)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes(), nil
}
