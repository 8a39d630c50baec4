// Command gen builds aws.json, the AWS plugin's instance-type catalog, from
// the hand-transcribed sizes in catalog/source and the on-demand price maps
// of karpenter-provider-aws, or with -live from the AWS APIs. Run it from
// plugins/aws:
//
//	go run ./catalog/gen -karpenter DIR [-prices FILE.csv] [-check]
//	go run ./catalog/gen -live [-regions us-east-1,...] [-prices FILE.csv] [-check]
//
// DIR is the karpenter-provider-aws module directory (`make catalogs`
// resolves it with go mod download). -live takes credentials from the AWS
// SDK's default chain (live.go says what it calls). With -check it writes
// nothing and exits non-zero when the committed aws.json differs from what
// it would write.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// karpenterModule is the price source; -karpenter-version pins its version.
const karpenterModule = "github.com/aws/karpenter-provider-aws"

// karpenterFiles are the generated on-demand price maps, relative to the
// module directory.
var karpenterFiles = []string{
	"pkg/providers/pricing/zz_generated.pricing_aws.go",
	"pkg/providers/pricing/zz_generated.pricing_aws_us_gov.go",
	"pkg/providers/pricing/zz_generated.pricing_aws_cn.go",
}

// specSources are the origins of source/specs.csv and
// source/previous_generation.txt, as their comments and SOURCES.md name them.
var specSources = []catalog.Source{
	{
		Name:    "kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/ec2_instance_types.go",
		Ref:     "07806e9edcfede7a0c7c70833867e904f2114221",
		License: "Apache-2.0",
		Covers:  "types: vCPU, memory, GPU count, arch",
	},
	{
		Name:    "awsdocs/amazon-ec2-user-guide doc_source/burstable-credits-baseline-concepts.md",
		Ref:     "0147f878dcbad26b1151a12701a773743f0cd496",
		License: "CC-BY-SA-4.0",
		Covers:  "burstable baselines",
	},
	{
		Name:    "AWS EC2 User Guide and AWS Batch User Guide (accelerated computing, NVIDIA drivers, GPU jobs)",
		Ref:     "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/accelerated-computing-instances.html",
		License: "CC-BY-SA-4.0",
		Covers:  "GPU kinds and memory",
	},
	{
		Name:    "AWS Amazon EC2 Instance Types guide",
		Ref:     "https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-types.html",
		License: "CC-BY-SA-4.0",
		Covers:  "previous-generation families (left out); Apple-silicon mac2 arch corrections",
	},
}

type options struct {
	source, karpenter, karpenterVersion, prices string
	live                                        liveOptions
}

func main() { generator(new(options)).Main() }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return generator(new(options)).Run(ctx, args, stdout, stderr)
}

// generator is this command: the shared catalog flags and o's.
func generator(o *options) catalog.Generator {
	return catalog.Generator{
		Cloud: "aws",
		Usage: "usage: go run ./catalog/gen -karpenter DIR [-prices FILE.csv] [-check]\n" +
			"       go run ./catalog/gen -live [-regions R1,R2,...] [-prices FILE.csv] [-check]\n\n" +
			"Builds aws.json from catalog/source and karpenter-provider-aws's on-demand price maps,\n" +
			"or with -live from the AWS APIs (credentials from the SDK's default chain).\n" +
			"Run it from plugins/aws; `make catalogs` resolves DIR.",
		SourceHelp: "directory holding specs.csv and previous_generation.txt",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.karpenter, "karpenter", "", "directory of the "+karpenterModule+" module (required without -live; go mod download -json prints it as Dir)")
			fs.StringVar(&o.karpenterVersion, "karpenter-version", "v1.14.1", "version of that module, recorded as the price sources' ref")
			fs.StringVar(&o.prices, "prices", "", "optional extra price table (region,type,capacity_type,usd_per_hour), applied last")
			o.live.register(fs)
		},
		Build: func(ctx context.Context, fs *flag.FlagSet, source string) (*catalog.Catalog, string, error) {
			o.source = source
			if err := o.live.check(fs, o.karpenter); err != nil {
				return nil, "", err
			}
			switch {
			case o.live.enabled:
				return buildLive(ctx, *o)
			case o.karpenter == "":
				return nil, "", errors.New("parsing flags: -karpenter DIR is required (the " + karpenterModule + " module directory), or -live")
			}
			return build(*o)
		},
	}
}

