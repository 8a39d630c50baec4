package catalog

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// SpecsHeader is the header line of a size table.
var SpecsHeader = []string{"type", "vcpu", "memory_mib", "gpu_count", "gpu_kind", "gpu_memory_mib", "arch", "baseline_millicpu"}

// PricesHeader is the header line of a price table.
var PricesHeader = []string{"region", "type", "capacity_type", "usd_per_hour"}

// PriceRow is one line of a price table.
type PriceRow struct {
	Region       string
	Type         string
	CapacityType pluginapi.CapacityType
	USDPerHour   float64
}

// table reads a CSV with '#' comments and the given header, calling row
// for each record with a field reader that reports the line on error.
func table(r io.Reader, name string, header []string, row func(f fields) error) error {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = len(header)
	first := true
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			if first {
				return fmt.Errorf("reading %s: empty, want the header %s", name, strings.Join(header, ","))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			if !slices.Equal(rec, header) {
				return fmt.Errorf("reading %s line %d: header %s, want %s", name, line, strings.Join(rec, ","), strings.Join(header, ","))
			}
			continue
		}
		if err := row(fields{rec: rec, header: header}); err != nil {
			return fmt.Errorf("reading %s line %d: %w", name, line, err)
		}
	}
}

type fields struct {
	rec    []string
	header []string
	err    *error
}

func (f *fields) str(i int) string { return strings.TrimSpace(f.rec[i]) }

func (f *fields) int(i int) int64 {
	s := f.str(i)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		f.fail(fmt.Errorf("%s %q is not a whole number >= 0", f.header[i], s))
	}
	return v
}

func (f *fields) price(i int) float64 {
	s := f.str(i)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !validPrice(v) {
		f.fail(fmt.Errorf("%s %q is not a price (a finite number >= 0)", f.header[i], s))
	}
	return v
}

func (f *fields) fail(err error) {
	if f.err == nil {
		f.err = &err
	}
}

// ReadSpecs reads a size table (SpecsHeader). name labels errors.
func ReadSpecs(r io.Reader, name string) ([]Type, error) {
	var types []Type
	seen := map[string]bool{}
	err := table(r, name, SpecsHeader, func(f fields) error {
		t := Type{
			Name: f.str(0), VCPU: f.int(1), MemoryMiB: f.int(2),
			Arch: f.str(6), BaselineMilliCPU: f.int(7),
		}
		if n := f.int(3); n > 0 {
			t.GPU = &GPU{Count: int32(n), Kind: strings.ToLower(f.str(4)), MemoryMiB: f.int(5)}
		} else if f.str(4) != "" {
			return fmt.Errorf("type %q has gpu_kind %q but no gpu_count", t.Name, f.str(4))
		}
		if f.err != nil {
			return *f.err
		}
		switch {
		case t.Name == "":
			return errors.New("type is empty")
		case seen[t.Name]:
			return fmt.Errorf("type %q appears twice", t.Name)
		case t.VCPU == 0 || t.MemoryMiB == 0:
			return fmt.Errorf("type %q: vcpu and memory_mib must be positive", t.Name)
		case t.Arch != string(pluginapi.ArchAMD64) && t.Arch != string(pluginapi.ArchARM64):
			return fmt.Errorf("type %q: arch %q is neither amd64 nor arm64", t.Name, t.Arch)
		case t.BaselineMilliCPU > t.VCPU*1000:
			return fmt.Errorf("type %q: baseline_millicpu %d exceeds its %d vCPU", t.Name, t.BaselineMilliCPU, t.VCPU)
		}
		seen[t.Name] = true
		types = append(types, t)
		return nil
	})
	return types, err
}

// ReadPrices reads a price table (PricesHeader). name labels errors.
func ReadPrices(r io.Reader, name string) ([]PriceRow, error) {
	var rows []PriceRow
	seen := map[[3]string]bool{}
	err := table(r, name, PricesHeader, func(f fields) error {
		p := PriceRow{Region: f.str(0), Type: f.str(1), CapacityType: pluginapi.CapacityType(f.str(2)), USDPerHour: f.price(3)}
		if f.err != nil {
			return *f.err
		}
		switch {
		case p.Region == "" || p.Type == "":
			return errors.New("region and type are required")
		case p.CapacityType != pluginapi.CapacityOnDemand && p.CapacityType != pluginapi.CapacitySpot:
			return fmt.Errorf("capacity_type %q is neither on-demand nor spot", p.CapacityType)
		}
		key := [3]string{p.Region, p.Type, string(p.CapacityType)}
		if seen[key] {
			return fmt.Errorf("%s %s %s is priced twice", p.Region, p.Type, p.CapacityType)
		}
		seen[key] = true
		rows = append(rows, p)
		return nil
	})
	return rows, err
}

// WritePrices writes a price table with comment lines first.
func WritePrices(w io.Writer, comments []string, rows []PriceRow) error {
	for _, c := range comments {
		if _, err := fmt.Fprintf(w, "# %s\n", c); err != nil {
			return fmt.Errorf("writing prices: %w", err)
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(PricesHeader); err != nil {
		return fmt.Errorf("writing prices: %w", err)
	}
	for _, r := range rows {
		rec := []string{r.Region, r.Type, string(r.CapacityType), strconv.FormatFloat(r.USDPerHour, 'f', -1, 64)}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("writing prices: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing prices: %w", err)
	}
	return nil
}

// AddPrices sets prices from rows. A row for a type the catalog does not
// list is skipped and returned, so the generator can report how many
// priced types have no known size (they cannot be offered: nobody knows
// what fits on them).
func (c *Catalog) AddPrices(rows []PriceRow) (skipped []PriceRow) {
	known := make(map[string]bool, len(c.Types))
	for _, t := range c.Types {
		known[t.Name] = true
	}
	regions := map[string]int{}
	for i, r := range c.Regions {
		regions[r.Name] = i
	}
	for _, row := range rows {
		if !known[row.Type] {
			skipped = append(skipped, row)
			continue
		}
		i, ok := regions[row.Region]
		if !ok {
			i = len(c.Regions)
			regions[row.Region] = i
			c.Regions = append(c.Regions, Region{Name: row.Region, Prices: map[string]Price{}})
		}
		p := c.Regions[i].Prices[row.Type]
		v := row.USDPerHour
		if row.CapacityType == pluginapi.CapacitySpot {
			p.Spot = &v
		} else {
			p.OnDemand = &v
		}
		c.Regions[i].Prices[row.Type] = p
	}
	return skipped
}
