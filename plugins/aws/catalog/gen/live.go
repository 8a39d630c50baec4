package main

// The -live mode: the catalog from the AWS APIs, with credentials from the
// SDK's default chain. Sizes come from DescribeInstanceTypes, which types
// each region sells from DescribeInstanceTypeOfferings, on-demand prices
// from the Price List Query API (GetProducts) and spot prices per zone from
// DescribeSpotPriceHistory. source/specs.csv supplies only what the APIs do
// not state: burstable baselines.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// defaultRegions are the regions -live covers unless -regions says
// otherwise; the first one is where the types are described.
var defaultRegions = []string{"us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1", "ap-northeast-1"}

// pricingRegion is where the Price List Query API is served; it prices
// every region.
const pricingRegion = "us-east-1"

// spotProduct is the DescribeSpotPriceHistory product description of Linux
// instances.
const spotProduct = "Linux/UNIX"

// liveOptions are the flags of -live.
type liveOptions struct {
	enabled                      bool
	regions                      string
	endpointEC2, endpointPricing string
	date                         string
}

func (l *liveOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.enabled, "live", false, "build from the AWS APIs instead of -karpenter (credentials from the SDK's default chain)")
	fs.StringVar(&l.regions, "regions", strings.Join(defaultRegions, ","), "with -live: comma-separated regions; the types are described in the first")
	fs.StringVar(&l.endpointEC2, "endpoint-ec2", "", "with -live: EC2 endpoint URL to use instead of AWS's (a local fake)")
	fs.StringVar(&l.endpointPricing, "endpoint-pricing", "", "with -live: Price List Query API endpoint URL to use instead of AWS's (a local fake)")
	fs.StringVar(&l.date, "date", "", "with -live: the run time as RFC 3339, recorded as generatedAt and used as the spot history's start (default now)")
}

// liveOnly are the flags that mean something only with -live.
var liveOnly = []string{"regions", "endpoint-ec2", "endpoint-pricing", "date"}

// check refuses -live with -karpenter, and -live's flags without -live.
func (l *liveOptions) check(fs *flag.FlagSet, karpenter string) error {
	if l.enabled && karpenter != "" {
		return errors.New("parsing flags: -live and -karpenter exclude each other")
	}
	var stray []string
	fs.Visit(func(f *flag.Flag) {
		if !l.enabled && slices.Contains(liveOnly, f.Name) {
			stray = append(stray, "-"+f.Name)
		}
	})
	if len(stray) > 0 {
		return fmt.Errorf("parsing flags: %s only apply with -live", strings.Join(stray, ", "))
	}
	return nil
}

// runTime is -date, or now; truncated to the second either way.
func (l *liveOptions) runTime() (time.Time, error) {
	if l.date == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	t, err := time.Parse(time.RFC3339, l.date)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing flags: -date: %w", err)
	}
	return t.UTC().Truncate(time.Second), nil
}

// liveClients are the SDK clients of one run: EC2 per region, and the
// Price List Query API.
type liveClients struct {
	cfg     aws.Config
	o       liveOptions
	pricing *pricing.Client
}

// newLiveClients loads the SDK's default configuration and checks that it
// holds credentials, so that a run without them fails before any call, and
// says what to set.
func newLiveClients(ctx context.Context, o liveOptions, region string) (*liveClients, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("loading the AWS SDK configuration: %w", err)
	}
	const how = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary ones), " +
		"set AWS_PROFILE to a profile in ~/.aws/config or ~/.aws/credentials, or run with an instance or task role"
	if cfg.Credentials == nil {
		return nil, errors.New("no AWS credentials: the SDK's default chain has no provider; " + how)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("no AWS credentials: the SDK's default chain found none; %s: %w", how, err)
	}
	if !creds.HasKeys() {
		return nil, errors.New("no AWS credentials: the SDK's default chain gave anonymous ones; " + how)
	}
	pc := pricing.NewFromConfig(cfg, func(po *pricing.Options) {
		po.Region = pricingRegion
		if o.endpointPricing != "" {
			po.BaseEndpoint = aws.String(o.endpointPricing)
		}
	})
	return &liveClients{cfg: cfg, o: o, pricing: pc}, nil
}

