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
//
// # Regenerating from the AWS APIs
//
// With AWS credentials, -live rebuilds the catalog from the APIs instead of
// karpenter's maps:
//
//	go run ./catalog/gen -live [-regions us-east-1,us-west-2,...]
//
// The credentials come from the SDK's default chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, an instance or task role); with
// none the generator stops before any call and says what to set. It needs
// ec2:DescribeInstanceTypes, ec2:DescribeInstanceTypeOfferings,
// ec2:DescribeSpotPriceHistory and pricing:GetProducts. -regions defaults
// to us-east-1, us-east-2, us-west-2, eu-west-1, eu-central-1,
// ap-southeast-1 and ap-northeast-1. What it reads:
//
//   - Sizes: EC2 DescribeInstanceTypes in the first region, current
//     generation only, including types that region does not sell: vCPU,
//     memory, GPUs (count summed over the devices, kind the device name
//     lower-cased with spaces as '-', memory per GPU), spot support, and
//     arch (x86_64 is amd64, arm64 is arm64; a type with neither, such as
//     an i386-only or Mac type, is left out). The API says a type is
//     burstable but not its baseline, so the baseline comes from
//     source/specs.csv; a burstable type specs.csv lacks, or sizes with
//     another vCPU count, is left out rather than given a guessed one.
//     Families in source/previous_generation.txt are left out as offline.
//   - Which types a region sells: DescribeInstanceTypeOfferings there.
//   - On-demand prices: the Price List Query API (GetProducts, served in
//     us-east-1) for Linux, shared tenancy, no pre-installed software,
//     capacity status Used and no licence; zero prices are ignored, and a
//     type with two different prices is left unpriced. Bare-metal types,
//     which the price list may file under dedicated tenancy (karpenter
//     queries them apart), can come out without an on-demand price.
//   - Spot prices: DescribeSpotPriceHistory in each region for Linux/UNIX
//     from the run time: the newest price per type and zone, kept per zone
//     (Price.SpotByZone; Price.Spot stays unset, as AWS has no
//     region-wide spot price).
//
// A -live catalog's generatedAt and its API sources' dates are the run
// time, to the second (-date sets it, for tests). The one-line report
// counts every type left out and why. -endpoint-ec2 and -endpoint-pricing
// point the SDK at other endpoints: gen's tests run -live against local
// fakes of the four operations' wire protocols (EC2 Query; JSON 1.1). The
// committed aws.json and `make catalogs` stay on the offline path, which
// needs no credentials.
package catalog
