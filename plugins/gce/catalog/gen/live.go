package main

// The -live mode: the catalog from Google's APIs instead of the CSV
// tables. Sizes and the zones that sell each machine type come from the
// Compute Engine API (machineTypes.aggregatedList), prices from the Cloud
// Billing Catalog API (services.skus.list of Compute Engine), composed
// from per-vCPU, per-GiB and per-GPU SKUs. catalog/source supplies only
// what the APIs do not state: shared-core baselines and GPU memory
// (specs.csv) and the custom machine type grid (custom.csv). Both APIs are
// plain REST JSON, spoken with net/http: the Google Cloud client libraries
// would raise the gRPC and protobuf versions of the whole workspace.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

const (
	defaultComputeURL = "https://compute.googleapis.com/compute/v1"
	defaultBillingURL = "https://cloudbilling.googleapis.com/v1"
	// computeEngineService is Compute Engine's service ID in the Cloud
	// Billing Catalog.
	computeEngineService = "6F81-5844-456A"
	// cloudPlatformScope is the OAuth scope asked of Application Default
	// Credentials; both APIs accept it.
	cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"
	// maxPages bounds a listing, so that an API repeating itself cannot
	// keep the generator running.
	maxPages = 1000
	// maxBody bounds one response (a page of 5000 SKUs is a few MB).
	maxBody = 64 << 20
	// requestTimeout bounds one HTTP request.
	requestTimeout = 2 * time.Minute
)

// defaultRegions are the regions -live covers unless -regions says
// otherwise.
var defaultRegions = []string{"us-central1", "us-east1", "us-east4", "us-west1", "europe-west1", "europe-west4", "asia-southeast1"}

// familyArch is the architecture of every machine family the live path
// lists: the machineTypes API states none. The rule and its sources are in
// source/SOURCES.md ("Live generator"); a family it does not name is left
// out of the catalog.
var familyArch = map[string]pluginapi.Arch{
	"a2": pluginapi.ArchAMD64, "c2": pluginapi.ArchAMD64, "c2d": pluginapi.ArchAMD64,
	"c3": pluginapi.ArchAMD64, "c3d": pluginapi.ArchAMD64, "c4": pluginapi.ArchAMD64,
	"c4d": pluginapi.ArchAMD64, "e2": pluginapi.ArchAMD64, "f1": pluginapi.ArchAMD64,
	"g1": pluginapi.ArchAMD64, "g2": pluginapi.ArchAMD64, "m1": pluginapi.ArchAMD64,
	"n1": pluginapi.ArchAMD64, "n2": pluginapi.ArchAMD64, "n2d": pluginapi.ArchAMD64,
	"n4": pluginapi.ArchAMD64, "n4d": pluginapi.ArchAMD64, "t2d": pluginapi.ArchAMD64,
	"c4a": pluginapi.ArchARM64, "n4a": pluginapi.ArchARM64, "t2a": pluginapi.ArchARM64,
}

// liveOptions are the flags of -live.
type liveOptions struct {
	enabled                bool
	project, regions       string
	apiKey, accessToken    string
	computeURL, billingURL string
}

func (l *liveOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.enabled, "live", false, "build from the Compute Engine and Cloud Billing Catalog APIs instead of prices.csv and the rate tables")
	fs.StringVar(&l.project, "project", "", "with -live: the project whose machine types are listed (required)")
	fs.StringVar(&l.regions, "regions", strings.Join(defaultRegions, ","), "with -live: comma-separated regions to cover")
	fs.StringVar(&l.apiKey, "api-key", "", "with -live: API key for the Cloud Billing Catalog API (default $GCE_API_KEY; without either, the credentials below)")
	fs.StringVar(&l.accessToken, "access-token", "", "with -live: OAuth access token, e.g. from `gcloud auth print-access-token` (default $GCE_ACCESS_TOKEN; without either, Application Default Credentials)")
	fs.StringVar(&l.computeURL, "compute-url", defaultComputeURL, "with -live: base URL of the Compute Engine API (a local fake)")
	fs.StringVar(&l.billingURL, "billing-url", defaultBillingURL, "with -live: base URL of the Cloud Billing Catalog API (a local fake)")
}