// ec2 returns an EC2 client for region.
func (lc *liveClients) ec2(region string) *ec2.Client {
	return ec2.NewFromConfig(lc.cfg, func(eo *ec2.Options) {
		eo.Region = region
		if lc.o.endpointEC2 != "" {
			eo.BaseEndpoint = aws.String(lc.o.endpointEC2)
		}
	})
}

// Reasons a described type is left out of the catalog.
const (
	leftPrevGen     = "previous-generation"
	leftArch        = "without an amd64 or arm64 architecture"
	leftNoBaseline  = "burstable without a baseline in specs.csv"
	leftBaselineCPU = "burstable whose specs.csv vCPU differs"
	leftNoSize      = "without a vCPU count or memory size"
)

// buildLive assembles the catalog from the AWS APIs and a one-line
// summary of what went in.
func buildLive(ctx context.Context, o options) (*catalog.Catalog, string, error) {
	now, err := o.live.runTime()
	if err != nil {
		return nil, "", err
	}
	regions, err := catalog.ParseRegions(o.live.regions)
	if err != nil {
		return nil, "", err
	}
	specs, err := catalog.ReadSpecsFile(filepath.Join(o.source, "specs.csv"))
	if err != nil {
		return nil, "", err
	}
	prevGen, err := readFamilies(filepath.Join(o.source, "previous_generation.txt"))
	if err != nil {
		return nil, "", err
	}
	lc, err := newLiveClients(ctx, o.live, regions[0])
	if err != nil {
		return nil, "", err
	}
	described, err := describeTypes(ctx, lc.ec2(regions[0]))
	if err != nil {
		return nil, "", fmt.Errorf("describing instance types in %s: %w", regions[0], err)
	}
	types, left := liveTypes(described, specs, prevGen)
	c := &catalog.Catalog{Schema: catalog.Schema, Cloud: "aws", GeneratedAt: now, Live: true, Types: types}
	known := make(map[string]bool, len(types))
	for _, t := range types {
		known[t.Name] = true
	}
	var st liveStats
	for _, region := range regions {
		client := lc.ec2(region)
		offered, err := offerings(ctx, client)
		if err != nil {
			return nil, "", fmt.Errorf("listing the instance types offered in %s: %w", region, err)
		}
		if len(offered) == 0 {
			return nil, "", fmt.Errorf("listing the instance types offered in %s: DescribeInstanceTypeOfferings returned none", region)
		}
		onDemand, conflicts, err := onDemandPrices(ctx, lc.pricing, region)
		if err != nil {
			return nil, "", fmt.Errorf("reading on-demand prices in %s: %w", region, err)
		}
		spot, err := spotPrices(ctx, client, now)
		if err != nil {
			return nil, "", fmt.Errorf("reading spot prices in %s: %w", region, err)
		}
		r := catalog.Region{Name: region, Prices: map[string]catalog.Price{}}
		for _, name := range offered {
			if !known[name] {
				if _, ok := described[name]; !ok && !slices.Contains(st.undescribed, name) {
					st.undescribed = append(st.undescribed, name)
				}
				continue
			}
			var p catalog.Price
			if v, ok := onDemand[name]; ok {
				p.OnDemand = &v
			}
			p.SpotByZone = spot[name]
			r.Prices[name] = p
		}
		c.Regions = append(c.Regions, r)
		for _, name := range conflicts {
			if !slices.Contains(st.conflicts, name) {
				st.conflicts = append(st.conflicts, name)
			}
		}
	}
	c.Sources = liveSources(now, regions, len(left[leftPrevGen]) > 0)
	var skipped []catalog.PriceRow
	if o.prices != "" {
		extra, err := catalog.ReadPricesFile(o.prices)
		if err != nil {
			return nil, "", err
		}
		skipped = c.AddPrices(extra)
		c.Sources = append(c.Sources, catalog.Source{
			Name:   filepath.Base(o.prices),
			Covers: "extra prices: " + strings.Join(regionsOf(extra), ", "),
		})
	}
	slices.SortFunc(c.Regions, func(a, b catalog.Region) int { return strings.Compare(a.Name, b.Name) })
	return c, liveSummary(c, regions[0], left, st, skipped), nil
}

