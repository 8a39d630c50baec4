// Package catalog is the AWS plugin's offline instance-type catalog: the
// EC2 instance types of the current generation with their sizes (vCPU,
// memory, GPUs, architecture, burstable baseline) and on-demand prices in
// the regions a price source covers. Load parses the embedded aws.json; the
// pluginapi/catalog package turns it into the plugin contract's types.
//
// # Where the figures come from
//
// aws.json records its sources; in short:
//
//   - Sizes: source/specs.csv, transcribed by hand from kubernetes/autoscaler
//     cluster-autoscaler/cloudprovider/aws/ec2_instance_types.go (Apache-2.0),
//     with burstable baselines, GPU models and GPU memory from the AWS
//     documentation (source/SOURCES.md lists every page and judgment call).
//   - Previous generation: every type whose family (the part of the name
//     before the first '.') is listed in source/previous_generation.txt is
//     left out; AWS no longer recommends those families.
//   - On-demand prices: the generated price maps of
//     github.com/aws/karpenter-provider-aws v1.14.1 (Apache-2.0),
//     pkg/providers/pricing/zz_generated.pricing_aws*.go, read as Go source
//     (never imported), for us-east-1, us-gov-east-1 and us-gov-west-1. A
//     priced region lists exactly the types its map prices; a price for a
//     type the specs lack is skipped (nobody knows what fits on it).
//     cn-north-1 is left out: karpenter prices it in Chinese yuan (its
//     pricing.go reads the price list in CNY for "cn-" regions) and the
//     catalog holds US dollars, so that region gets every type with
//     unknown prices and a warning.
//   - Spot prices: no source, so every spot price is unknown (absent), and
//     the host ranks those offerings after every priced one.
//
// The catalog's generatedAt is the date of its oldest price source used
// (each karpenter file says when it was generated): prices are what go
// stale, so the catalog is as old as its oldest price.
//
// # Regenerating
//
// From the repository root, `make catalogs` regenerates every plugin's
// catalog, and `make verify` fails when a committed catalog differs from
// what its sources give. By hand, from plugins/aws:
//
//	go run ./catalog/gen -karpenter "$(go mod download -json github.com/aws/karpenter-provider-aws@v1.14.1 | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
//
// (run the download in a throwaway module; the Makefile shows how), with
// -check to compare instead of write, and -prices FILE.csv to add prices in
// the pluginapi/catalog price-table format (applied last, so they override).
package catalog