// runTime is the catalog's generatedAt: -date when given (YYYY-MM-DD or
// RFC 3339), else now; truncated to the second either way.
func runTime(o options) (time.Time, error) {
	if !o.dateSet {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	t, err := time.Parse(time.RFC3339, o.date)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, o.date); err != nil {
			return time.Time{}, fmt.Errorf("parsing -date %q: want YYYY-MM-DD or an RFC 3339 time", o.date)
		}
	}
	return t.UTC().Truncate(time.Second), nil
}

// restAPI is one Google REST API: where it is, and how calls are
// authorised (an OAuth client, or an API key sent as X-Goog-Api-Key so
// that it never appears in a URL or an error). Its errors leave naming
// the API to the caller.
type restAPI struct {
	base   string
	client *http.Client
	key    string
}

// apis builds the two APIs' clients: the Compute Engine API with an OAuth
// token (-access-token or Application Default Credentials), the Billing
// Catalog with -api-key when there is one, else the same token.
func (l liveOptions) apis(ctx context.Context) (compute, billing restAPI, err error) {
	token := firstNonEmpty(l.accessToken, os.Getenv("GCE_ACCESS_TOKEN"))
	key := firstNonEmpty(l.apiKey, os.Getenv("GCE_API_KEY"))
	var ts oauth2.TokenSource
	if token != "" {
		ts = oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token, TokenType: "Bearer"})
	} else {
		creds, err := google.FindDefaultCredentials(ctx, cloudPlatformScope)
		if err != nil {
			return compute, billing, fmt.Errorf("finding Application Default Credentials for the Compute Engine API "+
				"(run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or pass -access-token): %w", err)
		}
		ts = creds.TokenSource
	}
	authed := oauth2.NewClient(ctx, ts)
	authed.Timeout = requestTimeout
	compute = restAPI{base: l.computeURL, client: authed}
	billing = restAPI{base: l.billingURL, client: authed}
	if key != "" {
		billing.client, billing.key = &http.Client{Timeout: requestTimeout}, key
	}
	return compute, billing, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// get fetches base+path?query and decodes the JSON answer into out. A
// status other than 200 is an error carrying Google's error message.
func (a restAPI) get(ctx context.Context, path string, query url.Values, out any) error {
	u := strings.TrimSuffix(a.base, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if a.key != "" {
		req.Header.Set("X-Goog-Api-Key", a.key)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("reading the answer to GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s: %s", resp.Status, errorMessage(body))
	}
	if len(body) > maxBody {
		return fmt.Errorf("the answer to GET %s is larger than %d bytes", path, maxBody)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding the answer to GET %s: %w", path, err)
	}
	return nil
}

// errorMessage is the message of a Google API error body
// ({"error": {"message": ...}}), or the start of the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(no body)"
	}
	return s
}

// page is one page of a list answer.
type page interface{ nextPage() string }

// listAll gets every page of a list, following nextPageToken, and hands
// each to each.
func listAll[P page](ctx context.Context, a restAPI, path string, query url.Values, each func(P) error) error {
	seen := map[string]bool{}
	for n := 1; ; n++ {
		var p P
		if err := a.get(ctx, path, query, &p); err != nil {
			return err
		}
		if err := each(p); err != nil {
			return err
		}
		token := p.nextPage()
		switch {
		case token == "":
			return nil
		case seen[token]:
			return fmt.Errorf("page token %q repeats", token)
		case n >= maxPages:
			return fmt.Errorf("more than %d pages", maxPages)
		}
		seen[token] = true
		query.Set("pageToken", token)
	}
}

// machineTypeList is a page of machineTypes.aggregatedList; items are
// keyed by scope ("zones/us-central1-a").
type machineTypeList struct {
	Items map[string]struct {
		MachineTypes []machineType `json:"machineTypes"`
	} `json:"items"`
	NextPageToken string `json:"nextPageToken"`
}

func (l machineTypeList) nextPage() string { return l.NextPageToken }