// liveSources are the provenance of a -live catalog: the three APIs as of
// the run, and the hand-transcribed sources it still reads.
func liveSources(now time.Time, regions []string, prevGen bool) []catalog.Source {
	sorted := slices.Sorted(slices.Values(regions))
	list := strings.Join(sorted, ", ")
	s := []catalog.Source{
		{
			Name:   "AWS EC2 DescribeInstanceTypes",
			Date:   now,
			Covers: "types: vCPU, memory, GPUs, arch, spot support (described in " + regions[0] + "); with DescribeInstanceTypeOfferings, the types each region sells: " + list,
		},
		{
			Name:   "AWS Price List Query API",
			Date:   now,
			Covers: "on-demand prices (Linux, shared tenancy): " + list,
		},
		{
			Name:   "AWS EC2 DescribeSpotPriceHistory",
			Date:   now,
			Covers: "spot prices per zone (" + spotProduct + "): " + list,
		},
		specSources[1], // burstable baselines, through specs.csv
	}
	if prevGen {
		// previous_generation.txt's source; the rest of what it covers
		// in the offline catalog (mac2 arch) does not apply here.
		p := specSources[3]
		p.Covers = "previous-generation families (left out)"
		s = append(s, p)
	}
	return s
}

// describeTypes lists the current-generation instance types, including
// those the region does not sell (so that every region's offerings have
// sizes), by name.
func describeTypes(ctx context.Context, client ec2.DescribeInstanceTypesAPIClient) (map[string]ec2types.InstanceTypeInfo, error) {
	out := map[string]ec2types.InstanceTypeInfo{}
	p := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{
		Filters:                    []ec2types.Filter{{Name: aws.String("current-generation"), Values: []string{"true"}}},
		IncludeUnsupportedInRegion: aws.Bool(true),
		MaxResults:                 aws.Int32(100),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.InstanceTypes {
			if it.InstanceType != "" {
				out[string(it.InstanceType)] = it
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("DescribeInstanceTypes returned no types")
	}
	return out, nil
}

// liveTypes turns described types into catalog types, sorted by name, and
// returns the names of those left out by reason. A burstable type's
// baseline comes from specs (the API has no figure); a burstable type
// specs lacks, or sizes differently, is left out rather than given a
// guessed baseline.
func liveTypes(described map[string]ec2types.InstanceTypeInfo, specs []catalog.Type, prevGen map[string]bool) ([]catalog.Type, map[string][]string) {
	byName := make(map[string]catalog.Type, len(specs))
	for _, s := range specs {
		byName[s.Name] = s
	}
	left := map[string][]string{}
	var types []catalog.Type
	for _, name := range slices.Sorted(maps.Keys(described)) {
		t, reason := liveType(described[name], byName)
		if prevGen[family(name)] {
			reason = leftPrevGen
		}
		if reason != "" {
			left[reason] = append(left[reason], name)
			continue
		}
		types = append(types, t)
	}
	return types, left
}

// liveType converts one described type, or says why it is left out.
func liveType(it ec2types.InstanceTypeInfo, specs map[string]catalog.Type) (catalog.Type, string) {
	t := catalog.Type{Name: string(it.InstanceType)}
	if it.VCpuInfo != nil {
		t.VCPU = int64(aws.ToInt32(it.VCpuInfo.DefaultVCpus))
	}
	if it.MemoryInfo != nil {
		t.MemoryMiB = aws.ToInt64(it.MemoryInfo.SizeInMiB)
	}
	if t.VCPU <= 0 || t.MemoryMiB <= 0 {
		return t, leftNoSize
	}
	var archs []ec2types.ArchitectureType
	if it.ProcessorInfo != nil {
		archs = it.ProcessorInfo.SupportedArchitectures
	}
	switch {
	case slices.Contains(archs, ec2types.ArchitectureTypeX8664):
		t.Arch = string(pluginapi.ArchAMD64)
	case slices.Contains(archs, ec2types.ArchitectureTypeArm64):
		t.Arch = string(pluginapi.ArchARM64)
	default:
		return t, leftArch
	}
	t.GPU = liveGPU(it.GpuInfo)
	if aws.ToBool(it.BurstablePerformanceSupported) {
		s, ok := specs[t.Name]
		switch {
		case !ok || s.BaselineMilliCPU == 0:
			return t, leftNoBaseline
		case s.VCPU != t.VCPU:
			return t, leftBaselineCPU
		}
		t.BaselineMilliCPU = s.BaselineMilliCPU
	}
	t.NoSpot = !slices.Contains(it.SupportedUsageClasses, ec2types.UsageClassTypeSpot)
	return t, ""
}

// liveGPU sums a type's GPUs. The kind is the devices' name, lower-cased
// with spaces as '-' (the spelling of the EC2 API's accelerator names, such
// as "radeon-pro-v520"), and the memory is per GPU; either is left unknown
// when the devices differ.
func liveGPU(info *ec2types.GpuInfo) *catalog.GPU {
	if info == nil {
		return nil
	}
	var g catalog.GPU
	for i, d := range info.Gpus {
		kind := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(aws.ToString(d.Name))), " ", "-")
		var mem int64
		if d.MemoryInfo != nil {
			mem = int64(aws.ToInt32(d.MemoryInfo.SizeInMiB))
		}
		if i == 0 {
			g.Kind, g.MemoryMiB = kind, mem
		}
		if kind != g.Kind {
			g.Kind = ""
		}
		if mem != g.MemoryMiB {
			g.MemoryMiB = 0
		}
		g.Count += aws.ToInt32(d.Count)
	}
	if g.Count <= 0 {
		return nil
	}
	return &g
}

