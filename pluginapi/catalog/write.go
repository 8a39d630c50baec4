package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// WriteOrCheck is a catalog generator's last step. Without check it writes
// data, the marshalled catalog, to path. With check it writes nothing and
// fails when the file at path is not data, naming the first line that
// differs and saying to regenerate the catalog with `make catalogs`: it is
// how a generator's -check mode catches a committed catalog that its
// sources (or the generator) no longer give.
//
// A committed catalog generated from the cloud's APIs (Catalog.Live)
// cannot be rebuilt from the repository's files: check then validates it
// instead (Parse) and returns it, so that the generator can say it was
// kept; otherwise the returned catalog is nil.
func WriteOrCheck(path string, data []byte, check bool) (*Catalog, error) {
	if !check {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, fmt.Errorf("writing catalog: %w", err)
		}
		return nil, nil
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checking catalog: %w", err)
	}
	if bytes.Equal(old, data) {
		return nil, nil
	}
	var head struct {
		Live bool `json:"live"`
	}
	if json.Unmarshal(old, &head) == nil && head.Live {
		prev, err := Parse(old)
		if err != nil {
			return nil, fmt.Errorf("checking catalog %s: %w", path, err)
		}
		return prev, nil
	}
	return nil, fmt.Errorf("checking catalog: %s differs from what its sources give (first at line %d); regenerate it with `make catalogs`", path, firstDifferentLine(old, data))
}

// firstDifferentLine returns the number, from 1, of the first line at which
// a and b differ, counting a line's ending: a line one of them lacks, or
// ends without a newline, differs.
func firstDifferentLine(a, b []byte) int {
	for line := 1; ; line++ {
		la, restA, moreA := bytes.Cut(a, []byte("\n"))
		lb, restB, moreB := bytes.Cut(b, []byte("\n"))
		if !bytes.Equal(la, lb) || moreA != moreB || !moreA {
			return line
		}
		a, b = restA, restB
	}
}

// Emit is a catalog generator's last step: it marshals c, writes it to
// path or, with check, compares it with the committed file (WriteOrCheck),
// and prints one line to w with the generator's summary.
func Emit(w io.Writer, c *Catalog, path string, check bool, summary string) error {
	data, err := c.Marshal()
	if err != nil {
		return err
	}
	kept, err := WriteOrCheck(path, data, check)
	switch {
	case err != nil:
		return err
	case kept != nil:
		_, err = fmt.Fprintf(w, "kept %s: generated from the cloud's APIs as of %s, so it is validated, not rebuilt from the repository's sources\n",
			path, kept.GeneratedAt.UTC().Format(time.RFC3339))
	case check:
		_, err = fmt.Fprintf(w, "up to date: %s: %s\n", path, summary)
	default:
		_, err = fmt.Fprintf(w, "wrote %s: %s\n", path, summary)
	}
	if err != nil {
		return fmt.Errorf("writing the summary: %w", err)
	}
	return nil
}

// ParseRegions splits a generator's -regions flag (comma-separated,
// spaces allowed), refusing an empty entry and a region named twice.
func ParseRegions(s string) ([]string, error) {
	var regions []string
	for r := range strings.SplitSeq(s, ",") {
		r = strings.TrimSpace(r)
		switch {
		case r == "":
			return nil, fmt.Errorf("parsing -regions %q: a region is empty", s)
		case slices.Contains(regions, r):
			return nil, fmt.Errorf("parsing -regions %q: %s appears twice", s, r)
		}
		regions = append(regions, r)
	}
	return regions, nil
}