// machineType is the part of the API's MachineType the catalog uses.
type machineType struct {
	Name         string `json:"name"`
	GuestCpus    int64  `json:"guestCpus"`
	MemoryMb     int64  `json:"memoryMb"`
	IsSharedCpu  bool   `json:"isSharedCpu"`
	Zone         string `json:"zone"`
	Accelerators []struct {
		GuestAcceleratorType  string `json:"guestAcceleratorType"`
		GuestAcceleratorCount int64  `json:"guestAcceleratorCount"`
	} `json:"accelerators"`
	Deprecated *struct {
		State string `json:"state"`
	} `json:"deprecated"`
}

// listedType is one machine type as the API lists it, over all zones.
type listedType struct {
	t        catalog.Type // name, vCPU, memory, GPU count and kind
	shared   bool
	obsolete bool   // deprecated as OBSOLETE or DELETED: no longer usable
	mixedGPU string // set when the type lists several accelerator models
	zone     string // the first zone listing it, for error messages
	regions  map[string]bool
}

// spec is what must agree between the zones listing one type.
func (l *listedType) spec() string {
	return fmt.Sprintf("%d vCPU, %d MiB, shared %v, GPU %+v %s", l.t.VCPU, l.t.MemoryMiB, l.shared, l.t.GPU, l.mixedGPU)
}