// offerings lists the types the client's region sells, sorted.
func offerings(ctx context.Context, client ec2.DescribeInstanceTypeOfferingsAPIClient) ([]string, error) {
	var names []string
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(client, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeRegion,
		MaxResults:   aws.Int32(1000),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.InstanceTypeOfferings {
			if n := string(o.InstanceType); n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// onDemandFilters select the Linux, shared-tenancy, no-pre-installed-software
// on-demand products of one region.
func onDemandFilters(region string) []pricingtypes.Filter {
	var f []pricingtypes.Filter
	for _, kv := range [][2]string{
		{"regionCode", region},
		{"operatingSystem", "Linux"},
		{"tenancy", "Shared"},
		{"preInstalledSw", "NA"},
		{"capacitystatus", "Used"},
		{"licenseModel", "No License required"},
	} {
		f = append(f, pricingtypes.Filter{Field: aws.String(kv[0]), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(kv[1])})
	}
	return f
}

// priceListItem is the part of one GetProducts PriceList entry (a JSON
// document in a string) that the catalog reads.
type priceListItem struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// onDemandPrices reads region's hourly on-demand prices in US dollars by
// type. Zero prices are ignored; a type with two different prices is
// left unpriced and returned in conflicts.
func onDemandPrices(ctx context.Context, client pricing.GetProductsAPIClient, region string) (map[string]float64, []string, error) {
	prices := map[string]float64{}
	var conflicts []string
	p := pricing.NewGetProductsPaginator(client, &pricing.GetProductsInput{
		ServiceCode:   aws.String("AmazonEC2"),
		Filters:       onDemandFilters(region),
		FormatVersion: aws.String("aws_v1"),
		MaxResults:    aws.Int32(100),
	})
	for n := 0; p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, doc := range page.PriceList {
			n++
			var item priceListItem
			if err := json.Unmarshal([]byte(doc), &item); err != nil {
				return nil, nil, fmt.Errorf("GetProducts price list item %d: %w", n, err)
			}
			typ := item.Product.Attributes.InstanceType
			if typ == "" {
				continue
			}
			for _, term := range item.Terms.OnDemand {
				for _, dim := range term.PriceDimensions {
					s, ok := dim.PricePerUnit["USD"]
					if !ok {
						continue
					}
					v, err := strconv.ParseFloat(s, 64)
					if err != nil || v < 0 {
						return nil, nil, fmt.Errorf("GetProducts price list item %d: %s: USD price %q is not a price", n, typ, s)
					}
					if v == 0 || slices.Contains(conflicts, typ) {
						continue
					}
					if old, ok := prices[typ]; ok && old != v {
						conflicts = append(conflicts, typ)
						delete(prices, typ)
						continue
					}
					prices[typ] = v
				}
			}
		}
	}
	slices.Sort(conflicts)
	return prices, conflicts, nil
}

// spotPrices reads the client's region's Linux spot prices as of start:
// the newest price per type and zone.
func spotPrices(ctx context.Context, client ec2.DescribeSpotPriceHistoryAPIClient, start time.Time) (map[string]map[string]float64, error) {
	type key struct{ typ, zone string }
	type seen struct {
		price float64
		at    time.Time
	}
	newest := map[key]seen{}
	p := ec2.NewDescribeSpotPriceHistoryPaginator(client, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{spotProduct},
		StartTime:           aws.Time(start),
		MaxResults:          aws.Int32(1000),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, sp := range page.SpotPriceHistory {
			k := key{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}
			if k.typ == "" || k.zone == "" {
				continue
			}
			v, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("DescribeSpotPriceHistory: %s in %s: spot price %q is not a price", k.typ, k.zone, aws.ToString(sp.SpotPrice))
			}
			if v == 0 {
				continue
			}
			at := aws.ToTime(sp.Timestamp)
			if old, ok := newest[k]; ok && !at.After(old.at) {
				continue
			}
			newest[k] = seen{v, at}
		}
	}
	out := map[string]map[string]float64{}
	for k, s := range newest {
		if out[k.typ] == nil {
			out[k.typ] = map[string]float64{}
		}
		out[k.typ][k.zone] = s.price
	}
	return out, nil
}

// liveStats are what a -live run counts beyond the catalog itself.
type liveStats struct {
	undescribed []string // offered somewhere, but not described
	conflicts   []string // two different on-demand prices somewhere
}

// liveSummary is the -live run's one-line report.
func liveSummary(c *catalog.Catalog, described string, left map[string][]string, st liveStats, skipped []catalog.PriceRow) string {
	var offerings, onDemand, spot, zones int
	var regions []string
	for _, r := range c.Regions {
		regions = append(regions, r.Name)
		for _, p := range r.Prices {
			offerings++
			if p.OnDemand != nil {
				onDemand++
			}
			if p.Spot != nil || len(p.SpotByZone) > 0 {
				spot++
			}
			zones += len(p.SpotByZone)
		}
	}
	s := fmt.Sprintf("%d types described in %s", len(c.Types), described)
	var parts []string
	for _, reason := range []string{leftPrevGen, leftArch, leftNoBaseline, leftBaselineCPU, leftNoSize} {
		if names := left[reason]; len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(names), reason, catalog.FirstFew(names, 5)))
		}
	}
	if len(parts) > 0 {
		s += " (left out: " + strings.Join(parts, ", ") + ")"
	}
	s += fmt.Sprintf(", regions %s, %d offerings: %d with an on-demand price, %d with spot prices (%d type-zone prices)",
		strings.Join(regions, ", "), offerings, onDemand, spot, zones)
	if len(st.undescribed) > 0 {
		slices.Sort(st.undescribed)
		s += fmt.Sprintf("; skipped %d offered types DescribeInstanceTypes did not describe (%s)", len(st.undescribed), catalog.FirstFew(st.undescribed, 5))
	}
	if len(st.conflicts) > 0 {
		slices.Sort(st.conflicts)
		s += fmt.Sprintf("; left %d types unpriced on demand for conflicting prices (%s)", len(st.conflicts), catalog.FirstFew(st.conflicts, 5))
	}
	if len(skipped) > 0 {
		s += fmt.Sprintf("; skipped %d extra price rows for types not in the catalog", len(skipped))
	}
	return s
}
