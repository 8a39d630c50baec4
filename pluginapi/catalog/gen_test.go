package catalog

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testGenerator builds sample() with its own -note flag and records what
// Build saw.
type testGenerator struct {
	note, source string
	visited      []string
	err          error
}

func (tg *testGenerator) generator() Generator {
	return Generator{
		Cloud:      "test",
		Usage:      "usage: go run ./catalog/gen [-note TEXT] [-check]\n\nBuilds test.json.\n",
		SourceHelp: "directory holding specs.csv",
		Flags:      func(fs *flag.FlagSet) { fs.StringVar(&tg.note, "note", "none", "a note for the summary") },
		Build: func(_ context.Context, fs *flag.FlagSet, source string) (*Catalog, string, error) {
			tg.source = source
			fs.Visit(func(f *flag.Flag) { tg.visited = append(tg.visited, f.Name) })
			return sample(), "1 catalog, note " + tg.note, tg.err
		},
	}
}

func TestGeneratorWritesThenChecks(t *testing.T) {
	out := filepath.Join(t.TempDir(), "test.json")
	var tg testGenerator
	var stdout, stderr bytes.Buffer
	if err := tg.generator().Run(t.Context(), []string{"-out", out, "-note", "hi"}, &stdout, &stderr); err != nil {
		t.Fatalf("writing: %v (%s)", err, stderr.String())
	}
	if want := "wrote " + out + ": 1 catalog, note hi\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if want := []string{"note", "out"}; !slices.Equal(tg.visited, want) {
		t.Errorf("flags Build saw given: %q, want %q", tg.visited, want)
	}
	if want := filepath.Join("catalog", "source"); tg.source != want {
		t.Errorf("Build's source %q, want the default %q", tg.source, want)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := sample().Marshal(); !bytes.Equal(data, want) {
		t.Errorf("wrote %s, want the marshalled catalog", data)
	}

	stdout.Reset()
	tg = testGenerator{}
	if err := tg.generator().Run(t.Context(), []string{"-out", out, "-check", "-source", "src"}, &stdout, &stderr); err != nil {
		t.Fatalf("checking: %v", err)
	}
	if want := "up to date: " + out + ": 1 catalog, note none\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if tg.source != "src" {
		t.Errorf("Build's source %q, want -source's src", tg.source)
	}

	if err := os.WriteFile(out, bytes.Replace(data, []byte("a.large"), []byte("a.small"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tg.generator().Run(t.Context(), []string{"-out", out, "-check"}, &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), "differs from what its sources give") {
		t.Errorf("checking a stale catalog: %v", err)
	}
}

func TestGeneratorErrors(t *testing.T) {
	buildErr := errors.New("reading specs.csv: broken")
	tests := []struct {
		name       string
		args       []string
		err        error // Build's error
		wantErr    string
		wantStderr []string
	}{
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp.Error(), wantStderr: []string{
			"usage: go run ./catalog/gen [-note TEXT] [-check]\n\nBuilds test.json.\n\n  -check\n",
			"-out string\n    \tcatalog file to write (or compare with -check) (default \"catalog/test.json\")",
			"-source string\n    \tdirectory holding specs.csv (default \"catalog/source\")",
			"-note string\n    \ta note for the summary (default \"none\")",
		}},
		{name: "unknown flag", args: []string{"-nosuch"}, wantErr: "flag provided but not defined: -nosuch", wantStderr: []string{"usage: go run ./catalog/gen"}},
		{name: "an argument", args: []string{"-check", "extra"}, wantErr: `parsing flags: unexpected arguments ["extra"]`},
		{name: "Build fails", err: buildErr, wantErr: buildErr.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "test.json")
			tg := testGenerator{err: tt.err}
			var stdout, stderr bytes.Buffer
			err := tg.generator().Run(t.Context(), append([]string{"-out", out}, tt.args...), &stdout, &stderr)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Run() = %v, want %q", err, tt.wantErr)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr %q lacks %q", stderr.String(), want)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed run wrote %s (%v)", out, err)
			}
		})
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	specs := filepath.Join(dir, "specs.csv")
	if err := os.WriteFile(specs, []byte("# from a test\n"+strings.Join(SpecsHeader, ",")+"\na.large,2,4096,0,,0,amd64,0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	types, err := ReadSpecsFile(specs)
	if err != nil || len(types) != 1 || types[0].Name != "a.large" {
		t.Errorf("ReadSpecsFile = %+v, %v; want a.large", types, err)
	}
	if _, err := ReadPricesFile(specs); err == nil || !strings.HasPrefix(err.Error(), "reading specs.csv line 2: ") {
		t.Errorf("ReadPricesFile of a size table: %v, want an error naming specs.csv", err)
	}
	var rows int
	if err := ReadTableFile(specs, SpecsHeader, func(*Fields) error { rows++; return nil }); err != nil || rows != 1 {
		t.Errorf("ReadTableFile: %d rows, %v; want 1 row", rows, err)
	}
	missing := filepath.Join(dir, "prices.csv")
	if _, err := ReadPricesFile(missing); err == nil || !strings.HasPrefix(err.Error(), "reading prices.csv: ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadPricesFile of a missing file: %v", err)
	}
}

func TestFirstFew(t *testing.T) {
	tests := []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"a", "b"}, "a, b"},
		{[]string{"a", "b", "c"}, "a, b, c"},
		{[]string{"a", "b", "c", "d"}, "a, b, c, ..."},
	}
	for _, tt := range tests {
		if got := FirstFew(tt.names, 3); got != tt.want {
			t.Errorf("FirstFew(%q, 3) = %q, want %q", tt.names, got, tt.want)
		}
	}
}
