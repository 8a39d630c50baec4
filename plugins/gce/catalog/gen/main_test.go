package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCommittedCatalogIsCurrent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run([]string{"-source", filepath.Join("..", "source"), "-out", filepath.Join("..", "gce.json"), "-check"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	for _, want := range []string{"regions us-central1", "skipped 2 price rows for types not in specs.csv (n2-highcpu-128)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary %q lacks %q", stdout.String(), want)
		}
	}
	if strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("want a one-line summary, got %q", stdout.String())
	}
}

func TestCheckFailsOnStaleCatalog(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gce.json")
	args := []string{"-source", filepath.Join("..", "source"), "-out", out}
	var stdout, stderr bytes.Buffer
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if err := run(append(args, "-date", "2026-11-22", "-check"), &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), "differs from what its sources give (first at line 4)") {
		t.Fatalf("checking with another date: %v", err)
	}
	if err := run([]string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "usage: go run ./catalog/gen") {
		t.Errorf("-h: %v, %q", err, stderr.String())
	}
}

func TestCustomTypes(t *testing.T) {
	limits := []customLimit{
		{family: "n1", minVCPU: 1, maxVCPU: 1, vcpuStep: 1, minMiBPerVCPU: 1024, maxMiBPerVCPU: 2560, mibStep: 256},
		{family: "e2", minVCPU: 30, maxVCPU: 40, vcpuStep: 2, minMiBPerVCPU: 512, maxMiBPerVCPU: 8192, mibStep: 256, maxMiB: 131072},
		{family: "n4", minVCPU: 2, maxVCPU: 2, vcpuStep: 2, minMiBPerVCPU: 2048, maxMiBPerVCPU: 3072, mibStep: 256},
	}
	var got []string
	for _, ct := range customTypes(limits) {
		got = append(got, ct.Name+"/"+ct.family)
	}
	want := []string{
		"custom-1-1024/n1", "custom-1-2048/n1",
		"e2-custom-30-30720/e2", "e2-custom-30-61440/e2", "e2-custom-30-92160/e2", "e2-custom-30-122880/e2",
		"e2-custom-32-32768/e2", "e2-custom-32-65536/e2", "e2-custom-32-98304/e2", "e2-custom-32-131072/e2",
		"n4-custom-2-4096/n4", "n4-custom-2-6144/n4",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("customTypes:\n got %v\nwant %v", got, want)
	}
}

func TestCompose(t *testing.T) {
	p := pricing{
		rates:  map[famKey]rate{{"r", "n4"}: {vcpu: 0.030821, gib: 0.004131}},
		ratios: map[famKey]ratio{{"r", "n4"}: {num: 0.007976, den: 0.030821}},
	}
	od, spot := p.compose(famKey{"r", "n4"}, 2, 8192)
	if od == nil || *od != 0.09469 || spot == nil || *spot != 0.024504 {
		t.Errorf("compose = %v, %v; want 0.09469, 0.024504", od, spot)
	}
	if od, spot := p.compose(famKey{"r", "t2a"}, 1, 4096); od != nil || spot != nil {
		t.Errorf("a family without rates got prices %v, %v", od, spot)
	}
}

func TestReadErrors(t *testing.T) {
	write := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	const rates = "family,region,capacity_type,usd_per_vcpu_hour,usd_per_gib_hour\n"
	const discounts = "family,region,pricing,numerator,denominator\n"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"spot rate disagrees", map[string]string{
			"r.csv": rates + "n2,r1,on-demand,0.031611,0.004237\nn2,r1,spot,0.0077,\n",
			"d.csv": discounts + "n2,r1,predefined,0.007650,0.031611\n",
		}, "reading r.csv: n2 r1 spot vCPU rate 0.0077 is not the numerator 0.00765 in d.csv"},
		{"on-demand rate disagrees", map[string]string{
			"r.csv": rates + "n2,r1,on-demand,0.03,0.004237\n",
			"d.csv": discounts + "n2,r1,predefined,0.007650,0.031611\n",
		}, "on-demand vCPU rate 0.03 is not the denominator 0.031611"},
		{"spot memory rate", map[string]string{
			"r.csv": rates + "# comment\nn2,r1,spot,0.0077,0.001\n",
			"d.csv": discounts,
		}, "reading r.csv line 3: a spot row's usd_per_gib_hour must be empty"},
		{"bad number", map[string]string{
			"r.csv": rates + "n2,r1,on-demand,abc,0.004237\n",
			"d.csv": discounts,
		}, `reading r.csv line 2: usd_per_vcpu_hour "abc" is not a price (a finite number >= 0)`},
		{"bad header", map[string]string{
			"r.csv": "family,region\n",
			"d.csv": discounts,
		}, "reading r.csv line 1: wrong number of fields: 2, want 5 (family,region,capacity_type,"},
		{"bad pricing", map[string]string{
			"r.csv": rates,
			"d.csv": discounts + "n2,r1,committed,1,2\n",
		}, `pricing "committed" is neither predefined nor custom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := write(t, tt.files)
			_, err := readPricing(filepath.Join(dir, "r.csv"), filepath.Join(dir, "d.csv"), "predefined")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	dir := write(t, map[string]string{"custom.csv": strings.Join(customHeader, ",") + "\nn2,4,2,2,512,8192,256,\n"})
	if _, err := readCustom(filepath.Join(dir, "custom.csv")); err == nil || !strings.Contains(err.Error(), "line 2: vCPU range 4..2 step 2 is empty") {
		t.Errorf("readCustom: %v", err)
	}
}
