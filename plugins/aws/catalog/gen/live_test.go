package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi/catalog"
)

var update = flag.Bool("update", false, "rewrite testdata/live.json from what the -live run against the fakes gives")

// runAt is the -date of the live tests.
const runAt = "2026-11-21T10:00:00Z"

// The fakes below speak the wire protocols the real SDK speaks: EC2 Query
// (a form POST with Action=..., XML answers, errors as
// <Response><Errors><Error>) and the Price List Query API's JSON 1.1 (a JSON
// POST named by X-Amz-Target, PriceList entries as JSON documents in
// strings, errors as {"__type": ...}). Each answers only the operations
// the generator calls, checks the parameters it must send, and pages its
// answers with NextToken so that the generator's paginators are exercised.

// fakeError is an API error a fake answers an operation with.
type fakeError struct {
	status        int
	code, message string
}

// awsCall is one request a fake received.
type awsCall struct{ op, region, accessKey string }

// credentialScope is the part of a SigV4 Authorization header that names
// the access key and region: Credential=AKID/DATE/REGION/SERVICE/aws4_request.
var credentialScope = regexp.MustCompile(`Credential=([^/]+)/\d{8}/([^/]+)/[^/]+/aws4_request`)

type recorder struct {
	mu    sync.Mutex
	calls []awsCall
}

func (rec *recorder) record(r *http.Request, op string) awsCall {
	c := awsCall{op: op}
	if m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		c.accessKey, c.region = m[1], m[2]
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.calls = append(rec.calls, c)
	return c
}

func (rec *recorder) recorded() []awsCall {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.calls)
}

// EC2 Query shapes, as ec2's deserializers read them (lower-camel names,
// lists as <set><item>).
type (
	xmlType struct {
		InstanceType      string   `xml:"instanceType"`
		CurrentGeneration bool     `xml:"currentGeneration"`
		Burstable         bool     `xml:"burstablePerformanceSupported"`
		VCPU              int      `xml:"vCpuInfo>defaultVCpus"`
		MemoryMiB         int      `xml:"memoryInfo>sizeInMiB"`
		Archs             []string `xml:"processorInfo>supportedArchitectures>item"`
		UsageClasses      []string `xml:"supportedUsageClasses>item"`
		GPUs              []xmlGPU `xml:"gpuInfo>gpus>item"`
	}
	xmlGPU struct {
		Name         string `xml:"name"`
		Manufacturer string `xml:"manufacturer"`
		Count        int    `xml:"count"`
		MemoryMiB    int    `xml:"memoryInfo>sizeInMiB"`
	}
	xmlOffering struct {
		InstanceType string `xml:"instanceType"`
		LocationType string `xml:"locationType"`
		Location     string `xml:"location"`
	}
	xmlSpotPrice struct {
		InstanceType       string `xml:"instanceType"`
		ProductDescription string `xml:"productDescription"`
		SpotPrice          string `xml:"spotPrice"`
		Timestamp          string `xml:"timestamp"`
		AvailabilityZone   string `xml:"availabilityZone"`
	}
	xmlSet struct {
		XMLName xml.Name
		Items   []any `xml:"item"`
	}
	xmlResponse struct {
		XMLName   xml.Name
		Xmlns     string  `xml:"xmlns,attr"`
		RequestID string  `xml:"requestId"`
		Set       xmlSet  `xml:""`
		NextToken *string `xml:"nextToken"`
	}
	xmlErrorResponse struct {
		XMLName xml.Name `xml:"Response"`
		Code    string   `xml:"Errors>Error>Code"`
		Message string   `xml:"Errors>Error>Message"`
		ID      string   `xml:"RequestID"`
	}
)

// fakeEC2 answers DescribeInstanceTypes, DescribeInstanceTypeOfferings and
// DescribeSpotPriceHistory for the region each request is signed for.
type fakeEC2 struct {
	recorder
	t        *testing.T
	types    []xmlType
	offered  map[string][]string
	spot     map[string][]xmlSpotPrice
	start    string // the StartTime DescribeSpotPriceHistory must be sent
	pageSize int
	fail     map[string]fakeError
}

