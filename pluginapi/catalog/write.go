package catalog

import (
	"bytes"
	"fmt"
	"os"
)

// WriteOrCheck is a catalog generator's last step. Without check it writes
// data, the marshalled catalog, to path. With check it writes nothing and
// fails when the file at path is not data, naming the first line that
// differs and saying to regenerate the catalog with `make catalogs`: it is
// how a generator's -check mode catches a committed catalog that its
// sources (or the generator) no longer give.
func WriteOrCheck(path string, data []byte, check bool) error {
	if !check {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("writing catalog: %w", err)
		}
		return nil
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("checking catalog: %w", err)
	}
	if bytes.Equal(old, data) {
		return nil
	}
	return fmt.Errorf("checking catalog: %s differs from what its sources give (first at line %d); regenerate it with `make catalogs`", path, firstDifferentLine(old, data))
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
