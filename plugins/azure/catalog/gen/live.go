package main

// The live path: what the cloud's APIs say, rather than specs.csv alone.
//
// -live-prices reads the Azure Retail Prices API, which needs no
// credentials; -live-specs reads the VM sizes from Azure Resource Manager's
// Resource SKUs list with the caller's credentials. Both read -regions, and
// both reach outside only through a world, which tests replace with local
// fakes (the endpoint flags point the generator at them).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

const (
	// defaultRegions are the main regions the live flags read unless
	// -regions names others.
	defaultRegions = "eastus,eastus2,westus2,westeurope,northeurope,southeastasia"
	// defaultPricesURL is the Azure Retail Prices API.
	defaultPricesURL = "https://prices.azure.com/api/retail/prices"
	// pricesAPIVersion is the Retail Prices API version asked for: it
	// reports isPrimaryMeterRegion and accepts meterRegion='primary'.
	pricesAPIVersion = "2023-01-01-preview"
	// armcomputeVersion is the armcompute/v8 module this build links (the
	// tests check it against go.mod) and resourceSKUsAPIVersion the ARM API
	// version it sends for Resource SKUs (the tests check what the SDK
	// sends). Both are recorded in the size source's ref.
	armcomputeVersion      = "v8.3.0"
	resourceSKUsAPIVersion = "2021-07-01"
	// maxPages bounds one region's price pages, against a NextPageLink
	// that never ends: a region's Virtual Machines meters fill a few
	// hundred pages at most.
	maxPages = 1000
)

// liveOptions are the flags of the live path.
type liveOptions struct {
	prices, specs bool
	regions       string
	pricesURL     string
	armEndpoint   string
	subscription  string
	now           string
	retries       int
}

// liveOnly are the flags that mean nothing without -live-prices or
// -live-specs.
var liveOnly = []string{"regions", "now", "retries"}

func (l *liveOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.prices, "live-prices", false, "add the Linux on-demand and spot prices of -regions from the Azure Retail Prices API (no credentials needed)")
	fs.BoolVar(&l.specs, "live-specs", false, "take the VM sizes of -regions from Azure Resource Manager (Resource SKUs) instead of specs.csv; needs Azure credentials and a subscription")
	fs.StringVar(&l.regions, "regions", defaultRegions, "comma-separated Azure regions (armRegionName) that -live-prices and -live-specs read")
	fs.StringVar(&l.pricesURL, "prices-url", defaultPricesURL, "Retail Prices API endpoint for -live-prices (a local fake in tests)")
	fs.StringVar(&l.armEndpoint, "arm-endpoint", "", "Azure Resource Manager endpoint for -live-specs (default the public cloud's; plain http only to a loopback fake)")
	fs.StringVar(&l.subscription, "subscription", "", "subscription ID for -live-specs (default $AZURE_SUBSCRIPTION_ID)")
	fs.StringVar(&l.now, "now", "", "run time that a live build records as generatedAt and its sources' date (RFC 3339; default the clock)")
	fs.IntVar(&l.retries, "retries", 3, "how often a live request is retried after HTTP 429 or 5xx")
}

func (l *liveOptions) enabled() bool { return l.prices || l.specs }

// check refuses flags that would do nothing.
func (l *liveOptions) check(fs *flag.FlagSet) error {
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "date" && l.enabled():
			errs = append(errs, errors.New("-date is for offline builds: a live build records its run time (-now)"))
		case (f.Name == "subscription" || f.Name == "arm-endpoint") && !l.specs:
			errs = append(errs, fmt.Errorf("-%s needs -live-specs", f.Name))
		case f.Name == "prices-url" && !l.prices:
			errs = append(errs, fmt.Errorf("-%s needs -live-prices", f.Name))
		case slices.Contains(liveOnly, f.Name) && !l.enabled():
			errs = append(errs, fmt.Errorf("-%s needs -live-prices or -live-specs", f.Name))
		}
	})
	if l.retries < 0 {
		errs = append(errs, fmt.Errorf("-retries %d is negative", l.retries))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("parsing flags: %w", err)
	}
	return nil
}

