package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

const fixture = "testdata/karpenter"

func opts(t *testing.T) options {
	t.Helper()
	return options{
		source:           filepath.Join("..", "source"),
		karpenter:        fixture,
		karpenterVersion: "v1.14.1",
	}
}

func TestBuild(t *testing.T) {
	c, sum, err := build(opts(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Type("c4.large"); ok {
		t.Error("previous-generation c4.large is in the catalog")
	}
	r, ok := c.Region("us-east-1")
	if !ok || len(r.Prices) != 2 || *r.Prices["c5.large"].OnDemand != 0.085 || r.Prices["c5.large"].Spot != nil {
		t.Errorf("us-east-1 prices: %+v", r.Prices)
	}
	if _, ok := c.Region("cn-north-1"); ok {
		t.Error("cn-north-1 (priced in CNY) is in the catalog")
	}
	if want := time.Date(2026, 6, 15, 15, 14, 3, 0, time.UTC); !c.GeneratedAt.Equal(want) {
		t.Errorf("generatedAt %v, want the oldest used price source's date %v", c.GeneratedAt, want)
	}
	for _, want := range []string{
		"regions us-east-1, us-gov-east-1, us-gov-west-1, 5 priced offerings (5 on-demand, 0 spot)",
		"skipped 3 price rows: 1 for previous-generation types, 2 for 2 types without specs (c9z.large, c9z.xlarge)",
		"left out cn-north-1 (karpenter prices it in CNY)",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}
}

func TestExtraPrices(t *testing.T) {
	o := opts(t)
	o.prices = filepath.Join(t.TempDir(), "extra.csv")
	csv := "# hand-written\nregion,type,capacity_type,usd_per_hour\nus-east-1,c5.large,spot,0.03\neu-west-1,c5.large,on-demand,0.096\nus-east-1,zz.large,on-demand,1\n"
	if err := os.WriteFile(o.prices, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	c, sum, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Region("us-east-1")
	if p := r.Prices["c5.large"]; p.Spot == nil || *p.Spot != 0.03 || *p.OnDemand != 0.085 {
		t.Errorf("c5.large in us-east-1: %+v", p)
	}
	if _, ok := c.Region("eu-west-1"); !ok {
		t.Error("the extra region eu-west-1 is missing")
	}
	if last := c.Sources[len(c.Sources)-1]; last.Name != "extra.csv" || last.Covers != "extra prices: eu-west-1, us-east-1" {
		t.Errorf("extra price source %+v", last)
	}
	if !strings.Contains(sum, "c9z.large, c9z.xlarge, zz.large") {
		t.Errorf("summary %q does not name zz.large as skipped", sum)
	}
}

func TestRunWritesThenChecks(t *testing.T) {
	o, out := opts(t), filepath.Join(t.TempDir(), "aws.json")
	args := []string{"-source", o.source, "-out", out, "-karpenter", fixture}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("writing: %v (%s)", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "wrote "+out+": ") || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("want a one-line summary, got %q", stdout.String())
	}
	if err := run(t.Context(), append(args, "-check"), &stdout, &stderr); err != nil {
		t.Fatalf("checking a fresh catalog: %v", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	stale := bytes.Replace(data, []byte(`"c5.large": {"onDemand":0.085}`), []byte(`"c5.large": {"onDemand":0.084}`), 1)
	if bytes.Equal(stale, data) {
		t.Fatal("the fixture price of c5.large is not in the written catalog")
	}
	if err := os.WriteFile(out, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(t.Context(), append(args, "-check"), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "differs from what its sources give") || !strings.Contains(err.Error(), "make catalogs") {
		t.Fatalf("checking a stale catalog: %v", err)
	}
}

func TestRunFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"-out", filepath.Join(t.TempDir(), "x.json")}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "-karpenter DIR is required") {
		t.Errorf("without -karpenter: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "karpenter-provider-aws@v1.13.0")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"-karpenter", dir}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "is version v1.13.0, want v1.14.1") {
		t.Errorf("with another version's directory: %v", err)
	}
}

func TestReadKarpenter(t *testing.T) {
	f, err := readKarpenter(filepath.Join(fixture, karpenterFiles[1]))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.rows) != 3 || f.rows[2].Region != "us-gov-west-1" || f.rows[2].Type != "t3.small" ||
		f.rows[2].USDPerHour != 0.0244 || f.rows[2].CapacityType != pluginapi.CapacityOnDemand {
		t.Errorf("rows %+v", f.rows)
	}
	tests := []struct{ name, src, want string }{
		{"no date", "package p\nvar M = map[string]map[T]float64{\"r\": {\"a.large\": 1}}\n", `no "// generated at`},
		{"no map", "package p\n// generated at 2026-07-06T14:20:29Z for us-east-1\nvar M = 1\n", "no map[string]map[ec2types.InstanceType]float64 literal"},
		{"bad date", "package p\n// generated at yesterday for us-east-1\n", "parsing its \"generated at\" date"},
		{"computed price", "package p\n// generated at 2026-07-06T14:20:29Z for r\nvar M = map[string]map[T]float64{\"r\": {\"a.large\": 1 + 1}}\n", "price of a.large in r: *ast.BinaryExpr is not a number literal"},
		{"syntax", "package p\nvar = \n", "parsing x.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.go")
			if err := os.WriteFile(path, []byte(tt.src), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readKarpenter(path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
