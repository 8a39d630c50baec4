package plugintest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the golden file at path, or, with update (a
// test binary's -update flag), first writes got there. A plugin's tests
// keep what it renders (its launch requests, its boot recipe, its
// configuration's JSON Schema) in golden files under testdata.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got ---\n%s\n--- want ---\n%s", filepath.Base(path), got, want)
	}
}
