// Command gen builds azure.json, the Azure plugin's instance-type catalog,
// from the hand-transcribed sizes in catalog/source/specs.csv. Offline
// there is no price source, so the catalog has no regions and every price
// is unknown. Run it from plugins/azure:
//
//	go run ./catalog/gen [-date 2026-11-21] [-check]
//
// With -check it writes nothing and exits non-zero when the committed
// azure.json differs from what it would write.
//
// The live path (live.go) adds what the cloud's APIs say: -live-prices
// reads the unauthenticated Azure Retail Prices API, -live-specs reads the
// VM sizes from Azure Resource Manager with the caller's credentials:
//
//	go run ./catalog/gen -live-prices [-live-specs] [-regions eastus,westeurope]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi/catalog"
)

// The origins of source/specs.csv, as its comments and SOURCES.md name
// them. -live-specs keeps the ones whose figures it still takes from
// specs.csv (baselines, GPU kinds).
var (
	autoscalerSource = catalog.Source{
		Name:    "kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure/azure_instance_types.go",
		Ref:     "7200dac0dafb5836f6127268d80a642550a5b0af",
		License: "Apache-2.0",
		Covers:  "sizes: vCPU, memory, GPU count",
	}
	baselineSource = catalog.Source{
		Name:    "MicrosoftDocs/azure-docs articles/virtual-machines/sizes-b-series-burstable.md",
		Ref:     "0d051abb9637a65c439f122023b8861a9d4fea3b",
		License: "CC-BY-4.0",
		Covers:  "B-series baselines",
	}
	// SOURCES.md: the repository's licence was not verified (its docs are
	// presumably CC BY 4.0, like azure-docs); facts only.
	namingSource = catalog.Source{
		Name:   "MicrosoftDocs/azure-compute-docs articles/virtual-machines/vm-naming-conventions.md",
		Ref:    "028a4dc444fb9409f8467699765632007dcfc1dc",
		Covers: "arch (no size has the Arm feature letter p)",
	}
	ncv3Source = catalog.Source{
		Name:   "MicrosoftDocs/azure-compute-docs articles/virtual-machines/sizes/gpu-accelerated/ncv3-series.md",
		Ref:    "1827cf353b07fd08b3141bd2e40291e1dbdd4a5f",
		Covers: "NCv3 GPU kind and memory",
	}
	nvv3Source = catalog.Source{
		Name:   "MicrosoftDocs/azure-compute-docs articles/virtual-machines/sizes/gpu-accelerated/nvv3-series.md",
		Ref:    "53b9767cc237fa7a301066929b3c546ba33f02b7",
		Covers: "NVv3 GPU kind and memory",
	}
	sources = []catalog.Source{autoscalerSource, baselineSource, namingSource, ncv3Source, nvv3Source}
)

type options struct {
	source, date string
	live         liveOptions
}

func main() { generator(new(options), realWorld()).Main() }

func run(args []string, stdout, stderr io.Writer) error {
	return runIn(context.Background(), realWorld(), args, stdout, stderr)
}

// runIn is run with the live paths reaching outside through w.
func runIn(ctx context.Context, w world, args []string, stdout, stderr io.Writer) error {
	return generator(new(options), w).Run(ctx, args, stdout, stderr)
}

// generator is this command, the live paths reaching outside through w:
// the shared catalog flags and o's.
func generator(o *options, w world) catalog.Generator {
	return catalog.Generator{
		Cloud: "azure",
		Usage: "usage: go run ./catalog/gen [-date YYYY-MM-DD] [-check]\n" +
			"       go run ./catalog/gen -live-prices [-live-specs] [-regions R1,R2] [-check]\n\n" +
			"Builds azure.json from catalog/source/specs.csv, and with -live-prices and -live-specs\n" +
			"from the Azure Retail Prices API and Azure Resource Manager. Run it from plugins/azure.",
		SourceHelp: "directory holding specs.csv",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.date, "date", "2026-11-21", "the catalog's generatedAt (YYYY-MM-DD): the day the sizes were transcribed (offline builds only)")
			o.live.register(fs)
		},
		Build: func(ctx context.Context, fs *flag.FlagSet, source string) (*catalog.Catalog, string, error) {
			o.source = source
			if err := o.live.check(fs); err != nil {
				return nil, "", err
			}
			c, err := build(*o)
			if err != nil {
				return nil, "", err
			}
			sum := fmt.Sprintf("%d types, no regions (no price source: every price unknown), 0 priced offerings, 0 price rows skipped", len(c.Types))
			if o.live.enabled() {
				if sum, err = o.live.apply(ctx, w, c); err != nil {
					return nil, "", err
				}
			}
			return c, sum, nil
		},
	}
}

func build(o options) (*catalog.Catalog, error) {
	date, err := time.Parse(time.DateOnly, o.date)
	if err != nil {
		return nil, fmt.Errorf("parsing -date: %w", err)
	}
	types, err := catalog.ReadSpecsFile(filepath.Join(o.source, "specs.csv"))
	if err != nil {
		return nil, err
	}
	return &catalog.Catalog{Schema: catalog.Schema, Cloud: "azure", GeneratedAt: date, Sources: slices.Clone(sources), Types: types}, nil
}
