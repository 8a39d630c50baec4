package catalog

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

const specsHead = "# source: test\ntype,vcpu,memory_mib,gpu_count,gpu_kind,gpu_memory_mib,arch,baseline_millicpu\n"

func TestReadSpecs(t *testing.T) {
	in := specsHead + "c5.large,2,4096,0,,0,amd64,0\ng4dn.xlarge,4,16384,1,T4,15360,amd64,0\nt3.small,2,2048,0,,0,amd64,400\n"
	got, err := ReadSpecs(strings.NewReader(in), "specs.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Type{
		{Name: "c5.large", VCPU: 2, MemoryMiB: 4096, Arch: "amd64"},
		{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPU: &GPU{Count: 1, Kind: "t4", MemoryMiB: 15360}},
		{Name: "t3.small", VCPU: 2, MemoryMiB: 2048, Arch: "amd64", BaselineMilliCPU: 400},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadSpecs:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadSpecsErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty, want the header type,vcpu"},
		{"wrong header", "type,cpu\n", "line 1: wrong number of fields"},
		{"renamed column", "type,vcpu,mem,gpu_count,gpu_kind,gpu_memory_mib,arch,baseline_millicpu\n", "header type,vcpu,mem,"},
		{"not a number", specsHead + "c5.large,two,4096,0,,0,amd64,0\n", `line 3: vcpu "two" is not a whole number`},
		{"duplicate", specsHead + "a,1,1,0,,0,amd64,0\na,1,1,0,,0,amd64,0\n", `line 4: type "a" appears twice`},
		{"bad arch", specsHead + "a,1,1,0,,0,x86,0\n", `arch "x86"`},
		{"kind without count", specsHead + "a,1,1,0,t4,0,amd64,0\n", "gpu_kind"},
		{"baseline too big", specsHead + "a,1,1,0,,0,amd64,1500\n", "baseline_millicpu 1500 exceeds"},
		{"zero memory", specsHead + "a,1,0,0,,0,amd64,0\n", "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSpecs(strings.NewReader(tt.in), "specs.csv")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "specs.csv") {
				t.Fatalf("ReadSpecs() = %v, want an error naming specs.csv and containing %q", err, tt.want)
			}
		})
	}
}

func TestPricesRoundTripAndAdd(t *testing.T) {
	rows := []PriceRow{
		{Region: "r1", Type: "a.large", CapacityType: pluginapi.CapacityOnDemand, USDPerHour: 0.096},
		{Region: "r1", Type: "a.large", CapacityType: pluginapi.CapacitySpot, USDPerHour: 0.0301},
		{Region: "r1", Type: "unknown.type", CapacityType: pluginapi.CapacityOnDemand, USDPerHour: 1},
	}
	var buf bytes.Buffer
	if err := WritePrices(&buf, []string{"source: test"}, rows); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPrices(&buf, "prices.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Fatalf("prices round trip:\n got %+v\nwant %+v", got, rows)
	}
	c := sample()
	c.Regions = nil
	skipped := c.AddPrices(got)
	if len(skipped) != 1 || skipped[0].Type != "unknown.type" {
		t.Errorf("skipped = %+v, want only unknown.type", skipped)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r, ok := c.Region("r1")
	if !ok || *r.Prices["a.large"].OnDemand != 0.096 || *r.Prices["a.large"].Spot != 0.0301 {
		t.Errorf("region r1 = %+v", r)
	}
}

func TestReadPricesErrors(t *testing.T) {
	head := "region,type,capacity_type,usd_per_hour\n"
	tests := []struct{ name, in, want string }{
		{"bad capacity", head + "r,a,reserved,1\n", `capacity_type "reserved"`},
		{"negative", head + "r,a,spot,-0.1\n", `usd_per_hour "-0.1" is not a price`},
		{"nan", head + "r,a,spot,NaN\n", `"NaN" is not a price`},
		{"twice", head + "r,a,spot,1\nr,a,spot,2\n", "priced twice"},
		{"missing region", head + ",a,spot,1\n", "region and type are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadPrices(strings.NewReader(tt.in), "prices.csv")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadPrices() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadTable(t *testing.T) {
	type rec struct {
		name  string
		count int64
		price float64
		spot  float64
		known bool
	}
	header := []string{"name", "count", "price", "spot"}
	head := "# source: test\nname,count,price,spot\n"
	errRow := errors.New("row refused")
	read := func(in string) ([]rec, error) {
		var got []rec
		err := ReadTable(strings.NewReader(in), "t.csv", header, func(f *Fields) error {
			r := rec{name: f.Str(0), count: f.Int(1), price: f.Price(2)}
			r.spot, r.known = f.OptionalPrice(3)
			if r.name == "refused" {
				return errRow
			}
			got = append(got, r)
			return nil
		})
		return got, err
	}

	got, err := read(head + " a ,3,0.5,0.1\n# a comment\nb,,0,\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []rec{{"a", 3, 0.5, 0.1, true}, {"b", 0, 0, 0, false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadTable:\n got %+v\nwant %+v", got, want)
	}
	if got, err := read(head); err != nil || len(got) != 0 {
		t.Errorf("a header alone: %v, %v; want no rows and no error", got, err)
	}

	tests := []struct{ name, in, want string }{
		{"empty", "# only a comment\n", "reading t.csv: empty, want the header name,count,price,spot"},
		{"renamed column", "name,count,usd,spot\n", "reading t.csv line 1: header name,count,usd,spot, want name,count,price,spot"},
		{"short header", "name,count\n", "reading t.csv line 1: wrong number of fields: 2, want 4 (name,count,price,spot)"},
		{"short row", head + "a,1,1,1\nb,1\n", "reading t.csv line 4: wrong number of fields: 2, want 4"},
		{"not csv", head + "a,\"1,1,1\n", "reading t.csv: "},
		{"not a number", head + "a,x,1,\n", `reading t.csv line 3: count "x" is not a whole number >= 0`},
		{"negative", head + "a,-1,1,\n", `line 3: count "-1" is not a whole number >= 0`},
		{"empty price", head + "a,1,,\n", `line 3: price "" is not a price (a finite number >= 0)`},
		{"infinite price", head + "a,1,+Inf,\n", `line 3: price "+Inf" is not a price`},
		{"bad optional price", head + "a,1,1,-2\n", `line 3: spot "-2" is not a price`},
		{"first bad cell wins", head + "refused,x,-1,\n", `line 3: count "x" is not a whole number`},
		{"row error", head + "a,1,1,\nrefused,1,1,\n", "reading t.csv line 4: row refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadTable() = %v, want an error containing %q", err, tt.want)
			}
			if tt.name == "row error" && !errors.Is(err, errRow) {
				t.Errorf("ReadTable() = %v, does not wrap the row's error", err)
			}
		})
	}
}
