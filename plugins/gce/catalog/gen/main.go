// Command gen builds gce.json, the GCE plugin's instance-type catalog, from
// the hand-transcribed tables in catalog/source, or with -live from the
// Compute Engine and Cloud Billing Catalog APIs (live.go). Run it from
// plugins/gce:
//
//	go run ./catalog/gen [-date 2026-11-21] [-check]
//	go run ./catalog/gen -live -project PROJECT [-regions us-central1,...] [-api-key KEY]
//
// With -check it writes nothing and exits non-zero when the committed
// gce.json differs from what it would write.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// maxCustomVCPU bounds the custom machine type grid: GCE allows far more
// shapes than a catalog should list.
const maxCustomVCPU = 32

// maxTypes is the catalog size above which the generator refuses to write.
const maxTypes = 1500

// sources are the origins of the files in catalog/source, as their
// comments and SOURCES.md name them.
var sources = []catalog.Source{
	{
		Name:    "Google Cloud documentation: general-purpose, compute-, memory- and accelerator-optimized machine families; GPU machine types",
		Ref:     "https://cloud.google.com/compute/docs/general-purpose-machines",
		License: "CC-BY-4.0",
		Covers:  "predefined types: vCPU, memory, GPUs, shared-core baselines; custom type limits",
	},
	{
		Name:    "GoogleCloudPlatform/deploystack tui/mock.go",
		Ref:     "4295f739633f75e9360b76f97d662fc363cf73d1",
		License: "Apache-2.0",
		Covers:  "memory of n1-highcpu-*, f1-micro, g1-small, m1-megamem-96",
	},
	{
		Name:    "GoogleCloudPlatform/golang-samples compute/instances/custom-machine-type/helper_class.go",
		Ref:     "0af009fb2955cc044a448dd570dcfdb7b10a03bb",
		License: "Apache-2.0",
		Covers:  "custom limits: N1 922 MiB per vCPU minimum, 256 MiB step",
	},
	{
		Name:    "Google Cloud documentation: Machine types",
		Ref:     "https://cloud.google.com/compute/docs/machine-types",
		License: "CC-BY-4.0",
		Covers:  "E2 custom memory cap (128 GB)",
	},
	{
		Name:    "kubernetes/autoscaler cluster-autoscaler/cloudprovider/gce/gce_price_info.go",
		Ref:     "0411d1c8af6b4b095f968868a0f013003fd8a2d8",
		License: "Apache-2.0",
		Covers:  "us-central1 prices: per type, family and custom rates, spot ratios",
	},
}

type options struct {
	source, date string
	dateSet      bool // -date was given (-live defaults it to now)
	live         liveOptions
}

func main() { generator(new(options)).Main() }

func run(args []string, stdout, stderr io.Writer) error {
	return generator(new(options)).Run(context.Background(), args, stdout, stderr)
}

// generator is this command: the shared catalog flags and o's.
func generator(o *options) catalog.Generator {
	return catalog.Generator{
		Cloud: "gce",
		Usage: "usage: go run ./catalog/gen [-date YYYY-MM-DD] [-check]\n" +
			"       go run ./catalog/gen -live -project PROJECT [-regions R1,R2] [-api-key KEY] [-check]\n\n" +
			"Builds gce.json from catalog/source, or with -live from the Compute Engine and\n" +
			"Cloud Billing Catalog APIs. Run it from plugins/gce.",
		SourceHelp: "directory holding specs.csv, prices.csv, rates.csv, custom.csv, custom_rates.csv, spot_discounts.csv",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.date, "date", "2026-11-21", "the catalog's generatedAt (YYYY-MM-DD): the price source has no date, so the day it was transcribed; with -live, the run time (YYYY-MM-DD or RFC 3339, default now)")
			o.live.register(fs)
		},
		Build: func(ctx context.Context, fs *flag.FlagSet, source string) (*catalog.Catalog, string, error) {
			o.source = source
			fs.Visit(func(f *flag.Flag) { o.dateSet = o.dateSet || f.Name == "date" })
			if o.live.enabled {
				return buildLive(ctx, *o)
			}
			return build(*o)
		},
	}
}

// famKey names one family's figures in one region.
type famKey struct{ region, family string }