// world is how the live paths reach outside the process.
type world struct {
	getenv func(string) string
	// client carries the Retail Prices API's requests and ARM's.
	client     *http.Client
	credential func() (azcore.TokenCredential, error)
}

func realWorld() world {
	return world{
		getenv: os.Getenv,
		client: &http.Client{Timeout: 2 * time.Minute},
		credential: func() (azcore.TokenCredential, error) {
			return azidentity.NewDefaultAzureCredential(nil)
		},
	}
}

// apply rebuilds c from the live sources the flags name, sizes before
// prices (prices are kept for the catalog's types only), and returns the
// generator's report: a summary line and one line per live source.
func (l *liveOptions) apply(ctx context.Context, w world, c *catalog.Catalog) (string, error) {
	regions, err := parseRegions(l.regions)
	if err != nil {
		return "", err
	}
	now := time.Now().UTC().Truncate(time.Second)
	if l.now != "" {
		if now, err = time.Parse(time.RFC3339, l.now); err != nil {
			return "", fmt.Errorf("parsing -now: %w", err)
		}
		now = now.UTC()
	}
	var lines []string
	if l.specs {
		line, err := l.applySpecs(ctx, w, c, regions, now)
		if err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	if l.prices {
		line, err := l.applyPrices(ctx, w, c, regions, now)
		if err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	c.GeneratedAt, c.Live = now, true
	return strings.Join(append([]string{head(c)}, lines...), "\n  "), nil
}

var regionName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

func parseRegions(s string) ([]string, error) {
	regions, err := catalog.ParseRegions(s)
	if err != nil {
		return nil, err
	}
	for _, r := range regions {
		if !regionName.MatchString(r) {
			return nil, fmt.Errorf("parsing -regions: %q is not an Azure region name such as eastus", r)
		}
	}
	return regions, nil
}

// day is the date of t, as a live source records it.
func day(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// head is the report's first line: what the catalog holds.
func head(c *catalog.Catalog) string {
	var onDemand, spot int
	names := make([]string, 0, len(c.Regions))
	for _, r := range c.Regions {
		names = append(names, r.Name)
		for _, p := range r.Prices {
			if p.OnDemand != nil {
				onDemand++
			}
			if p.Spot != nil {
				spot++
			}
		}
	}
	slices.Sort(names)
	regions := "no regions (every price unknown)"
	if len(names) > 0 {
		regions = "regions " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%d types, %s, %d priced offerings (%d on-demand, %d spot)", len(c.Types), regions, onDemand+spot, onDemand, spot)
}

// ----- prices: the Azure Retail Prices API -----

// retailPage is one page of the Retail Prices API's answer.
type retailPage struct {
	Items        []retailItem `json:"Items"`
	NextPageLink string       `json:"NextPageLink"`
}

// retailItem is one meter's price; only the fields the generator reads.
type retailItem struct {
	CurrencyCode         string  `json:"currencyCode"`
	RetailPrice          float64 `json:"retailPrice"`
	ArmRegionName        string  `json:"armRegionName"`
	ArmSkuName           string  `json:"armSkuName"`
	EffectiveStartDate   string  `json:"effectiveStartDate"`
	EffectiveEndDate     string  `json:"effectiveEndDate"`
	MeterID              string  `json:"meterId"`
	MeterName            string  `json:"meterName"`
	SkuName              string  `json:"skuName"`
	ProductName          string  `json:"productName"`
	ServiceName          string  `json:"serviceName"`
	UnitOfMeasure        string  `json:"unitOfMeasure"`
	Type                 string  `json:"type"`
	IsPrimaryMeterRegion *bool   `json:"isPrimaryMeterRegion"`
}

// classify decides what a meter prices: a Linux pay-as-you-go or spot
// hour of the VM size armSkuName in region, in US dollars, in effect at
// now. It returns the capacity type and the meter's start, or the reason
// the meter is left out.
func classify(it retailItem, region string, now time.Time) (pluginapi.CapacityType, time.Time, string) {
	has := func(s string) bool { return strings.Contains(it.SkuName, s) || strings.Contains(it.MeterName, s) }
	switch {
	case it.ServiceName != "Virtual Machines":
		return "", time.Time{}, "another service"
	case it.ArmRegionName != region:
		return "", time.Time{}, "another region"
	case it.Type != "Consumption":
		return "", time.Time{}, "not Consumption"
	case it.CurrencyCode != "USD":
		return "", time.Time{}, "not USD"
	case it.UnitOfMeasure != "1 Hour":
		return "", time.Time{}, "not per hour"
	case strings.Contains(it.ProductName, "Windows"):
		return "", time.Time{}, "Windows"
	case has("Low Priority"):
		return "", time.Time{}, "Low Priority"
	case it.IsPrimaryMeterRegion != nil && !*it.IsPrimaryMeterRegion:
		return "", time.Time{}, "not the primary meter region"
	case it.ArmSkuName == "":
		return "", time.Time{}, "no armSkuName"
	case !(it.RetailPrice > 0) || math.IsInf(it.RetailPrice, 0):
		return "", time.Time{}, "not a positive price"
	}
	var start time.Time
	if it.EffectiveStartDate != "" {
		var err error
		if start, err = time.Parse(time.RFC3339, it.EffectiveStartDate); err != nil {
			return "", time.Time{}, "unreadable effectiveStartDate"
		}
	}
	if start.After(now) {
		return "", time.Time{}, "not yet in effect"
	}
	if it.EffectiveEndDate != "" {
		end, err := time.Parse(time.RFC3339, it.EffectiveEndDate)
		if err != nil {
			return "", time.Time{}, "unreadable effectiveEndDate"
		}
		if !end.After(now) {
			return "", time.Time{}, "expired"
		}
	}
	if has("Spot") {
		return pluginapi.CapacitySpot, start, ""
	}
	return pluginapi.CapacityOnDemand, start, ""
}

// meter is the meter chosen for one region, type and capacity type, and
// how many meters were in the running.
type meter struct {
	item   retailItem
	start  time.Time
	n      int
	differ bool // the meters in the running had different prices
}

// beats is the rule that picks one meter when several remain for one
// region, type and capacity type: the newest effectiveStartDate (the price
// now in effect), then the lowest price, then the lowest meterId.
func (m meter) beats(o meter) bool {
	if !m.start.Equal(o.start) {
		return m.start.After(o.start)
	}
	if m.item.RetailPrice != o.item.RetailPrice {
		return m.item.RetailPrice < o.item.RetailPrice
	}
	return m.item.MeterID < o.item.MeterID
}

type priceKey struct {
	region, typ string
	capacity    pluginapi.CapacityType
}

// applyPrices adds the Retail Prices API's prices of regions to c.
func (l *liveOptions) applyPrices(ctx context.Context, w world, c *catalog.Catalog, regions []string, now time.Time) (string, error) {
	var read int
	dropped := map[string]int{}
	chosen := map[priceKey]*meter{}
	for _, region := range regions {
		items, err := l.fetchPrices(ctx, w.client, region)
		if err != nil {
			return "", err
		}
		if len(items) == 0 {
			return "", fmt.Errorf("reading the Azure Retail Prices API: no Virtual Machines prices in %q (is it an Azure region name such as eastus?)", region)
		}
		read += len(items)
		for _, it := range items {
			capacity, start, reason := classify(it, region, now)
			if reason != "" {
				dropped[reason]++
				continue
			}
			k := priceKey{region, it.ArmSkuName, capacity}
			m := meter{item: it, start: start, n: 1}
			cur, ok := chosen[k]
			if !ok {
				chosen[k] = &m
				continue
			}
			m.n, m.differ = cur.n+1, cur.differ || cur.item.RetailPrice != it.RetailPrice
			if m.beats(*cur) {
				*cur = m
			} else {
				cur.n, cur.differ = m.n, m.differ
			}
		}
	}
	rows := make([]catalog.PriceRow, 0, len(chosen))
	var conflicts, differ int
	for k, m := range chosen {
		if m.n > 1 {
			conflicts++
			if m.differ {
				differ++
			}
		}
		rows = append(rows, catalog.PriceRow{Region: k.region, Type: k.typ, CapacityType: k.capacity, USDPerHour: m.item.RetailPrice})
	}
	slices.SortFunc(rows, func(a, b catalog.PriceRow) int {
		return strings.Compare(a.Region+" "+a.Type+" "+string(a.CapacityType), b.Region+" "+b.Type+" "+string(b.CapacityType))
	})
	skipped := c.AddPrices(rows)
	var priced []string
	for _, r := range c.Regions {
		priced = append(priced, r.Name)
	}
	if len(priced) == 0 {
		return "", fmt.Errorf("reading the Azure Retail Prices API: none of its %d Linux prices is for a type the catalog lists", len(rows))
	}
	slices.Sort(priced)
	c.Sources = append(c.Sources, catalog.Source{
		Name:   "Azure Retail Prices API (Virtual Machines, Linux, Consumption: pay-as-you-go and spot)",
		Ref:    l.pricesURL + "?api-version=" + pricesAPIVersion,
		Date:   day(now),
		Covers: "on-demand and spot prices: " + strings.Join(priced, ", "),
	})

	var unknown []string
	for _, r := range skipped {
		if !slices.Contains(unknown, r.Type) {
			unknown = append(unknown, r.Type)
		}
	}
	slices.Sort(unknown)
	var total int
	reasons := make([]string, 0, len(dropped))
	for reason, n := range dropped {
		total += n
		reasons = append(reasons, fmt.Sprintf("%s %d", reason, n))
	}
	slices.Sort(reasons)
	s := fmt.Sprintf("prices: %d meters read in %d regions, %d left out", read, len(regions), total)
	if len(reasons) > 0 {
		s += " (" + strings.Join(reasons, ", ") + ")"
	}
	s += fmt.Sprintf("; %d conflicts, %d of them with different prices (kept the newest effectiveStartDate, then the lowest price)", conflicts, differ)
	s += fmt.Sprintf("; skipped %d price rows for %d types without specs", len(skipped), len(unknown))
	if len(unknown) > 0 {
		s += " (" + catalog.FirstFew(unknown, 5) + ")"
	}
	if missing := len(regions) - len(priced); missing > 0 {
		s += fmt.Sprintf("; %d regions price no catalog type", missing)
	}
	return s, nil
}

// fetchPrices reads every page of region's Consumption Virtual Machines
// meters (the filter cannot exclude Windows; classify does).
func (l *liveOptions) fetchPrices(ctx context.Context, client *http.Client, region string) ([]retailItem, error) {
	u, err := url.Parse(l.pricesURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("parsing -prices-url: %q is not an http(s) URL", l.pricesURL)
	}
	q := u.Query()
	q.Set("api-version", pricesAPIVersion)
	q.Set("meterRegion", "'primary'")
	q.Set("$filter", fmt.Sprintf("serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq '%s'", region))
	u.RawQuery = q.Encode()
	var items []retailItem
	seen := map[string]bool{}
	for next, page := u.String(), 1; next != ""; page++ {
		if page > maxPages || seen[next] {
			return nil, fmt.Errorf("reading the Azure Retail Prices API for %s: its NextPageLink repeats or runs past %d pages", region, maxPages)
		}
		seen[next] = true
		var p retailPage
		if err := getJSON(ctx, client, next, l.retries, &p); err != nil {
			return nil, fmt.Errorf("reading the Azure Retail Prices API for %s (page %d): %w", region, page, err)
		}
		items = append(items, p.Items...)
		next = p.NextPageLink
	}
	return items, nil
}

// getJSON GETs rawURL into v, retrying up to retries times after HTTP 429
// or 5xx (waiting as Retry-After says, else 1s, 2s, 4s ...).
func getJSON(ctx context.Context, client *http.Client, rawURL string, retries int, v any) error {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return fmt.Errorf("GET %s: %w", rawURL, err)
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", "kip-catalog-gen")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", rawURL, err)
		}
		if resp.StatusCode == http.StatusOK {
			err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(v)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("GET %s: decoding the answer: %w", rawURL, err)
			}
			return nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		err = fmt.Errorf("GET %s: HTTP %s: %s", rawURL, resp.Status, strings.TrimSpace(string(body)))
		if attempt >= retries || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500) {
			return err
		}
		wait := time.Second << min(attempt, 5)
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s >= 0 {
			wait = time.Duration(min(s, 60)) * time.Second
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting to retry after %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// ----- sizes: Azure Resource Manager's Resource SKUs -----

// burstable matches the B-series sizes, whose baselines Resource SKUs
// does not give.
var burstable = regexp.MustCompile(`^Standard_B[0-9]`)

// gpuSources are the sources of specs.csv's GPU kinds, by the prefix of
// the sizes they cover.
var gpuSources = []struct {
	prefix string
	source catalog.Source
}{{"Standard_NC", ncv3Source}, {"Standard_NV", nvv3Source}}

// applySpecs replaces c's types with the virtual machine sizes Resource
// SKUs lists in regions. specs.csv still gives what the API lacks: a
// B-series size's baseline (a B size specs.csv lacks, or sizes with
// another vCPU count, is left out) and a GPU's kind and memory (when
// specs.csv has the size with the same GPU count).
func (l *liveOptions) applySpecs(ctx context.Context, w world, c *catalog.Catalog, regions []string, now time.Time) (string, error) {
	sub := l.subscription
	if sub == "" {
		sub = w.getenv("AZURE_SUBSCRIPTION_ID")
	}
	if sub == "" {
		return "", errors.New("-live-specs needs an Azure subscription: pass -subscription ID or set AZURE_SUBSCRIPTION_ID")
	}
	cfg, insecure, err := l.armCloud()
	if err != nil {
		return "", err
	}
	cred, err := w.credential()
	if err != nil {
		return "", credentialError(err)
	}
	// Ask for a token first, so that a missing credential reads as one
	// rather than as a failed list.
	rm := cfg.Services[cloud.ResourceManager]
	scope := strings.TrimSuffix(rm.Audience, "/") + "/.default"
	if _, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}}); err != nil {
		return "", credentialError(err)
	}
	retries := l.retries
	if retries == 0 {
		retries = -1 // azcore: 0 is its default (3), below 0 is none
	}
	opts := &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud:                           cfg,
			InsecureAllowCredentialWithHTTP: insecure,
			Retry:                           policy.RetryOptions{MaxRetries: int32(retries)},
		},
		// A read needs no resource provider registered on its behalf.
		DisableRPRegistration: true,
	}
	if w.client != nil {
		opts.Transport = w.client
	}
	client, err := armcompute.NewResourceSKUsClient(sub, cred, opts)
	if err != nil {
		return "", fmt.Errorf("creating the Azure Resource Manager client: %w", err)
	}

	sized := map[string]catalog.Type{}
	leftOut := map[string][]string{} // reason → sizes
	var disagree []string
	for _, region := range regions {
		n, err := listSizes(ctx, client, region, func(t catalog.Type, reason string) {
			if reason != "" {
				if !slices.Contains(leftOut[reason], t.Name) {
					leftOut[reason] = append(leftOut[reason], t.Name)
				}
				return
			}
			prev, ok := sized[t.Name]
			if !ok {
				sized[t.Name] = t
				return
			}
			if (prev.VCPU != t.VCPU || prev.MemoryMiB != t.MemoryMiB || prev.Arch != t.Arch || gpuCount(prev) != gpuCount(t)) && !slices.Contains(disagree, t.Name) {
				disagree = append(disagree, t.Name)
			}
		})
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", fmt.Errorf("reading Azure Resource Manager: no virtual machine sizes in %q (is it an Azure region name such as eastus?)", region)
		}
	}

	csv := map[string]catalog.Type{}
	for _, t := range c.Types {
		csv[t.Name] = t
	}
	types := make([]catalog.Type, 0, len(sized))
	used := map[string]bool{} // sources of specs.csv figures kept, by name
	use := func(s catalog.Source) { used[s.Name] = true }
	const noBaseline = "B-series sizes without a specs.csv baseline"
	for _, t := range sized {
		known, ok := csv[t.Name]
		if burstable.MatchString(t.Name) {
			if !ok || known.VCPU != t.VCPU || known.BaselineMilliCPU == 0 {
				leftOut[noBaseline] = append(leftOut[noBaseline], t.Name)
				continue
			}
			t.BaselineMilliCPU = known.BaselineMilliCPU
			use(baselineSource)
		}
		if t.GPU != nil && ok && known.GPU != nil && known.GPU.Count == t.GPU.Count && known.GPU.Kind != "" {
			t.GPU.Kind, t.GPU.MemoryMiB = known.GPU.Kind, known.GPU.MemoryMiB
			for _, g := range gpuSources {
				if strings.HasPrefix(t.Name, g.prefix) {
					use(g.source)
				}
			}
		}
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b catalog.Type) int { return strings.Compare(a.Name, b.Name) })
	var unlisted []string
	for _, t := range c.Types {
		if _, ok := sized[t.Name]; !ok {
			unlisted = append(unlisted, t.Name)
		}
	}
	c.Types = types
	srcs := slices.DeleteFunc(slices.Clone(c.Sources), func(s catalog.Source) bool { return !used[s.Name] })
	c.Sources = append([]catalog.Source{{
		Name:   "Azure Resource Manager Microsoft.Compute/skus (Resource SKUs list, virtualMachines)",
		Ref:    fmt.Sprintf("%s (api-version %s, armcompute/v8 %s)", rm.Endpoint, resourceSKUsAPIVersion, armcomputeVersion),
		Date:   day(now),
		Covers: "sizes: vCPU, memory, GPU count, arch: " + strings.Join(regions, ", "),
	}}, srcs...)

	s := fmt.Sprintf("specs: %d virtual machine sizes from Azure Resource Manager in %d regions", len(sized), len(regions))
	reasons := make([]string, 0, len(leftOut))
	for reason := range leftOut {
		reasons = append(reasons, reason)
	}
	slices.Sort(reasons)
	for _, reason := range reasons {
		names := leftOut[reason]
		slices.Sort(names)
		s += fmt.Sprintf("; left out %d %s (%s)", len(names), reason, catalog.FirstFew(names, 5))
	}
	if len(disagree) > 0 {
		slices.Sort(disagree)
		s += fmt.Sprintf("; %d sizes differ between regions, kept the first region's figures (%s)", len(disagree), catalog.FirstFew(disagree, 5))
	}
	s += fmt.Sprintf("; %d specs.csv sizes not listed", len(unlisted))
	if len(unlisted) > 0 {
		s += " (" + catalog.FirstFew(unlisted, 5) + ")"
	}
	return s, nil
}