func (f *fakeEC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		f.error(w, fakeError{http.StatusBadRequest, "InvalidRequest", "want a form POST, got " + r.Method + " " + r.Header.Get("Content-Type")})
		return
	}
	if err := r.ParseForm(); err != nil {
		f.error(w, fakeError{http.StatusBadRequest, "InvalidRequest", err.Error()})
		return
	}
	form := r.PostForm
	op := form.Get("Action")
	call := f.record(r, op)
	if v := form.Get("Version"); v != "2016-11-15" {
		f.error(w, fakeError{http.StatusBadRequest, "InvalidParameterValue", "Version " + v})
		return
	}
	if e, ok := f.fail[op]; ok {
		f.error(w, e)
		return
	}
	// need fails the request when a parameter the generator must send is missing.
	need := func(key, want string) bool {
		if got := form.Get(key); got != want {
			f.t.Errorf("%s: %s = %q, want %q (form %v)", op, key, got, want, form)
			f.error(w, fakeError{http.StatusBadRequest, "InvalidParameterValue", key})
			return false
		}
		return true
	}
	var items []any
	var set string
	switch op {
	case "DescribeInstanceTypes":
		if !need("Filter.1.Name", "current-generation") || !need("Filter.1.Value.1", "true") || !need("IncludeUnsupportedInRegion", "true") {
			return
		}
		set = "instanceTypeSet"
		for _, t := range f.types {
			if t.CurrentGeneration {
				items = append(items, t)
			}
		}
	case "DescribeInstanceTypeOfferings":
		if !need("LocationType", "region") {
			return
		}
		set = "instanceTypeOfferingSet"
		for _, name := range f.offered[call.region] {
			items = append(items, xmlOffering{name, "region", call.region})
		}
	case "DescribeSpotPriceHistory":
		if !need("ProductDescription.1", spotProduct) || !need("StartTime", f.start) {
			return
		}
		set = "spotPriceHistorySet"
		for _, p := range f.spot[call.region] {
			items = append(items, p)
		}
	default:
		f.error(w, fakeError{http.StatusBadRequest, "InvalidAction", "The action " + op + " is not valid for this web service."})
		return
	}
	from := 0
	if tok := form.Get("NextToken"); tok != "" {
		var err error
		if from, err = strconv.Atoi(tok); err != nil || from > len(items) {
			f.error(w, fakeError{http.StatusBadRequest, "InvalidNextToken", "The token '" + tok + "' is invalid."})
			return
		}
	}
	to := min(from+f.pageSize, len(items))
	resp := xmlResponse{
		XMLName:   xml.Name{Local: op + "Response"},
		Xmlns:     "http://ec2.amazonaws.com/doc/2016-11-15/",
		RequestID: fmt.Sprintf("req-%d", len(f.recorded())),
		Set:       xmlSet{XMLName: xml.Name{Local: set}, Items: items[from:to]},
	}
	switch {
	case to < len(items):
		resp.NextToken = new(strconv.Itoa(to))
	case op == "DescribeSpotPriceHistory":
		resp.NextToken = new("") // EC2 ends this history with an empty token
	}
	f.write(w, http.StatusOK, resp)
}

func (f *fakeEC2) error(w http.ResponseWriter, e fakeError) {
	f.write(w, e.status, xmlErrorResponse{Code: e.code, Message: e.message, ID: "req-error"})
}

func (f *fakeEC2) write(w http.ResponseWriter, status int, v any) {
	data, err := xml.Marshal(v)
	if err != nil {
		f.t.Errorf("encoding a fake EC2 answer: %v", err)
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), data...))
}

// fakePricing answers AWSPriceListService.GetProducts.
type fakePricing struct {
	recorder
	t        *testing.T
	products map[string][]string // region → PriceList entries
	pageSize int
	fail     *fakeError
}