// rate is a family's on-demand price per vCPU-hour and per GiB-hour.
type rate struct{ vcpu, gib float64 }

// ratio is a spot discount as the price file writes it: spot = on-demand
// × num / den.
type ratio struct{ num, den float64 }

// pricing is what composes a price: on-demand rates and spot ratios.
type pricing struct {
	rates  map[famKey]rate
	ratios map[famKey]ratio
}

// compose prices a size from its family's rates: on-demand = vCPU × vCPU
// rate + GiB × GiB rate; spot = that × the family's spot ratio. Either is
// nil when the family has no rate or ratio.
func (p pricing) compose(k famKey, vcpu, memMiB int64) (onDemand, spot *float64) {
	r, ok := p.rates[k]
	if !ok {
		return nil, nil
	}
	od := float64(vcpu)*r.vcpu + float64(memMiB)/1024*r.gib
	onDemand = ptr(round(od))
	if q, ok := p.ratios[k]; ok {
		spot = ptr(round(od * q.num / q.den))
	}
	return onDemand, spot
}

// round keeps a composed price to a millionth of a dollar, the precision
// of the source's own figures.
func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func ptr(v float64) *float64 { return &v }

// build assembles the catalog and a one-line summary of what went in.
func build(o options) (*catalog.Catalog, string, error) {
	date, err := time.Parse(time.DateOnly, o.date)
	if err != nil {
		return nil, "", fmt.Errorf("parsing -date: %w", err)
	}
	src := func(name string) string { return filepath.Join(o.source, name) }
	types, err := catalog.ReadSpecsFile(src("specs.csv"))
	if err != nil {
		return nil, "", err
	}
	prices, err := catalog.ReadPricesFile(src("prices.csv"))
	if err != nil {
		return nil, "", err
	}
	predefined, err := readPricing(src("rates.csv"), src("spot_discounts.csv"), "predefined")
	if err != nil {
		return nil, "", err
	}
	custom, err := readPricing(src("custom_rates.csv"), src("spot_discounts.csv"), "custom")
	if err != nil {
		return nil, "", err
	}
	limits, err := readCustom(src("custom.csv"))
	if err != nil {
		return nil, "", err
	}

	c := &catalog.Catalog{Schema: catalog.Schema, Cloud: "gce", GeneratedAt: date, Sources: slices.Clone(sources)}
	nPredefined := len(types)
	customFamily := map[string]string{} // custom type → its family
	for _, ct := range customTypes(limits) {
		customFamily[ct.Name] = ct.family
		types = append(types, ct.Type)
	}
	if len(types) > maxTypes {
		return nil, "", fmt.Errorf("building the catalog: %d types, more than %d; tighten the custom grid", len(types), maxTypes)
	}
	c.Types = types

	// Per-type prices first, then every region gets every type, its
	// missing prices composed from the family rates where there are any.
	skipped := c.AddPrices(prices)
	regions := map[string]bool{}
	for _, r := range c.Regions {
		regions[r.Name] = true
	}
	for k := range predefined.rates {
		if !regions[k.region] {
			regions[k.region] = true
			c.Regions = append(c.Regions, catalog.Region{Name: k.region, Prices: map[string]catalog.Price{}})
		}
	}
	for k := range custom.rates {
		if !regions[k.region] {
			regions[k.region] = true
			c.Regions = append(c.Regions, catalog.Region{Name: k.region, Prices: map[string]catalog.Price{}})
		}
	}
	slices.SortFunc(c.Regions, func(a, b catalog.Region) int { return strings.Compare(a.Name, b.Name) })
	var fromTable, composed int
	var unpriced []string
	for _, r := range c.Regions {
		for _, t := range c.Types {
			p := r.Prices[t.Name]
			fromTable += count(p.OnDemand, p.Spot)
			var od, spot *float64
			switch fam, isCustom := customFamily[t.Name]; {
			case isCustom:
				od, spot = custom.compose(famKey{r.Name, fam}, t.VCPU, t.MemoryMiB)
			case t.GPU == nil: // the family rates leave out a GPU type's GPUs
				od, spot = predefined.compose(famKey{r.Name, family(t.Name)}, t.VCPU, t.MemoryMiB)
			}
			if p.OnDemand == nil && od != nil {
				p.OnDemand = od
				composed++
			}
			if p.Spot == nil && spot != nil {
				p.Spot = spot
				composed++
			}
			if p.OnDemand == nil && p.Spot == nil {
				unpriced = append(unpriced, t.Name)
			}
			r.Prices[t.Name] = p
		}
	}
	var regionNames []string
	for _, r := range c.Regions {
		regionNames = append(regionNames, r.Name)
	}
	sum := fmt.Sprintf("%d types (%d predefined, %d custom up to %d vCPUs), regions %s, %d priced offerings (%d from prices.csv, %d composed from family rates)",
		len(c.Types), nPredefined, len(c.Types)-nPredefined, maxCustomVCPU, strings.Join(regionNames, ", "), fromTable+composed, fromTable, composed)
	if len(unpriced) > 0 {
		slices.Sort(unpriced)
		sum += fmt.Sprintf("; %d types without any price (%s)", len(unpriced), catalog.FirstFew(slices.Compact(unpriced), 5))
	}
	var names []string
	for _, r := range skipped {
		names = append(names, r.Type)
	}
	slices.Sort(names)
	sum += fmt.Sprintf("; skipped %d price rows for types not in specs.csv", len(skipped))
	if len(names) > 0 {
		sum += " (" + catalog.FirstFew(slices.Compact(names), 5) + ")"
	}
	return c, sum, nil
}