func gpuCount(t catalog.Type) int32 {
	if t.GPU == nil {
		return 0
	}
	return t.GPU.Count
}

// listSizes calls size for every virtual machine size Resource SKUs lists
// in region, with the reason it is left out if it is, and returns how many
// it listed.
func listSizes(ctx context.Context, client *armcompute.ResourceSKUsClient, region string, size func(catalog.Type, string)) (int, error) {
	filter := fmt.Sprintf("location eq '%s'", region)
	pager := client.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: &filter})
	var n int
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("listing the virtual machine sizes in %s from Azure Resource Manager (Microsoft.Compute/skus): %w", region, err)
		}
		for _, sku := range page.Value {
			if sku == nil || sku.Name == nil || sku.ResourceType == nil || !strings.EqualFold(*sku.ResourceType, "virtualMachines") {
				continue
			}
			n++
			size(skuType(sku))
		}
	}
	return n, nil
}

// skuType reads a size from its Resource SKU capabilities: vCPUs (or
// vCPUsAvailable, which a constrained-core size has fewer of), MemoryGB,
// GPUs and CpuArchitectureType. A size without them, or with another
// architecture, comes with the reason it is left out.
func skuType(sku *armcompute.ResourceSKU) (catalog.Type, string) {
	caps := map[string]string{}
	for _, c := range sku.Capabilities {
		if c != nil && c.Name != nil && c.Value != nil {
			caps[*c.Name] = *c.Value
		}
	}
	t := catalog.Type{Name: *sku.Name}
	vcpu, err := strconv.ParseInt(caps["vCPUs"], 10, 64)
	if err != nil || vcpu <= 0 {
		return t, "sizes without vCPUs"
	}
	if s, ok := caps["vCPUsAvailable"]; ok {
		avail, err := strconv.ParseInt(s, 10, 64)
		if err != nil || avail <= 0 {
			return t, "sizes without vCPUs"
		}
		vcpu = min(vcpu, avail)
	}
	gb, err := strconv.ParseFloat(caps["MemoryGB"], 64)
	if err != nil || !(gb > 0) || math.IsInf(gb, 0) {
		return t, "sizes without MemoryGB"
	}
	t.VCPU, t.MemoryMiB = vcpu, int64(math.Round(gb*1024))
	if s, ok := caps["GPUs"]; ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return t, "sizes with an unreadable GPUs"
		}
		if n > 0 {
			t.GPU = &catalog.GPU{Count: int32(n)}
		}
	}
	switch strings.ToLower(caps["CpuArchitectureType"]) {
	case "x64":
		t.Arch = string(pluginapi.ArchAMD64)
	case "arm64":
		t.Arch = string(pluginapi.ArchARM64)
	default:
		return t, "sizes without a known CpuArchitectureType"
	}
	return t, ""
}