// listMachineTypes lists every machine type in every zone of project.
func listMachineTypes(ctx context.Context, api restAPI, project string) (map[string]*listedType, error) {
	types := map[string]*listedType{}
	path := "/projects/" + url.PathEscape(project) + "/aggregated/machineTypes"
	err := listAll(ctx, api, path, url.Values{"maxResults": {"500"}}, func(p machineTypeList) error {
		for _, scope := range slices.Sorted(maps.Keys(p.Items)) {
			for _, mt := range p.Items[scope].MachineTypes {
				zone := mt.Zone
				if zone == "" {
					zone = strings.TrimPrefix(scope, "zones/")
				}
				region, ok := zoneRegion(zone)
				if !ok || mt.Name == "" {
					return fmt.Errorf("machine type %q in %q: no zone of a region", mt.Name, scope)
				}
				l := &listedType{
					t:        catalog.Type{Name: mt.Name, VCPU: mt.GuestCpus, MemoryMiB: mt.MemoryMb},
					shared:   mt.IsSharedCpu,
					obsolete: mt.Deprecated != nil && (mt.Deprecated.State == "OBSOLETE" || mt.Deprecated.State == "DELETED"),
					zone:     zone,
				}
				for _, a := range mt.Accelerators {
					if a.GuestAcceleratorCount <= 0 {
						continue
					}
					kind := gpuKind(a.GuestAcceleratorType)
					switch {
					case l.t.GPU == nil:
						l.t.GPU = &catalog.GPU{Count: int32(a.GuestAcceleratorCount), Kind: kind}
					case l.t.GPU.Kind == kind:
						l.t.GPU.Count += int32(a.GuestAcceleratorCount)
					default:
						l.mixedGPU = l.t.GPU.Kind + "+" + kind
					}
				}
				if old, ok := types[mt.Name]; ok {
					if old.spec() != l.spec() {
						return fmt.Errorf("machine type %s is %s in %s but %s in %s", mt.Name, old.spec(), old.zone, l.spec(), zone)
					}
					old.obsolete = old.obsolete && l.obsolete
					l = old
				} else {
					l.regions = map[string]bool{}
					types[mt.Name] = l
				}
				l.regions[region] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the machine types of project %q with the Compute Engine API: %w", project, err)
	}
	return types, nil
}

// zoneRegion is a zone's region: the zone name without its last
// dash-separated part (us-central1-a → us-central1).
func zoneRegion(zone string) (string, bool) {
	i := strings.LastIndexByte(zone, '-')
	if i <= 0 || i == len(zone)-1 {
		return "", false
	}
	return zone[:i], true
}

// gpuKind normalises an accelerator model as specs.csv writes it and as
// the host reads pods' requests: lower case, without the "nvidia-tesla-"
// or "nvidia-" prefix (nvidia-tesla-a100 → a100, nvidia-a100-80gb →
// a100-80gb, nvidia-l4 → l4).
func gpuKind(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, p := range []string{"nvidia-tesla-", "nvidia-"} {
		if t, ok := strings.CutPrefix(s, p); ok && t != "" {
			return t
		}
	}
	return s
}

// skuList is a page of services.skus.list.
type skuList struct {
	Skus          []sku  `json:"skus"`
	NextPageToken string `json:"nextPageToken"`
}

func (l skuList) nextPage() string { return l.NextPageToken }

// sku is the part of a Billing Catalog SKU the catalog uses.
type sku struct {
	SkuID       string `json:"skuId"`
	Description string `json:"description"`
	Category    struct {
		ResourceFamily string `json:"resourceFamily"`
		UsageType      string `json:"usageType"`
	} `json:"category"`
	ServiceRegions []string `json:"serviceRegions"`
	PricingInfo    []struct {
		PricingExpression struct {
			UsageUnit   string `json:"usageUnit"`
			TieredRates []struct {
				UnitPrice struct {
					CurrencyCode string      `json:"currencyCode"`
					Units        json.Number `json:"units"` // int64, which JSON writes as a string
					Nanos        int64       `json:"nanos"`
				} `json:"unitPrice"`
			} `json:"tieredRates"`
		} `json:"pricingExpression"`
	} `json:"pricingInfo"`
}

// resource is what a rate is per: a vCPU, a GiB of memory or a GPU.
type resource int

const (
	resCore resource = iota
	resRAM
	resGPU
)

// unit is the Billing Catalog usage unit of a rate per resource.
func (r resource) unit() string {
	if r == resRAM {
		return "GiBy.h"
	}
	return "h"
}

// rateItem is what one SKU prices: a family's predefined or custom vCPU
// or memory, or a GPU model (family is then the GPU kind).
type rateItem struct {
	family string
	custom bool
	res    resource
}

// rateKey is one rate: an item, in a region, for a capacity type.
type rateKey struct {
	region   string
	capacity pluginapi.CapacityType
	item     rateItem
}

// skuStemAliases are the SKU stems that do not follow the "FAMILY
// Instance" rule (see source/SOURCES.md, "Live generator").
var skuStemAliases = map[string]rateItem{
	"N1 Predefined Instance":    {family: "n1"},
	"Custom Instance":           {family: "n1", custom: true},
	"Compute optimized":         {family: "c2"},
	"Memory-optimized Instance": {family: "m1"},
}

// skuStem is the rule: a family's vCPU and memory SKUs are "N2 Instance
// Core", "N2D AMD Instance Ram", "C4A Arm Instance Core", "N2 Custom
// Instance Core" ..., less the " Core"/" Ram".
var skuStem = regexp.MustCompile(`^([A-Z][0-9]+[A-Z]?)(?: AMD| Arm)?( Custom)? Instance$`)

const (
	spotPrefix = "Spot Preemptible "
	runningIn  = " running in "
	gpuSpotIn  = " GPU attached to Spot Preemptible VMs running in "
	gpuIn      = " GPU running in "
)

// parseSKU says what a SKU prices, from its usage type and description
// (the rule is in the package doc); ok is false for a SKU the catalog
// does not use.
func parseSKU(s sku) (item rateItem, capacity pluginapi.CapacityType, ok bool) {
	if s.Category.ResourceFamily != "Compute" {
		return item, "", false
	}
	d := s.Description
	switch s.Category.UsageType {
	case "OnDemand":
		capacity = pluginapi.CapacityOnDemand
		if strings.HasPrefix(d, spotPrefix) {
			return item, "", false
		}
		if model, _, found := strings.Cut(d, gpuIn); found {
			return rateItem{family: gpuKind(strings.Join(strings.Fields(model), "-")), res: resGPU}, capacity, model != ""
		}
	case "Preemptible":
		capacity = pluginapi.CapacitySpot
		if model, _, found := strings.Cut(d, gpuSpotIn); found {
			return rateItem{family: gpuKind(strings.Join(strings.Fields(model), "-")), res: resGPU}, capacity, model != ""
		}
		var found bool
		if d, found = strings.CutPrefix(d, spotPrefix); !found {
			return item, "", false
		}
	default: // commitments, reservations
		return item, "", false
	}
	head, _, found := strings.Cut(d, runningIn)
	if !found {
		return item, "", false
	}
	stem, isCore := strings.CutSuffix(head, " Core")
	item.res = resCore
	if !isCore {
		var isRAM bool
		if stem, isRAM = strings.CutSuffix(head, " Ram"); !isRAM {
			return item, "", false
		}
		item.res = resRAM
	}
	if a, ok := skuStemAliases[stem]; ok {
		item.family, item.custom = a.family, a.custom
		return item, capacity, true
	}
	m := skuStem.FindStringSubmatch(stem)
	if m == nil {
		return item, "", false
	}
	item.family, item.custom = strings.ToLower(m[1]), m[2] != ""
	return item, capacity, true
}

// rates are the per-resource prices of the covered regions.
type rates struct {
	price     map[rateKey]float64
	ambiguous map[rateKey]bool
	skipped   []string // SKUs the rule matches whose unit or currency is not the rate's
}

// add records the rates a SKU gives in the covered regions. Two SKUs that
// give one rate different prices leave it unknown.
func (r *rates) add(s sku, regions map[string]bool) {
	item, capacity, ok := parseSKU(s)
	if !ok {
		return
	}
	if len(s.PricingInfo) == 0 || len(s.PricingInfo[0].PricingExpression.TieredRates) == 0 {
		r.skipped = append(r.skipped, s.Description)
		return
	}
	expr := s.PricingInfo[0].PricingExpression
	price := expr.TieredRates[len(expr.TieredRates)-1].UnitPrice
	units, err := strconv.ParseInt(firstNonEmpty(price.Units.String(), "0"), 10, 64)
	if err != nil || expr.UsageUnit != item.res.unit() || (price.CurrencyCode != "" && price.CurrencyCode != "USD") {
		r.skipped = append(r.skipped, s.Description)
		return
	}
	v := float64(units) + float64(price.Nanos)/1e9
	for _, region := range s.ServiceRegions {
		if !regions[region] {
			continue
		}
		k := rateKey{region: region, capacity: capacity, item: item}
		if old, dup := r.price[k]; dup && old != v {
			r.ambiguous[k] = true
		}
		r.price[k] = v
	}
}

func (r *rates) get(k rateKey) (float64, bool) {
	v, ok := r.price[k]
	return v, ok && !r.ambiguous[k]
}

// compose prices a type in a region for a capacity type: vCPU × the
// family's vCPU rate + GiB × its memory rate (+ GPUs × the GPU model's
// rate), rounded to a millionth of a dollar; nil when a rate is missing.
func (r *rates) compose(region string, capacity pluginapi.CapacityType, family string, custom bool, t catalog.Type) *float64 {
	core, okCore := r.get(rateKey{region, capacity, rateItem{family: family, custom: custom, res: resCore}})
	ram, okRAM := r.get(rateKey{region, capacity, rateItem{family: family, custom: custom, res: resRAM}})
	if !okCore || !okRAM {
		return nil
	}
	v := float64(t.VCPU)*core + float64(t.MemoryMiB)/1024*ram
	if t.GPU != nil {
		gpu, ok := r.get(rateKey{region, capacity, rateItem{family: t.GPU.Kind, res: resGPU}})
		if !ok {
			return nil
		}
		v += float64(t.GPU.Count) * gpu
	}
	return ptr(round(v))
}

// listRates lists Compute Engine's SKUs and keeps the rates of regions;
// project only labels errors (the Billing Catalog is not per project).
func listRates(ctx context.Context, api restAPI, project string, regions map[string]bool) (*rates, error) {
	r := &rates{price: map[rateKey]float64{}, ambiguous: map[rateKey]bool{}}
	path := "/services/" + computeEngineService + "/skus"
	err := listAll(ctx, api, path, url.Values{"pageSize": {"5000"}}, func(p skuList) error {
		for _, s := range p.Skus {
			r.add(s, regions)
		}
		return nil
	})
	if err != nil {
		how := "an OAuth token"
		if api.key != "" {
			how = "an API key"
		}
		return nil, fmt.Errorf("listing Compute Engine's SKUs (service %s) with the Cloud Billing Catalog API, for project %q with %s: %w", computeEngineService, project, how, err)
	}
	return r, nil
}

// Reasons a listed machine type is left out of the catalog.
const (
	leftObsolete = "obsolete"
	leftBundled  = "with bundled Local SSD or bare metal"
	leftArch     = "of a family without a known architecture"
	leftBaseline = "shared-core without a baseline in specs.csv"
	leftMixedGPU = "with several GPU models"
)

// liveSources are the sources of a live catalog; at is the run time.
func liveSources(l liveOptions, at time.Time) []catalog.Source {
	return []catalog.Source{
		{
			Name:   "Compute Engine API v1 machineTypes.aggregatedList",
			Ref:    l.computeURL,
			Date:   at,
			Covers: "types: vCPU, memory, GPU model and count, shared-core flag; the zones, so regions, selling each",
		},
		{
			Name:   "Cloud Billing Catalog API v1 services.skus.list, service " + computeEngineService + " (Compute Engine)",
			Ref:    l.billingURL,
			Date:   at,
			Covers: "on-demand and spot prices (USD), composed from the per-vCPU, per-GiB and per-GPU SKUs of each family and region",
		},
		{
			Name:    "Google Cloud documentation: General-purpose machine family; machine family pages (see SOURCES.md, Live generator)",
			Ref:     "https://cloud.google.com/compute/docs/general-purpose-machines",
			License: "CC-BY-4.0",
			Covers:  "architecture of each machine family (the API states none)",
		},
		{
			Name:    "catalog/source/specs.csv and custom.csv (Google Cloud documentation, see SOURCES.md)",
			Ref:     "https://cloud.google.com/compute/docs/general-purpose-machines",
			License: "CC-BY-4.0",
			Covers:  "shared-core baselines, GPU memory, custom machine type limits",
		},
		sources[2], // golang-samples: the N1 custom minimum
		sources[3], // docs: the E2 custom cap
	}
}

// buildLive assembles the catalog from the APIs and a one-line summary of
// what went in and what was left out.
func buildLive(ctx context.Context, o options) (*catalog.Catalog, string, error) {
	in, err := readLive(ctx, o)
	if err != nil {
		return nil, "", err
	}
	sel, err := selectTypes(in)
	if err != nil {
		return nil, "", err
	}
	c := &catalog.Catalog{Schema: catalog.Schema, Cloud: "gce", GeneratedAt: in.at, Live: true, Sources: liveSources(o.live, in.at), Types: sel.types}
	p := priceRegions(in, sel)
	c.Regions = p.regions
	return c, liveSummary(in, sel, p), nil
}

// liveInput is what buildLive reads: the options' regions and time, the
// source's specs and custom grid, and the APIs' machine types and rates.
type liveInput struct {
	regions []string
	at      time.Time
	known   map[string]catalog.Type // specs.csv, by name
	limits  []customLimit
	listed  map[string]*listedType
	rates   *rates
}

// readLive reads buildLive's input.
func readLive(ctx context.Context, o options) (*liveInput, error) {
	l := o.live
	if l.project == "" {
		return nil, errors.New("-live needs -project PROJECT: the Compute Engine API lists machine types per project")
	}
	in := &liveInput{known: map[string]catalog.Type{}}
	var err error
	if in.regions, err = catalog.ParseRegions(l.regions); err != nil {
		return nil, err
	}
	if in.at, err = runTime(o); err != nil {
		return nil, err
	}
	specs, err := catalog.ReadSpecsFile(filepath.Join(o.source, "specs.csv"))
	if err != nil {
		return nil, err
	}
	for _, t := range specs {
		in.known[t.Name] = t
	}
	if in.limits, err = readCustom(filepath.Join(o.source, "custom.csv")); err != nil {
		return nil, err
	}
	compute, billing, err := l.apis(ctx)
	if err != nil {
		return nil, err
	}
	if in.listed, err = listMachineTypes(ctx, compute, l.project); err != nil {
		return nil, err
	}
	covered := map[string]bool{}
	for _, r := range in.regions {
		covered[r] = true
	}
	if in.rates, err = listRates(ctx, billing, l.project, covered); err != nil {
		return nil, err
	}
	return in, nil
}

// selection is the catalog's types: the predefined ones the regions sell
// and can run, then the custom ones of the families sold there.
type selection struct {
	types        []catalog.Type
	nPredefined  int
	sells        map[string][]string // region → type names
	customFamily map[string]string   // custom type → its family
	left         map[string][]string // reason → type names left out
	customUnsold []string
}

// selectTypes picks the catalog's types from what the API lists.
func selectTypes(in *liveInput) (*selection, error) {
	sel := &selection{sells: map[string][]string{}, customFamily: map[string]string{}, left: map[string][]string{}}
	familyIn, err := sel.predefined(in)
	if err != nil {
		return nil, err
	}
	sel.nPredefined = len(sel.types)
	for _, ct := range customTypes(in.limits) {
		if _, ok := familyArch[ct.family]; !ok {
			sel.left[leftArch] = append(sel.left[leftArch], ct.Name)
			continue
		}
		sold := false
		for _, r := range in.regions {
			if familyIn[ct.family][r] {
				sel.sells[r] = append(sel.sells[r], ct.Name)
				sold = true
			}
		}
		if !sold {
			sel.customUnsold = append(sel.customUnsold, ct.Name)
			continue
		}
		ct.Arch = string(familyArch[ct.family])
		sel.customFamily[ct.Name] = ct.family
		sel.types = append(sel.types, ct.Type)
	}
	if len(sel.types) > maxTypes {
		return nil, fmt.Errorf("building the catalog: %d types, more than %d; tighten the custom grid or -regions", len(sel.types), maxTypes)
	}
	return sel, nil
}

// predefined adds the predefined types the regions sell and the catalog
// can hold, and returns, by family, the regions that sell a usable type
// of it (for custom types).
func (sel *selection) predefined(in *liveInput) (map[string]map[string]bool, error) {
	familyIn := map[string]map[string]bool{}
	listedIn := map[string]bool{} // regions the API lists any type in
	for _, name := range slices.Sorted(maps.Keys(in.listed)) {
		lt := in.listed[name]
		var sold []string
		for _, r := range in.regions {
			if lt.regions[r] {
				sold = append(sold, r)
			}
		}
		if len(sold) == 0 {
			continue
		}
		fam := family(name)
		if familyIn[fam] == nil {
			familyIn[fam] = map[string]bool{}
		}
		for _, r := range sold {
			listedIn[r] = true
			familyIn[fam][r] = familyIn[fam][r] || !lt.obsolete
		}
		t, why := predefinedType(name, lt, in.known)
		if why != "" {
			sel.left[why] = append(sel.left[why], name)
			continue
		}
		sel.types = append(sel.types, t)
		for _, r := range sold {
			sel.sells[r] = append(sel.sells[r], name)
		}
	}
	for _, r := range in.regions {
		if !listedIn[r] {
			return nil, fmt.Errorf("region %s: the Compute Engine API lists no machine type in any of its zones (is it a region's name?)", r)
		}
	}
	return familyIn, nil
}

// predefinedType is the catalog's type of a listed predefined machine
// type, with what specs.csv adds, or why it is left out.
func predefinedType(name string, lt *listedType, known map[string]catalog.Type) (catalog.Type, string) {
	t := lt.t
	arch, archKnown := familyArch[family(name)]
	t.Arch = string(arch)
	spec, inSpecs := known[name]
	switch {
	case lt.obsolete:
		return t, leftObsolete
	case strings.HasSuffix(name, "lssd") || strings.HasSuffix(name, "-metal"):
		return t, leftBundled
	case !archKnown:
		return t, leftArch
	case lt.mixedGPU != "":
		return t, leftMixedGPU
	case lt.shared && (!inSpecs || spec.BaselineMilliCPU <= 0):
		return t, leftBaseline
	}
	if lt.shared {
		t.BaselineMilliCPU = spec.BaselineMilliCPU
	}
	if t.GPU != nil && inSpecs && spec.GPU != nil && spec.GPU.Count == t.GPU.Count {
		t.GPU.MemoryMiB = spec.GPU.MemoryMiB
	}
	return t, ""
}

// regionPrices is the catalog's regions with their prices, and the counts the
// summary gives.
type regionPrices struct {
	regions         []catalog.Region // sorted by name
	priced, unknown int
	pricedSomewhere map[string]bool
}

// priceRegions prices each type in each region that sells it.
func priceRegions(in *liveInput, sel *selection) regionPrices {
	byName := map[string]catalog.Type{}
	for _, t := range sel.types {
		byName[t.Name] = t
	}
	p := regionPrices{pricedSomewhere: map[string]bool{}}
	for _, r := range in.regions {
		if len(sel.sells[r]) == 0 {
			continue
		}
		region := catalog.Region{Name: r, Prices: map[string]catalog.Price{}}
		for _, name := range sel.sells[r] {
			t := byName[name]
			var price catalog.Price
			if t.BaselineMilliCPU == 0 { // shared-core types are not billed per vCPU
				fam, custom := sel.customFamily[name], true
				if fam == "" {
					fam, custom = family(name), false
				}
				price.OnDemand = in.rates.compose(r, pluginapi.CapacityOnDemand, fam, custom, t)
				price.Spot = in.rates.compose(r, pluginapi.CapacitySpot, fam, custom, t)
			}
			n := count(price.OnDemand, price.Spot)
			p.priced += n
			p.unknown += 2 - n
			if n > 0 {
				p.pricedSomewhere[name] = true
			}
			region.Prices[name] = price
		}
		p.regions = append(p.regions, region)
	}
	slices.SortFunc(p.regions, func(a, b catalog.Region) int { return strings.Compare(a.Name, b.Name) })
	return p
}

// liveSummary is buildLive's one-line summary: what the catalog holds,
// and what it left out or could not price, and why.
func liveSummary(in *liveInput, sel *selection, p regionPrices) string {
	var regionNames []string
	for _, r := range p.regions {
		regionNames = append(regionNames, r.Name)
	}
	types := sel.types
	sum := fmt.Sprintf("live: %d types (%d predefined, %d custom up to %d vCPUs), regions %s, %d priced offerings, %d unknown",
		len(types), sel.nPredefined, len(types)-sel.nPredefined, maxCustomVCPU, strings.Join(regionNames, ", "), p.priced, p.unknown)
	var unpriced []string
	for _, t := range types {
		if !p.pricedSomewhere[t.Name] {
			unpriced = append(unpriced, t.Name)
		}
	}
	if len(unpriced) > 0 {
		slices.Sort(unpriced)
		sum += fmt.Sprintf("; %d types without any price (%s)", len(unpriced), catalog.FirstFew(unpriced, 5))
	}
	for _, reason := range []string{leftObsolete, leftBundled, leftArch, leftMixedGPU, leftBaseline} {
		if names := sel.left[reason]; len(names) > 0 {
			sum += fmt.Sprintf("; left out %d %s (%s)", len(names), reason, catalog.FirstFew(names, 5))
		}
	}
	if len(sel.customUnsold) > 0 {
		sum += fmt.Sprintf("; left out %d custom types of families not sold in the regions (%s)", len(sel.customUnsold), catalog.FirstFew(sel.customUnsold, 5))
	}
	rts := in.rates
	if len(rts.ambiguous) > 0 {
		var names []string
		for k := range rts.ambiguous {
			names = append(names, k.String())
		}
		slices.Sort(names)
		sum += fmt.Sprintf("; %d rates left unknown, priced differently by two SKUs (%s)", len(names), catalog.FirstFew(names, 5))
	}
	if len(rts.skipped) > 0 {
		slices.Sort(rts.skipped)
		sum += fmt.Sprintf("; skipped %d SKUs with an unexpected unit, currency or no price (%s)", len(rts.skipped), catalog.FirstFew(slices.Compact(rts.skipped), 3))
	}
	return sum
}

// String names a rate in the summary: region/capacity/family[-custom]/resource.
func (k rateKey) String() string {
	what := k.item.family
	if k.item.custom {
		what += "-custom"
	}
	return fmt.Sprintf("%s/%s/%s/%s", k.region, k.capacity, what, [...]string{"vcpu", "ram", "gpu"}[k.item.res])
}