func count(ps ...*float64) int {
	n := 0
	for _, p := range ps {
		if p != nil {
			n++
		}
	}
	return n
}

// family is the part of a machine type's name before the first '-'
// (n1-standard-4 → n1; f1-micro → f1).
func family(name string) string {
	f, _, _ := strings.Cut(name, "-")
	return f
}

// customPrefix is how GCE names a family's custom machine types: N1's are
// custom-VCPU-MiB, the others FAMILY-custom-VCPU-MiB.
func customPrefix(family string) string {
	if family == "n1" {
		return "custom-"
	}
	return family + "-custom-"
}

// customLimit is one row of custom.csv.
type customLimit struct {
	family                                                   string
	minVCPU, maxVCPU, vcpuStep, minMiBPerVCPU, maxMiBPerVCPU int64
	mibStep, maxMiB                                          int64
}

// customType is one custom machine type and the family that prices it.
type customType struct {
	catalog.Type
	family string
}

// customTypes expands the custom limits into a bounded grid: every vCPU
// count a row allows up to maxCustomVCPU, with memory at every whole GiB
// per vCPU within the row's per-vCPU range, a multiple of its step, and
// within its total cap.
func customTypes(limits []customLimit) []customType {
	seen := map[string]bool{}
	var types []customType
	for _, l := range limits {
		for v := l.minVCPU; v <= min(l.maxVCPU, maxCustomVCPU); v += l.vcpuStep {
			for gib := int64(1); gib*1024 <= l.maxMiBPerVCPU; gib++ {
				mib := v * gib * 1024
				if gib*1024 < l.minMiBPerVCPU || mib%l.mibStep != 0 || (l.maxMiB > 0 && mib > l.maxMiB) {
					continue
				}
				name := fmt.Sprintf("%s%d-%d", customPrefix(l.family), v, mib)
				if seen[name] {
					continue
				}
				seen[name] = true
				types = append(types, customType{
					Type:   catalog.Type{Name: name, VCPU: v, MemoryMiB: mib, Arch: string(pluginapi.ArchAMD64)},
					family: l.family,
				})
			}
		}
	}
	return types
}

var (
	ratesHeader     = []string{"family", "region", "capacity_type", "usd_per_vcpu_hour", "usd_per_gib_hour"}
	discountsHeader = []string{"family", "region", "pricing", "numerator", "denominator"}
	customHeader    = []string{"family", "min_vcpu", "max_vcpu", "vcpu_step", "min_mib_per_vcpu", "max_mib_per_vcpu", "mib_step", "max_mib"}
)