// build assembles the catalog and a one-line summary of what went in.
func build(o options) (*catalog.Catalog, string, error) {
	if err := checkKarpenterDir(o.karpenter, o.karpenterVersion); err != nil {
		return nil, "", err
	}
	types, err := catalog.ReadSpecsFile(filepath.Join(o.source, "specs.csv"))
	if err != nil {
		return nil, "", err
	}
	prevGen, err := readFamilies(filepath.Join(o.source, "previous_generation.txt"))
	if err != nil {
		return nil, "", err
	}
	kept := types[:0:0]
	dropped := map[string]bool{}
	for _, t := range types {
		if prevGen[family(t.Name)] {
			dropped[t.Name] = true
			continue
		}
		kept = append(kept, t)
	}
	c := &catalog.Catalog{Schema: catalog.Schema, Cloud: "aws", Types: kept, Sources: slices.Clone(specSources)}

	var rows []catalog.PriceRow
	var notUSD []string
	seen := map[[2]string]string{}
	for _, rel := range karpenterFiles {
		f, err := readKarpenter(filepath.Join(o.karpenter, filepath.FromSlash(rel)))
		if err != nil {
			return nil, "", err
		}
		var regions []string
		for _, r := range f.rows {
			key := [2]string{r.Region, r.Type}
			if prev, ok := seen[key]; ok {
				return nil, "", fmt.Errorf("reading %s: %s %s is also priced in %s", rel, r.Region, r.Type, prev)
			}
			seen[key] = rel
			if !pricedInUSD(r.Region) {
				if !slices.Contains(notUSD, r.Region) {
					notUSD = append(notUSD, r.Region)
				}
				continue
			}
			if !slices.Contains(regions, r.Region) {
				regions = append(regions, r.Region)
			}
			rows = append(rows, r)
		}
		if len(regions) == 0 {
			continue // nothing taken from this file
		}
		if c.GeneratedAt.IsZero() || f.date.Before(c.GeneratedAt) {
			c.GeneratedAt = f.date
		}
		c.Sources = append(c.Sources, catalog.Source{
			Name:    "aws/karpenter-provider-aws " + rel,
			Ref:     o.karpenterVersion,
			License: "Apache-2.0",
			Date:    f.date,
			Covers:  "on-demand prices: " + strings.Join(regions, ", "),
		})
	}
	if c.GeneratedAt.IsZero() {
		return nil, "", errors.New("reading the karpenter price maps: no US-dollar prices in any of them")
	}
	skipped := c.AddPrices(rows)
	if o.prices != "" {
		extra, err := catalog.ReadPricesFile(o.prices)
		if err != nil {
			return nil, "", err
		}
		skipped = append(skipped, c.AddPrices(extra)...)
		c.Sources = append(c.Sources, catalog.Source{
			Name:   filepath.Base(o.prices),
			Covers: "extra prices: " + strings.Join(regionsOf(extra), ", "),
		})
	}
	slices.SortFunc(c.Regions, func(a, b catalog.Region) int { return strings.Compare(a.Name, b.Name) })
	sum := summary(c, dropped, skipped)
	if len(notUSD) > 0 {
		sum += "; left out " + strings.Join(notUSD, ", ") + " (karpenter prices it in CNY)"
	}
	return c, sum, nil
}

// pricedInUSD reports whether karpenter's price map of region is in US
// dollars: karpenter's pricing.go reads the AWS Price List in CNY for
// regions starting with "cn-", and the catalog holds US dollars only.
func pricedInUSD(region string) bool { return !strings.HasPrefix(region, "cn-") }

// family is the part of an instance type's name before the first '.'.
func family(name string) string {
	f, _, _ := strings.Cut(name, ".")
	return f
}

// readFamilies reads a list of families, one a line; '#' starts a comment.
func readFamilies(path string) (map[string]bool, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	defer f.Close()
	families := map[string]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		switch {
		case text == "":
			continue
		case strings.ContainsAny(text, ". \t,") || text != strings.ToLower(text):
			return nil, fmt.Errorf("reading %s line %d: %q is not a lower-case family name", name, line, text)
		case families[text]:
			return nil, fmt.Errorf("reading %s line %d: family %q appears twice", name, line, text)
		}
		families[text] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(families) == 0 {
		return nil, fmt.Errorf("reading %s: no families", name)
	}
	return families, nil
}

// checkKarpenterDir refuses a module directory whose name pins another
// version than the one recorded as the sources' ref (module cache
// directories end in @VERSION).
func checkKarpenterDir(dir, version string) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("reading the karpenter module: %w", err)
	}
	if _, v, ok := strings.Cut(filepath.Base(filepath.Clean(dir)), "@"); ok && v != version {
		return fmt.Errorf("reading the karpenter module: %s is version %s, want %s (-karpenter-version)", dir, v, version)
	}
	return nil
}

// karpenterFile is what one generated price file holds.
type karpenterFile struct {
	date    time.Time
	regions []string
	rows    []catalog.PriceRow
}

var generatedAt = regexp.MustCompile(`^// generated at (\S+) for \S+$`)

