package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommittedCatalogIsCurrent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run([]string{"-source", filepath.Join("..", "source"), "-out", filepath.Join("..", "azure.json"), "-check"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	if want := "up to date: ../azure.json: 132 types, no regions"; !strings.HasPrefix(stdout.String(), want) || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("summary %q, want one line starting %q", stdout.String(), want)
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "azure.json")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-source", filepath.Join("..", "source"), "-out", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"-source", filepath.Join("..", "source"), "-out", out, "-date", "2027-01-01", "-check"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "differs from what its sources give (first at line 4)") {
		t.Errorf("checking with another date: %v", err)
	}
	if err := run([]string{"-date", "21.11.2026"}, &stdout, &stderr); err == nil || !strings.HasPrefix(err.Error(), "parsing -date: ") {
		t.Errorf("a bad -date: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "specs.csv"), []byte("type,vcpu\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-source", dir, "-out", out}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "reading specs.csv") {
		t.Errorf("a bad specs.csv: %v", err)
	}
	if err := run([]string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}
