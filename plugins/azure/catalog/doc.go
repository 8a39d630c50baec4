// Package catalog is the Azure plugin's offline instance-type catalog: the
// common VM sizes of the B (v1), Dv3/Dsv3, Dv4/Dsv4/Ddv4/Ddsv4,
// Dav4/Dasv4, Ev3/Esv3, Ev4/Esv4, Eav4/Easv4, Fsv2, NCv3 and NVv3 series
// with their sizes (vCPU, memory, GPUs, architecture, B-series baseline).
// Load parses the embedded azure.json; the pluginapi/catalog package turns
// it into the plugin contract's types.
//
// # Where the figures come from
//
// azure.json records its sources; source/SOURCES.md lists every commit,
// page and judgment call. Sizes come from source/specs.csv, transcribed by
// hand from kubernetes/autoscaler's azure_instance_types.go (Apache-2.0),
// with B-series baselines and GPU models and memory from Microsoft's
// documentation. Every size is amd64: the source has no Arm (p) size.
//
// The committed catalog has no price source, so it has no regions: every
// region gets every size with unknown prices (offerings with PriceKnown
// false), and a warning saying so, and the host ranks them by size alone.
// A live build (see Regenerating) adds prices from Azure's Retail Prices
// API.
//
// The catalog's generatedAt is the day the sizes were transcribed
// (2026-11-21, the generator's -date): its age counts from then.
//
// # Regenerating
//
// From the repository root, `make catalogs` regenerates every plugin's
// catalog, and `make verify` fails when a committed catalog differs from
// what its sources give. By hand, from plugins/azure:
//
//	go run ./catalog/gen [-date YYYY-MM-DD] [-check]
//
// The generator can also rebuild the catalog from Azure's own APIs:
//
//	go run ./catalog/gen -live-prices [-live-specs] [-regions eastus,westeurope] [-check]
//
// Prices (-live-prices) need no credentials. The generator reads the Azure
// Retail Prices API (https://prices.azure.com/api/retail/prices,
// api-version 2023-01-01-preview, primary meters, filtered on serviceName
// 'Virtual Machines', priceType 'Consumption' and each region). It keeps
// the meters priced per "1 Hour" in USD, of type Consumption, in effect at
// the run time, and neither Windows (productName) nor "Low Priority";
// "Spot" in skuName or meterName makes a spot price. A price is keyed by
// armSkuName (Standard_D2s_v5). When several meters remain for one region,
// type and capacity type, the one with the newest effectiveStartDate wins,
// then the lowest price, then the lowest meterId; the report counts these
// conflicts. Prices of types the catalog does not list are skipped and
// counted. Each region of -regions that prices a catalog type becomes a
// catalog region holding the types priced there.
//
// Sizes (-live-specs) come from Azure Resource Manager's Resource SKUs list
// (armcompute/v8, resourceType virtualMachines, one location filter per
// region) instead of specs.csv: vCPUs (vCPUsAvailable when a
// constrained-core size has fewer), MemoryGB × 1024 MiB, GPUs, and
// CpuArchitectureType (x64 is amd64, Arm64 arm64). Resource SKUs gives no
// burstable baseline: a B-series size keeps specs.csv's baseline when
// specs.csv lists it with the same vCPU count and is left out otherwise.
// GPU kinds and memory also come from specs.csv where it lists the size.
// A size that lacks a figure is left out and counted, never filled in.
// The generator signs in with azidentity's DefaultAzureCredential
// (environment, workload or managed identity, Azure CLI) to the
// subscription that -subscription or AZURE_SUBSCRIPTION_ID names, and
// without either fails naming what is missing.
//
// Both read -regions, by default eastus, eastus2, westus2, westeurope,
// northeurope and southeastasia. A live build's generatedAt is its run
// time and each live source records the run date; -now sets the run time
// (RFC 3339) to repeat a build. -prices-url and -arm-endpoint point the
// generator at other endpoints, such as the local fakes its tests run
// (-arm-endpoint may be plain http only on a loopback address), and
// -retries sets how often a request is retried after HTTP 429 or 5xx.
//
// `make catalogs` and `make verify` run the offline build only, so that
// the committed catalog stays reproducible.
package catalog
