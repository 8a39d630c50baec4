package catalog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
			_, err := WriteOrCheck(path, []byte(tt.data), tt.check)
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
	if _, err := WriteOrCheck(filepath.Join(t.TempDir(), "missing", "test.json"), []byte(committed), false); err == nil ||
		!strings.HasPrefix(err.Error(), "writing catalog: ") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writing into a missing directory: %v", err)
	}
}

func ptrTo(s string) *string { return &s }

func TestWriteOrCheckKeepsALiveCatalog(t *testing.T) {
	live := sample()
	live.Live = true
	data, err := live.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "live.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	offline, err := sample().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	kept, err := WriteOrCheck(path, offline, true)
	if err != nil || kept == nil || !kept.Live || !kept.GeneratedAt.Equal(live.GeneratedAt) {
		t.Fatalf("WriteOrCheck(live catalog) = %v, %v; want it kept and validated", kept, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(data) {
		t.Error("check rewrote the live catalog")
	}
	// A broken live catalog is not kept: it is an error.
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), `"schema": 1`, `"schema": 7`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if kept, err := WriteOrCheck(path, offline, true); err == nil || kept != nil || !strings.Contains(err.Error(), "schema 7") {
		t.Fatalf("WriteOrCheck(broken live catalog) = %v, %v; want the parse error", kept, err)
	}
}

func TestEmit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	var out strings.Builder
	if err := Emit(&out, sample(), path, false, "3 types"); err != nil {
		t.Fatal(err)
	}
	if err := Emit(&out, sample(), path, true, "3 types"); err != nil {
		t.Fatal(err)
	}
	changed := sample()
	changed.Types[0].VCPU = 4
	err := Emit(&out, changed, path, true, "3 types")
	want := "wrote " + path + ": 3 types\nup to date: " + path + ": 3 types\n"
	if out.String() != want || err == nil || !strings.Contains(err.Error(), "make catalogs") {
		t.Errorf("Emit printed %q and returned %v; want %q and a check failure", out.String(), err, want)
	}
	live := sample()
	live.Live = true
	out.Reset()
	if err := Emit(&out, live, path, false, "live"); err != nil {
		t.Fatal(err)
	}
	if err := Emit(&out, sample(), path, true, "offline"); err != nil || !strings.Contains(out.String(), "kept "+path+": generated from the cloud's APIs as of 2026-07-06T14:20:29Z") {
		t.Errorf("Emit over a live catalog printed %q, %v", out.String(), err)
	}
}

func TestParseRegions(t *testing.T) {
	if got, err := ParseRegions(" us-east-1, eu-west-1 "); err != nil || !slices.Equal(got, []string{"us-east-1", "eu-west-1"}) {
		t.Errorf("ParseRegions = %v, %v", got, err)
	}
	for in, want := range map[string]string{"a,,b": "a region is empty", "a,b,a": "a appears twice", "": "a region is empty"} {
		if _, err := ParseRegions(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRegions(%q) = %v, want %q", in, err, want)
		}
	}
}
