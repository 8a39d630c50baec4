package catalog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteOrCheck(t *testing.T) {
	const committed = "{\n  \"schema\": 1,\n  \"cloud\": \"test\",\n  \"types\": []\n}\n"
	tests := []struct {
		name     string
		existing *string // the file's content before, nil for no file
		data     string
		check    bool
		want     string // the error's text, "" for none
	}{
		{name: "write a new file", data: committed},
		{name: "overwrite", existing: ptrTo("old\n"), data: committed},
		{name: "check the same", existing: ptrTo(committed), data: committed, check: true},
		{name: "check a changed line", existing: ptrTo(committed), data: strings.Replace(committed, "test", "other", 1), check: true,
			want: "differs from what its sources give (first at line 3); regenerate it with `make catalogs`"},
		{name: "check a longer catalog", existing: ptrTo(committed), data: committed + "\n", check: true, want: "(first at line 6)"},
		{name: "check a catalog without its last newline", existing: ptrTo(committed), data: strings.TrimSuffix(committed, "\n"), check: true,
			want: "(first at line 5)"},
		{name: "check a shorter catalog", existing: ptrTo(committed), data: "{\n", check: true, want: "(first at line 2)"},
		{name: "check a missing file", data: committed, check: true, want: "checking catalog: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "test.json")
			if tt.existing != nil {
				if err := os.WriteFile(path, []byte(*tt.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := WriteOrCheck(path, []byte(tt.data), tt.check)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("WriteOrCheck() = %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("WriteOrCheck() = %v, want an error naming %s and containing %q", err, path, tt.want)
			}
			got, readErr := os.ReadFile(path)
			switch {
			case !tt.check && string(got) != tt.data:
				t.Errorf("wrote %q (%v), want %q", got, readErr, tt.data)
			case tt.check && tt.existing == nil && !errors.Is(readErr, fs.ErrNotExist):
				t.Errorf("checking a missing file created it: %q, %v", got, readErr)
			case tt.check && tt.existing != nil && string(got) != *tt.existing:
				t.Errorf("checking changed the file to %q", got)
			}
		})
	}
	if err := WriteOrCheck(filepath.Join(t.TempDir(), "missing", "test.json"), []byte(committed), false); err == nil ||
		!strings.HasPrefix(err.Error(), "writing catalog: ") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writing into a missing directory: %v", err)
	}
}

func ptrTo(s string) *string { return &s }