// getProductsRequest is GetProducts' JSON 1.1 input.
type getProductsRequest struct {
	ServiceCode   string
	FormatVersion string
	MaxResults    int
	NextToken     string
	Filters       []struct{ Field, Type, Value string }
}

func (f *fakePricing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService.")
	call := f.record(r, op)
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || op != "GetProducts" {
		f.write(w, http.StatusBadRequest, map[string]string{"__type": "UnknownOperationException", "message": r.Method + " " + r.Header.Get("X-Amz-Target")})
		return
	}
	if call.region != pricingRegion {
		f.t.Errorf("GetProducts signed for %q, want %s", call.region, pricingRegion)
	}
	if f.fail != nil {
		f.write(w, f.fail.status, map[string]string{"__type": f.fail.code, "Message": f.fail.message})
		return
	}
	var req getProductsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.write(w, http.StatusBadRequest, map[string]string{"__type": "InvalidParameterException", "Message": err.Error()})
		return
	}
	region := ""
	got := map[string]string{}
	for _, flt := range req.Filters {
		if flt.Type != "TERM_MATCH" {
			f.t.Errorf("GetProducts filter %+v is not TERM_MATCH", flt)
		}
		got[flt.Field] = flt.Value
		if flt.Field == "regionCode" {
			region = flt.Value
		}
	}
	want := map[string]string{
		"regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
		"capacitystatus": "Used", "licenseModel": "No License required",
	}
	if req.ServiceCode != "AmazonEC2" || region == "" || !reflect.DeepEqual(got, want) {
		f.t.Errorf("GetProducts service %q filters %v, want AmazonEC2 and %v", req.ServiceCode, got, want)
	}
	items := f.products[region]
	from, _ := strconv.Atoi(req.NextToken)
	to := min(from+f.pageSize, len(items))
	resp := map[string]any{"FormatVersion": "aws_v1", "PriceList": items[from:to]}
	if to < len(items) {
		resp["NextToken"] = strconv.Itoa(to)
	}
	f.write(w, http.StatusOK, resp)
}

func (f *fakePricing) write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		f.t.Errorf("encoding a fake pricing answer: %v", err)
	}
}