// readKarpenter parses one zz_generated.pricing_aws*.go file: its
// "generated at" comment and its one map[string]map[ec2types.InstanceType]float64
// literal of region → type → on-demand price. The package is parsed, never
// imported.
func readKarpenter(path string) (karpenterFile, error) {
	var out karpenterFile
	name := filepath.Base(path)
	src, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("reading %s: %w", name, err)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return out, fmt.Errorf("parsing %s: %w", name, err)
	}
	for _, cg := range file.Comments {
		for _, cm := range cg.List {
			if m := generatedAt.FindStringSubmatch(cm.Text); m != nil {
				if !out.date.IsZero() {
					return out, fmt.Errorf("reading %s: two \"generated at\" comments", name)
				}
				if out.date, err = time.Parse(time.RFC3339, m[1]); err != nil {
					return out, fmt.Errorf("reading %s: parsing its \"generated at\" date: %w", name, err)
				}
			}
		}
	}
	if out.date.IsZero() {
		return out, fmt.Errorf("reading %s: no \"// generated at <RFC 3339 time> for <region>\" comment to date its prices", name)
	}
	var lit *ast.CompositeLit
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				cl, ok := v.(*ast.CompositeLit)
				if !ok || !isPriceMapType(cl.Type) {
					continue
				}
				if lit != nil {
					return out, fmt.Errorf("reading %s: more than one price map", name)
				}
				lit = cl
			}
		}
	}
	if lit == nil {
		return out, fmt.Errorf("reading %s: no map[string]map[ec2types.InstanceType]float64 literal", name)
	}
	pos := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return out, fmt.Errorf("reading %s: %s: region entry is not key: value", name, pos(e))
		}
		region, err := stringLit(kv.Key)
		if err != nil {
			return out, fmt.Errorf("reading %s: %s: region: %w", name, pos(kv.Key), err)
		}
		inner, ok := kv.Value.(*ast.CompositeLit)
		if !ok {
			return out, fmt.Errorf("reading %s: %s: region %s: prices are not a map literal", name, pos(kv.Value), region)
		}
		out.regions = append(out.regions, region)
		for _, e := range inner.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				return out, fmt.Errorf("reading %s: %s: price entry is not key: value", name, pos(e))
			}
			typ, err := stringLit(kv.Key)
			if err != nil {
				return out, fmt.Errorf("reading %s: %s: instance type: %w", name, pos(kv.Key), err)
			}
			price, err := numberLit(kv.Value)
			if err != nil {
				return out, fmt.Errorf("reading %s: %s: price of %s in %s: %w", name, pos(kv.Value), typ, region, err)
			}
			out.rows = append(out.rows, catalog.PriceRow{Region: region, Type: typ, CapacityType: pluginapi.CapacityOnDemand, USDPerHour: price})
		}
	}
	if len(out.rows) == 0 {
		return out, fmt.Errorf("reading %s: the price map is empty", name)
	}
	return out, nil
}

// isPriceMapType reports whether t is map[string]map[X]float64.
func isPriceMapType(t ast.Expr) bool {
	outer, ok := t.(*ast.MapType)
	if !ok || !isIdent(outer.Key, "string") {
		return false
	}
	inner, ok := outer.Value.(*ast.MapType)
	return ok && isIdent(inner.Value, "float64")
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) (string, error) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", fmt.Errorf("%T is not a string literal", e)
	}
	s, err := strconv.Unquote(bl.Value)
	if err != nil {
		return "", fmt.Errorf("unquoting %s: %w", bl.Value, err)
	}
	if s == "" {
		return "", errors.New("empty string")
	}
	return s, nil
}

func numberLit(e ast.Expr) (float64, error) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || (bl.Kind != token.FLOAT && bl.Kind != token.INT) {
		return 0, fmt.Errorf("%T is not a number literal", e)
	}
	v, err := strconv.ParseFloat(bl.Value, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", bl.Value, err)
	}
	return v, nil
}

func regionsOf(rows []catalog.PriceRow) []string {
	var regions []string
	for _, r := range rows {
		if !slices.Contains(regions, r.Region) {
			regions = append(regions, r.Region)
		}
	}
	slices.Sort(regions)
	return regions
}

// summary is the generator's one-line report.
func summary(c *catalog.Catalog, dropped map[string]bool, skipped []catalog.PriceRow) string {
	var onDemand, spot int
	for _, r := range c.Regions {
		for _, p := range r.Prices {
			if p.OnDemand != nil {
				onDemand++
			}
			if p.Spot != nil {
				spot++
			}
		}
	}
	var regions []string
	for _, r := range c.Regions {
		regions = append(regions, r.Name)
	}
	s := fmt.Sprintf("%d types (%d previous-generation left out), regions %s, %d priced offerings (%d on-demand, %d spot)",
		len(c.Types), len(dropped), strings.Join(regions, ", "), onDemand+spot, onDemand, spot)
	var prev int
	var unknown []string
	for _, r := range skipped {
		if dropped[r.Type] {
			prev++
		} else if !slices.Contains(unknown, r.Type) {
			unknown = append(unknown, r.Type)
		}
	}
	s += fmt.Sprintf("; skipped %d price rows: %d for previous-generation types, %d for %d types without specs",
		len(skipped), prev, len(skipped)-prev, len(unknown))
	if len(unknown) > 0 {
		slices.Sort(unknown)
		s += " (" + catalog.FirstFew(unknown, 5) + ")"
	}
	return s
}
