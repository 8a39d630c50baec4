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

// ReadTable reads a CSV table from r and calls row for each record after
// the header, in order. Lines starting with '#' are comments (where a table
// names its sources); the first record must be header, and every record
// must have as many fields as header. name labels errors: they read
// "reading NAME line N: ...".
//
// row reads its record through Fields. A cell that does not parse, or
// else an error row returns, stops the read with that error, naming the
// record's line; ReadTable wraps it with %w.
func ReadTable(r io.Reader, name string, header []string, row func(*Fields) error) error {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = len(header)
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			if first {
				return fmt.Errorf("reading %s: empty, want the header %s", name, strings.Join(header, ","))
			}
			return nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			return fmt.Errorf("reading %s line %d: %w: %d, want %d (%s)", name, pe.StartLine, pe.Err, len(rec), len(header), strings.Join(header, ","))
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if first {
			if !slices.Equal(rec, header) {
				return fmt.Errorf("reading %s line %d: header %s, want %s", name, line, strings.Join(rec, ","), strings.Join(header, ","))
			}
			continue
		}
		f := &Fields{rec: rec, header: header}
		err = row(f)
		if f.err != nil {
			err = f.err
		}
		if err != nil {
			return fmt.Errorf("reading %s line %d: %w", name, line, err)
		}
	}
}

// Fields is one record of a table that ReadTable reads, its cells indexed
// by their column in the header. A cell that does not parse is recorded,
// named by its column, and its method returns 0: row can read every cell
// first and check the values after, and ReadTable reports the first bad
// cell rather than what row made of the 0.
type Fields struct {
	rec    []string
	header []string
	err    error
}

// Str returns cell i without surrounding white space.
func (f *Fields) Str(i int) string { return strings.TrimSpace(f.rec[i]) }

// Int returns cell i as a whole number >= 0. An empty cell is 0.
func (f *Fields) Int(i int) int64 {
	s := f.Str(i)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		f.fail(fmt.Errorf("%s %q is not a whole number >= 0", f.header[i], s))
		return 0
	}
	return v
}

// Price returns cell i as a price: a finite number >= 0, such as US
// dollars per hour. An empty cell is not a price.
func (f *Fields) Price(i int) float64 {
	s := f.Str(i)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !validPrice(v) {
		f.fail(fmt.Errorf("%s %q is not a price (a finite number >= 0)", f.header[i], s))
		return 0
	}
	return v
}

// OptionalPrice returns cell i as a price (see Price) and true, or 0 and
// false when the cell is empty: a price the table does not know.
func (f *Fields) OptionalPrice(i int) (float64, bool) {
	if f.Str(i) == "" {
		return 0, false
	}
	return f.Price(i), true
}

// fail records err unless an earlier cell failed.
func (f *Fields) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// ReadSpecs reads a size table (SpecsHeader). name labels errors.
func ReadSpecs(r io.Reader, name string) ([]Type, error) {
	var types []Type
	seen := map[string]bool{}
	err := ReadTable(r, name, SpecsHeader, func(f *Fields) error {
		t := Type{
			Name: f.Str(0), VCPU: f.Int(1), MemoryMiB: f.Int(2),
			Arch: f.Str(6), BaselineMilliCPU: f.Int(7),
		}
		if n := f.Int(3); n > 0 {
			t.GPU = &GPU{Count: int32(n), Kind: strings.ToLower(f.Str(4)), MemoryMiB: f.Int(5)}
		} else if f.Str(4) != "" {
			return fmt.Errorf("type %q has gpu_kind %q but no gpu_count", t.Name, f.Str(4))
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
	err := ReadTable(r, name, PricesHeader, func(f *Fields) error {
		p := PriceRow{Region: f.Str(0), Type: f.Str(1), CapacityType: pluginapi.CapacityType(f.Str(2)), USDPerHour: f.Price(3)}
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