// product is one PriceList entry as the Price List Query API writes it:
// a JSON document in a string, with the on-demand price per hour in
// terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD. Each
// usd gives one price dimension; typ "" leaves instanceType out.
func product(t *testing.T, region, typ string, usd ...string) string {
	t.Helper()
	sku := fmt.Sprintf("SKU%X", len(region+typ)*7919+len(usd))
	attrs := map[string]string{
		"servicecode": "AmazonEC2", "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
		"preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required", "marketoption": "OnDemand",
	}
	if typ != "" {
		attrs["instanceType"] = typ
	}
	dims := map[string]any{}
	for i, p := range usd {
		dims[fmt.Sprintf("%s.JRTCKXETXF.6YS6EN2CT%d", sku, i)] = map[string]any{
			"unit": "Hrs", "description": "$" + p + " per On Demand Linux " + typ + " Instance Hour",
			"pricePerUnit": map[string]string{"USD": p}, "beginRange": "0", "endRange": "Inf",
		}
	}
	doc := map[string]any{
		"product":     map[string]any{"productFamily": "Compute Instance", "sku": sku, "attributes": attrs},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{
			"OnDemand": map[string]any{sku + ".JRTCKXETXF": map[string]any{"offerTermCode": "JRTCKXETXF", "sku": sku, "priceDimensions": dims}},
			"Reserved": map[string]any{sku + ".4NA7Y494T4": map[string]any{"priceDimensions": map[string]any{
				sku + ".4NA7Y494T4.6YS6EN2CT7": map[string]any{"unit": "Hrs", "pricePerUnit": map[string]string{"USD": "0.0010000000"}},
			}}},
		},
		"version": "20261120000000", "publicationDate": "2026-11-20T00:00:00Z",
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fakes are the test's AWS: two regions, us-east-1 and eu-west-1, and
// types that cover every rule of liveType.
type fakes struct {
	ec2                *fakeEC2
	pricing            *fakePricing
	ec2URL, pricingURL string
}

// newFakes starts the fakes.
func newFakes(t *testing.T) *fakes {
	t.Helper()
	x86, both := []string{"x86_64"}, []string{"on-demand", "spot"}
	ec2 := &fakeEC2{
		t: t, pageSize: 3, start: runAt,
		types: []xmlType{
			{InstanceType: "c5.large", CurrentGeneration: true, VCPU: 2, MemoryMiB: 4096, Archs: x86, UsageClasses: both},
			{InstanceType: "c6i.large", CurrentGeneration: true, VCPU: 2, MemoryMiB: 4096, Archs: x86, UsageClasses: both},
			{InstanceType: "m6g.large", CurrentGeneration: true, VCPU: 2, MemoryMiB: 8192, Archs: []string{"arm64"}, UsageClasses: both},
			{InstanceType: "t3.micro", CurrentGeneration: true, Burstable: true, VCPU: 2, MemoryMiB: 1024, Archs: x86, UsageClasses: both},
			{InstanceType: "t5.nano", CurrentGeneration: true, Burstable: true, VCPU: 2, MemoryMiB: 512, Archs: x86, UsageClasses: both},
			{InstanceType: "t4g.micro", CurrentGeneration: true, Burstable: true, VCPU: 4, MemoryMiB: 1024, Archs: []string{"arm64"}, UsageClasses: both},
			{InstanceType: "g5.xlarge", CurrentGeneration: true, VCPU: 4, MemoryMiB: 16384, Archs: x86, UsageClasses: both,
				GPUs: []xmlGPU{{Name: "A10G", Manufacturer: "NVIDIA", Count: 1, MemoryMiB: 24576}}},
			{InstanceType: "g4ad.8xlarge", CurrentGeneration: true, VCPU: 32, MemoryMiB: 131072, Archs: x86, UsageClasses: both,
				GPUs: []xmlGPU{{Name: "Radeon Pro V520", Manufacturer: "AMD", Count: 1, MemoryMiB: 8192}, {Name: "Radeon Pro V520", Manufacturer: "AMD", Count: 1, MemoryMiB: 8192}}},
			{InstanceType: "mac2.metal", CurrentGeneration: true, VCPU: 8, MemoryMiB: 16384, Archs: []string{"arm64_mac"}, UsageClasses: []string{"on-demand"}},
			{InstanceType: "i0.nano", CurrentGeneration: true, VCPU: 1, MemoryMiB: 512, Archs: []string{"i386"}, UsageClasses: both},
			{InstanceType: "m4.large", CurrentGeneration: true, VCPU: 2, MemoryMiB: 8192, Archs: x86, UsageClasses: both},
			{InstanceType: "m3.medium", VCPU: 1, MemoryMiB: 3840, Archs: []string{"i386", "x86_64"}, UsageClasses: both},
			{InstanceType: "u-6tb1.112xlarge", CurrentGeneration: true, VCPU: 448, MemoryMiB: 6291456, Archs: x86, UsageClasses: []string{"on-demand"}},
		},
		offered: map[string][]string{
			"us-east-1": {"c5.large", "c6i.large", "m6g.large", "t3.micro", "t5.nano", "t4g.micro", "g5.xlarge", "g4ad.8xlarge", "mac2.metal", "m4.large", "u-6tb1.112xlarge"},
			"eu-west-1": {"c5.large", "t3.micro", "g5.xlarge", "zz9.large"},
		},
		spot: map[string][]xmlSpotPrice{
			"us-east-1": {
				{"c5.large", spotProduct, "0.035000", "2026-11-21T09:00:00.000Z", "us-east-1a"},
				{"c5.large", spotProduct, "0.036000", "2026-11-21T08:30:00.000Z", "us-east-1b"},
				{"c5.large", spotProduct, "0.040000", "2026-11-21T08:00:00.000Z", "us-east-1a"}, // older: loses
				{"m6g.large", spotProduct, "0.030000", "2026-11-21T07:00:00.000Z", "us-east-1a"},
				{"t3.micro", spotProduct, "0.003100", "2026-11-21T07:00:00.000Z", "us-east-1a"},
				{"t5.nano", spotProduct, "0.001600", "2026-11-21T07:00:00.000Z", "us-east-1a"}, // left out
			},
			"eu-west-1": {
				{"c5.large", spotProduct, "0.038000", "2026-11-21T06:00:00.000Z", "eu-west-1a"},
				{"c5.large", spotProduct, "0.037000", "2026-11-21T06:00:00.000Z", "eu-west-1b"},
			},
		},
	}
	pr := &fakePricing{
		t: t, pageSize: 2,
		products: map[string][]string{
			"us-east-1": {
				product(t, "us-east-1", "c5.large", "0.0850000000"),
				product(t, "us-east-1", "c6i.large", "0.0850000000"),
				product(t, "us-east-1", "c6i.large", "0.0900000000"), // conflicting: left unpriced
				product(t, "us-east-1", "m6g.large", "0.0000000000", "0.0770000000"),
				product(t, "us-east-1", "", "0.0100000000"), // no instance type: skipped
				product(t, "us-east-1", "t3.micro", "0.0104000000"),
				product(t, "us-east-1", "t5.nano", "0.0052000000"),
				product(t, "us-east-1", "g5.xlarge", "1.0060000000"),
				product(t, "us-east-1", "g4ad.8xlarge", "1.7340000000"),
				product(t, "us-east-1", "u-6tb1.112xlarge", "40.8720000000"),
			},
			"eu-west-1": {
				product(t, "eu-west-1", "c5.large", "0.0960000000"),
				product(t, "eu-west-1", "t3.micro", "0.0114000000"),
				product(t, "eu-west-1", "m6g.large", "0.0860000000"), // not offered there
			},
		},
	}
	es, ps := httptest.NewServer(ec2), httptest.NewServer(pr)
	t.Cleanup(es.Close)
	t.Cleanup(ps.Close)
	return &fakes{ec2: ec2, pricing: pr, ec2URL: es.URL, pricingURL: ps.URL}
}

// awsEnv gives the SDK's default chain the test's static credentials, or
// none, and keeps it away from the machine's files and metadata service.
func awsEnv(t *testing.T, withCredentials bool) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{
		"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_PRICING",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if withCredentials {
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIDKIPTEST")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "kip-test-secret")
	}
}

// args are the flags of a -live run against the fakes that writes out.
func (f *fakes) args(out string) []string {
	return []string{
		"-live", "-regions", "us-east-1,eu-west-1", "-date", runAt,
		"-endpoint-ec2", f.ec2URL, "-endpoint-pricing", f.pricingURL,
		"-source", filepath.Join("..", "source"), "-out", out,
	}
}

func f64(v float64) *float64 { return &v }

func TestLive(t *testing.T) {
	awsEnv(t, true)
	f := newFakes(t)
	out := filepath.Join(t.TempDir(), "aws.json")
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), f.args(out), &stdout, &stderr); err != nil {
		t.Fatalf("run -live: %v (%s)", err, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, ty := range c.Types {
		names = append(names, ty.Name)
	}
	if want := []string{"c5.large", "c6i.large", "g4ad.8xlarge", "g5.xlarge", "m6g.large", "t3.micro", "u-6tb1.112xlarge"}; !slices.Equal(names, want) {
		t.Errorf("types %v, want %v", names, want)
	}
	for _, want := range []catalog.Type{
		{Name: "c5.large", VCPU: 2, MemoryMiB: 4096, Arch: "amd64"},
		{Name: "m6g.large", VCPU: 2, MemoryMiB: 8192, Arch: "arm64"},
		{Name: "t3.micro", VCPU: 2, MemoryMiB: 1024, Arch: "amd64", BaselineMilliCPU: 200}, // baseline from specs.csv
		{Name: "g5.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPU: &catalog.GPU{Count: 1, Kind: "a10g", MemoryMiB: 24576}},
		{Name: "g4ad.8xlarge", VCPU: 32, MemoryMiB: 131072, Arch: "amd64", GPU: &catalog.GPU{Count: 2, Kind: "radeon-pro-v520", MemoryMiB: 8192}},
		{Name: "u-6tb1.112xlarge", VCPU: 448, MemoryMiB: 6291456, Arch: "amd64", NoSpot: true},
	} {
		if got, _ := c.Type(want.Name); !reflect.DeepEqual(got, want) {
			t.Errorf("type %s:\n got %+v (gpu %+v)\nwant %+v (gpu %+v)", want.Name, got, got.GPU, want, want.GPU)
		}
	}

	us, _ := c.Region("us-east-1")
	eu, _ := c.Region("eu-west-1")
	for _, tt := range []struct {
		region catalog.Region
		typ    string
		want   catalog.Price
	}{
		{us, "c5.large", catalog.Price{OnDemand: f64(0.085), SpotByZone: map[string]float64{"us-east-1a": 0.035, "us-east-1b": 0.036}}},
		{us, "c6i.large", catalog.Price{}}, // two different on-demand prices: unknown
		{us, "m6g.large", catalog.Price{OnDemand: f64(0.077), SpotByZone: map[string]float64{"us-east-1a": 0.03}}},
		{us, "t3.micro", catalog.Price{OnDemand: f64(0.0104), SpotByZone: map[string]float64{"us-east-1a": 0.0031}}},
		{us, "u-6tb1.112xlarge", catalog.Price{OnDemand: f64(40.872)}},
		{eu, "c5.large", catalog.Price{OnDemand: f64(0.096), SpotByZone: map[string]float64{"eu-west-1a": 0.038, "eu-west-1b": 0.037}}},
		{eu, "g5.xlarge", catalog.Price{}}, // offered, priced nowhere
	} {
		if got, ok := tt.region.Prices[tt.typ]; !ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %s: %s, want %s", tt.region.Name, tt.typ, priceString(got, ok), priceString(tt.want, true))
		}
	}
	offered := func(r catalog.Region) []string {
		var n []string
		for name := range r.Prices {
			n = append(n, name)
		}
		slices.Sort(n)
		return n
	}
	if got, want := offered(us), []string{"c5.large", "c6i.large", "g4ad.8xlarge", "g5.xlarge", "m6g.large", "t3.micro", "u-6tb1.112xlarge"}; !slices.Equal(got, want) {
		t.Errorf("us-east-1 sells %v, want %v", got, want)
	}
	if got, want := offered(eu), []string{"c5.large", "g5.xlarge", "t3.micro"}; !slices.Equal(got, want) {
		t.Errorf("eu-west-1 sells %v, want %v (m6g.large is priced but not offered there)", got, want)
	}

	if want := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC); !c.GeneratedAt.Equal(want) {
		t.Errorf("generatedAt %v, want the run time %v", c.GeneratedAt, want)
	}
	var srcs []string
	for _, s := range c.Sources[:3] {
		srcs = append(srcs, s.Name+"@"+s.Date.Format(time.RFC3339))
	}
	if want := []string{"AWS EC2 DescribeInstanceTypes@" + runAt, "AWS Price List Query API@" + runAt, "AWS EC2 DescribeSpotPriceHistory@" + runAt}; !slices.Equal(srcs, want) {
		t.Errorf("sources %v, want %v", srcs, want)
	}

	sum := stdout.String()
	for _, want := range []string{
		"wrote " + out + ": 7 types described in us-east-1 (left out: ",
		"1 previous-generation (m4.large)",
		"2 without an amd64 or arm64 architecture (i0.nano, mac2.metal)",
		"1 burstable without a baseline in specs.csv (t5.nano)",
		"1 burstable whose specs.csv vCPU differs (t4g.micro)",
		"regions eu-west-1, us-east-1, 10 offerings: 8 with an on-demand price, 4 with spot prices (6 type-zone prices)",
		"skipped 1 offered types DescribeInstanceTypes did not describe (zz9.large)",
		"left 1 types unpriced on demand for conflicting prices (c6i.large)",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}

	// Types are described once, in the first region; every call is signed
	// with the default chain's credentials; every page is fetched.
	count := map[awsCall]int{}
	for _, c := range append(f.ec2.recorded(), f.pricing.recorded()...) {
		if c.accessKey != "AKIDKIPTEST" {
			t.Errorf("%s signed with access key %q, want the environment's AKIDKIPTEST", c.op, c.accessKey)
		}
		c.accessKey = ""
		count[c]++
	}
	want := map[awsCall]int{
		{op: "DescribeInstanceTypes", region: "us-east-1"}:         4, // 12 current types, 3 a page
		{op: "DescribeInstanceTypeOfferings", region: "us-east-1"}: 4,
		{op: "DescribeInstanceTypeOfferings", region: "eu-west-1"}: 2,
		{op: "DescribeSpotPriceHistory", region: "us-east-1"}:      2,
		{op: "DescribeSpotPriceHistory", region: "eu-west-1"}:      1,
		{op: "GetProducts", region: "us-east-1"}:                   5 + 2, // us-east-1's 10 products, then eu-west-1's 3, 2 a page
	}
	if !reflect.DeepEqual(count, want) {
		t.Errorf("calls %v, want %v", count, want)
	}

	golden := filepath.Join("testdata", "live.json")
	if *update {
		if err := os.WriteFile(golden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != string(data) {
		t.Errorf("the live catalog differs from %s (go test -run TestLive -update rewrites it):\n%s", golden, data)
	}
}

func priceString(p catalog.Price, ok bool) string {
	if !ok {
		return "not offered"
	}
	data, _ := json.Marshal(p)
	return string(data)
}

func TestLiveNoCredentials(t *testing.T) {
	awsEnv(t, false)
	f := newFakes(t)
	err := run(t.Context(), f.args(filepath.Join(t.TempDir(), "aws.json")), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("without credentials: %v, want an error saying there are none and what to set", err)
	}
	if n := len(f.ec2.recorded()) + len(f.pricing.recorded()); n != 0 {
		t.Errorf("%d API calls without credentials, want none", n)
	}
}

func TestLiveAPIErrors(t *testing.T) {
	denied := fakeError{http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation."}
	tests := []struct {
		op, want string
	}{
		{"DescribeInstanceTypes", "describing instance types in us-east-1: "},
		{"DescribeInstanceTypeOfferings", "listing the instance types offered in us-east-1: "},
		{"DescribeSpotPriceHistory", "reading spot prices in us-east-1: "},
		{"GetProducts", "reading on-demand prices in us-east-1: "},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			awsEnv(t, true)
			f := newFakes(t)
			code := denied.code
			if tt.op == "GetProducts" {
				code = "AccessDeniedException"
				f.pricing.fail = &fakeError{http.StatusBadRequest, code, "User is not authorized to perform: pricing:GetProducts"}
			} else {
				f.ec2.fail = map[string]fakeError{tt.op: denied}
			}
			err := run(t.Context(), f.args(filepath.Join(t.TempDir(), "aws.json")), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.op) || !strings.Contains(err.Error(), code) {
				t.Errorf("error %v, want one starting %q and naming %s and %s", err, tt.want, tt.op, code)
			}
		})
	}
}

func TestLiveFlags(t *testing.T) {
	awsEnv(t, true)
	f := newFakes(t)
	out := filepath.Join(t.TempDir(), "aws.json")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"with karpenter", []string{"-karpenter", fixture}, "-live and -karpenter exclude each other"},
		{"live flags without -live", []string{"-live=false", "-karpenter", fixture}, "-date, -endpoint-ec2, -endpoint-pricing, -regions only apply with -live"},
		{"bad date", []string{"-date", "yesterday"}, "parsing flags: -date"},
		{"empty region", []string{"-regions", "us-east-1,,eu-west-1"}, "a region is empty"},
		{"duplicate region", []string{"-regions", "us-east-1,us-east-1"}, "us-east-1 appears twice"},
		{"region sells nothing", []string{"-regions", "us-east-1,ap-south-2"}, "offered in ap-south-2: DescribeInstanceTypeOfferings returned none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), append(f.args(out), tt.args...), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLiveGPU(t *testing.T) {
	a10g := func(n int32) ec2GPU { return ec2GPU{"A10G", n, 24576} }
	tests := []struct {
		name string
		gpus []ec2GPU
		want *catalog.GPU
	}{
		{"none", nil, nil},
		{"zero count", []ec2GPU{a10g(0)}, nil},
		{"one device", []ec2GPU{a10g(4)}, &catalog.GPU{Count: 4, Kind: "a10g", MemoryMiB: 24576}},
		{"summed", []ec2GPU{a10g(1), a10g(2)}, &catalog.GPU{Count: 3, Kind: "a10g", MemoryMiB: 24576}},
		{"spaces", []ec2GPU{{"Gaudi HL-205", 8, 32768}}, &catalog.GPU{Count: 8, Kind: "gaudi-hl-205", MemoryMiB: 32768}},
		{"mixed", []ec2GPU{a10g(1), {"L4", 1, 23034}}, &catalog.GPU{Count: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := liveGPU(gpuInfo(tt.gpus)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := liveGPU(nil); got != nil {
		t.Errorf("nil GpuInfo: %+v", got)
	}
}

// ec2GPU is one GpuInfo device: name, count, memory in MiB.
type ec2GPU struct {
	name       string
	count, mem int32
}

func gpuInfo(gpus []ec2GPU) *ec2types.GpuInfo {
	info := &ec2types.GpuInfo{}
	for _, g := range gpus {
		info.Gpus = append(info.Gpus, ec2types.GpuDeviceInfo{
			Name: aws.String(g.name), Count: aws.Int32(g.count),
			MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(g.mem)},
		})
	}
	return info
}

func TestLiveExtraPrices(t *testing.T) {
	awsEnv(t, true)
	f := newFakes(t)
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.csv")
	csv := "region,type,capacity_type,usd_per_hour\nus-east-1,c5.large,spot,0.03\nus-east-1,zz.large,on-demand,1\n"
	if err := os.WriteFile(extra, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "aws.json")
	var stdout bytes.Buffer
	if err := run(t.Context(), append(f.args(out), "-prices", extra), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	us, _ := c.Region("us-east-1")
	want := catalog.Price{OnDemand: f64(0.085), Spot: f64(0.03), SpotByZone: map[string]float64{"us-east-1a": 0.035, "us-east-1b": 0.036}}
	if got := us.Prices["c5.large"]; !reflect.DeepEqual(got, want) {
		t.Errorf("c5.large in us-east-1: %s, want %s (the extra spot price beside the API's per-zone ones)", priceString(got, true), priceString(want, true))
	}
	if last := c.Sources[len(c.Sources)-1]; last.Name != "extra.csv" || last.Covers != "extra prices: us-east-1" {
		t.Errorf("extra price source %+v", last)
	}
	if !strings.Contains(stdout.String(), "skipped 1 extra price rows for types not in the catalog") {
		t.Errorf("summary %q does not count zz.large's row", stdout.String())
	}
}
