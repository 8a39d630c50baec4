package catalog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
)

// Generator is the command line a plugin's catalog generator (`go run
// ./catalog/gen`, run from the plugin's module directory) shares with every
// other: the flags -source (the directory of its CSV files), -out (the
// catalog file, catalog/<Cloud>.json) and -check (write nothing, fail when
// the committed file differs: `make verify` runs it), the usage -h prints,
// and the last step, Emit, which writes or checks the catalog and prints the
// one-line summary. A generator adds its own flags and builds its catalog;
// its main is
//
//	func main() { generator(new(options)).Main() }
type Generator struct {
	// Cloud names the catalog file: -out defaults to catalog/<Cloud>.json.
	Cloud string
	// Usage is what -h prints before the flags: the usage lines and what
	// the generator builds from what.
	Usage string
	// SourceHelp is the help of -source: what its directory holds.
	SourceHelp string
	// Flags, if set, registers the generator's own flags on fs.
	Flags func(fs *flag.FlagSet)
	// Build builds the catalog from the files in the directory source, once
	// the flags are parsed (fs.Visit says which were given), and returns it
	// with the summary Emit prints. Its errors are the generator's.
	Build func(ctx context.Context, fs *flag.FlagSet, source string) (*Catalog, string, error)
}

// Run parses args, builds the catalog and writes or checks it (Emit),
// printing the summary to stdout and flag errors and -h's usage to stderr.
// -h returns flag.ErrHelp; an argument that is not a flag is an error.
func (g Generator) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	source := fs.String("source", filepath.Join("catalog", "source"), g.SourceHelp)
	out := fs.String("out", filepath.Join("catalog", g.Cloud+".json"), "catalog file to write (or compare with -check)")
	check := fs.Bool("check", false, "write nothing; fail if the catalog file differs from what would be written")
	if g.Flags != nil {
		g.Flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\n", strings.TrimRight(g.Usage, "\n"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parsing flags: unexpected arguments %q", fs.Args())
	}
	c, summary, err := g.Build(ctx, fs, *source)
	if err != nil {
		return err
	}
	return Emit(stdout, c, *out, *check, summary)
}

// Main is a generator's whole main: Run with the command line, stdout and
// stderr, its context cancelled by an interrupt. An error is printed as
// "gen: <error>" and exits 1; -h exits 0.
func (g Generator) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := g.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// ReadSpecsFile is ReadSpecs of the file at path, its errors naming the
// file by its base name.
func ReadSpecsFile(path string) ([]Type, error) { return readFile(path, ReadSpecs) }

// ReadPricesFile is ReadPrices of the file at path, its errors naming the
// file by its base name.
func ReadPricesFile(path string) ([]PriceRow, error) { return readFile(path, ReadPrices) }

// ReadTableFile is ReadTable of the file at path, its errors naming the
// file by its base name.
func ReadTableFile(path string, header []string, row func(*Fields) error) error {
	_, err := readFile(path, func(r io.Reader, name string) (struct{}, error) {
		return struct{}{}, ReadTable(r, name, header, row)
	})
	return err
}

func readFile[T any](path string, read func(r io.Reader, name string) (T, error)) (T, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("reading %s: %w", name, err)
	}
	defer f.Close()
	return read(f, name)
}

// FirstFew joins the first n names with ", ", and adds ", ..." when there
// are more: how a generator's summary names what it left out.
func FirstFew(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", ..."
}