// readPricing reads a rate table and the spot ratios of one kind of
// pricing ("predefined" or "custom"). A spot row of the rate table holds
// the ratio's numerator (the file gives no spot memory rate); it and the
// on-demand vCPU rate must equal the ratio's two numbers.
func readPricing(ratesPath, discountsPath, kind string) (pricing, error) {
	p := pricing{rates: map[famKey]rate{}, ratios: map[famKey]ratio{}}
	spotVCPU := map[famKey]float64{}
	err := catalog.ReadTableFile(ratesPath, ratesHeader, func(f *catalog.Fields) error {
		k := famKey{region: f.Str(1), family: f.Str(0)}
		if k.family == "" || k.region == "" {
			return errors.New("family and region are required")
		}
		switch ct := pluginapi.CapacityType(f.Str(2)); ct {
		case pluginapi.CapacityOnDemand:
			if _, dup := p.rates[k]; dup {
				return fmt.Errorf("%s %s on-demand appears twice", k.family, k.region)
			}
			p.rates[k] = rate{vcpu: f.Price(3), gib: f.Price(4)}
		case pluginapi.CapacitySpot:
			if _, dup := spotVCPU[k]; dup {
				return fmt.Errorf("%s %s spot appears twice", k.family, k.region)
			}
			if f.Str(4) != "" {
				return errors.New("a spot row's usd_per_gib_hour must be empty: spot prices come from the spot ratio")
			}
			spotVCPU[k] = f.Price(3)
		default:
			return fmt.Errorf("capacity_type %q is neither on-demand nor spot", ct)
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	err = catalog.ReadTableFile(discountsPath, discountsHeader, func(f *catalog.Fields) error {
		if f.Str(2) != "predefined" && f.Str(2) != "custom" {
			return fmt.Errorf("pricing %q is neither predefined nor custom", f.Str(2))
		}
		if f.Str(2) != kind {
			return nil
		}
		k := famKey{region: f.Str(1), family: f.Str(0)}
		if _, dup := p.ratios[k]; dup {
			return fmt.Errorf("%s %s %s appears twice", k.family, k.region, kind)
		}
		q := ratio{num: f.Price(3), den: f.Price(4)}
		if q.den == 0 {
			return errors.New("denominator is zero")
		}
		p.ratios[k] = q
		return nil
	})
	if err != nil {
		return p, err
	}
	ratesName, discountsName := filepath.Base(ratesPath), filepath.Base(discountsPath)
	for k, q := range p.ratios {
		if v, ok := spotVCPU[k]; ok && v != q.num {
			return p, fmt.Errorf("reading %s: %s %s spot vCPU rate %v is not the numerator %v in %s", ratesName, k.family, k.region, v, q.num, discountsName)
		}
		if r, ok := p.rates[k]; ok && r.vcpu != q.den {
			return p, fmt.Errorf("reading %s: %s %s on-demand vCPU rate %v is not the denominator %v in %s", ratesName, k.family, k.region, r.vcpu, q.den, discountsName)
		}
	}
	return p, nil
}

// readCustom reads custom.csv; an empty max_mib means no total cap.
func readCustom(path string) ([]customLimit, error) {
	var limits []customLimit
	err := catalog.ReadTableFile(path, customHeader, func(f *catalog.Fields) error {
		l := customLimit{
			family: f.Str(0), minVCPU: f.Int(1), maxVCPU: f.Int(2), vcpuStep: f.Int(3),
			minMiBPerVCPU: f.Int(4), maxMiBPerVCPU: f.Int(5), mibStep: f.Int(6), maxMiB: f.Int(7),
		}
		switch {
		case l.family == "":
			return errors.New("family is required")
		case l.minVCPU < 1 || l.vcpuStep < 1 || l.maxVCPU < l.minVCPU:
			return fmt.Errorf("vCPU range %d..%d step %d is empty or has no step", l.minVCPU, l.maxVCPU, l.vcpuStep)
		case l.minMiBPerVCPU < 1 || l.maxMiBPerVCPU < l.minMiBPerVCPU || l.mibStep < 1:
			return fmt.Errorf("memory range %d..%d MiB per vCPU step %d is empty or has no step", l.minMiBPerVCPU, l.maxMiBPerVCPU, l.mibStep)
		}
		limits = append(limits, l)
		return nil
	})
	return limits, err
}