// armCloud is the cloud configuration that -arm-endpoint names, and
// whether it is a plain-http loopback fake that tokens may be sent to.
func (l *liveOptions) armCloud() (cloud.Configuration, bool, error) {
	if l.armEndpoint == "" {
		return cloud.AzurePublic, false, nil
	}
	u, err := url.Parse(l.armEndpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return cloud.Configuration{}, false, fmt.Errorf("parsing -arm-endpoint: %q is not an http(s) URL", l.armEndpoint)
	}
	insecure := u.Scheme == "http"
	if ip := net.ParseIP(u.Hostname()); insecure && u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return cloud.Configuration{}, false, fmt.Errorf("parsing -arm-endpoint: %s is plain http: tokens go in clear text only to a loopback address (a local fake)", l.armEndpoint)
	}
	public := cloud.AzurePublic.Services[cloud.ResourceManager]
	return cloud.Configuration{
		ActiveDirectoryAuthorityHost: cloud.AzurePublic.ActiveDirectoryAuthorityHost,
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: strings.TrimSuffix(l.armEndpoint, "/"), Audience: public.Audience},
		},
	}, insecure, nil
}

func credentialError(err error) error {
	return fmt.Errorf("-live-specs: no usable Azure credential (it signs in with azidentity's DefaultAzureCredential: "+
		"set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, use a workload or managed identity, "+
		"or sign in with `az login`): %w", err)
}
