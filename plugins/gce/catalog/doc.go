// Package catalog is the GCE plugin's offline instance-type catalog: the
// predefined machine types of E2, N1 (with f1-micro and g1-small), N2, N2D,
// N4, C2, C2D, C3, C3D, T2A, T2D, M1, A2 and G2, a bounded grid of custom
// machine types, their sizes (vCPU, memory, GPUs, architecture,
// shared-core baseline) and their us-central1 prices. Load parses the
// embedded gce.json; the pluginapi/catalog package turns it into the
// plugin contract's types.
//
// # Where the figures come from
//
// gce.json records its sources; source/SOURCES.md lists every page, commit
// and judgment call. In short:
//
//   - Sizes: source/specs.csv, transcribed by hand from the Google Cloud
//     documentation's machine-family pages (CC BY 4.0), with the API's
//     memoryMb where the documented GB do not convert to whole MiB.
//   - Custom machine types: source/custom.csv holds each family's limits.
//     The generator lists every vCPU count they allow up to 32, each with
//     memory at every whole GiB per vCPU inside the family's per-vCPU range
//     (and E2's 128 GB cap), named as GCE names them: custom-VCPU-MiB for
//     N1, FAMILY-custom-VCPU-MiB otherwise. Other shapes exist but are not
//     listed.
//   - Prices: kubernetes/autoscaler's gce_price_info.go (Apache-2.0), whose
//     maintainers state its prices are us-central1's. A predefined type
//     takes its price from source/prices.csv when the file lists one;
//     otherwise it is composed as the autoscaler's own price model composes
//     it (source/SOURCES.md, "Spot rates"): on-demand = vCPU × the family's
//     vCPU rate + GiB × its GiB rate (source/rates.csv), spot = that
//     composed on-demand price × the family's spot ratio (numerator /
//     denominator in source/spot_discounts.csv), each capacity type on its
//     own (C3D's listed on-demand prices keep composed spot ones). Custom
//     types are priced the same way from source/custom_rates.csv and the
//     custom ratios. Composed prices are rounded to a millionth of a
//     dollar. A type with GPUs is never composed (the rates leave the GPUs
//     out), and a family without rates (T2A; custom N4) has unknown prices.
//     n2-highcpu-128 is priced by the source but is not a documented type,
//     so its rows are skipped.
//
// The price file carries no date, so the catalog's generatedAt is the day
// its figures were transcribed (2026-11-21, the generator's -date): the
// catalog's age counts from the transcription, and the prices may be
// older than that.
//
// # The live path
//
// `go run ./catalog/gen -live` builds the catalog from Google's APIs
// instead (gen/live.go), with no SDK: both are REST JSON over net/http,
// authorised by golang.org/x/oauth2.
//
//   - Types: the Compute Engine API's machineTypes.aggregatedList of the
//     project (guestCpus, memoryMb, isSharedCpu, accelerators), all pages.
//     A type is sold in a region when the API lists it in one of the
//     region's zones (us-central1-a → us-central1); types sold in none of
//     -regions are not listed. GPU kinds are normalised as specs.csv and
//     the host write them: lower case, without "nvidia-tesla-" or
//     "nvidia-" (nvidia-a100-80gb → a100-80gb, where specs.csv writes a100
//     and tells the two A100s apart by memory). The API states no
//     architecture, so a family rule does (source/SOURCES.md, "Live
//     generator"): T2A, C4A and N4A are arm64; A2, C2, C2D, C3, C3D, C4,
//     C4D, E2, F1, G1, G2, M1, N1, N2, N2D, N4, N4D and T2D amd64. Left out,
//     and counted in the summary: types of other families, -lssd and
//     -metal types (bundled Local SSD, bare metal), OBSOLETE or DELETED
//     types, types with two GPU models, and shared-core types without a
//     baseline in specs.csv (the API gives none, and none is invented).
//     GPU memory comes from specs.csv when it lists the type with as many
//     GPUs, else it is unknown.
//   - Custom types: the same grid as offline (custom.csv), each sold in
//     the regions that sell a usable predefined type of its family.
//   - Prices: the Cloud Billing Catalog API's SKUs of Compute Engine
//     (service 6F81-5844-456A), all pages. A SKU gives a rate when its
//     category's resourceFamily is "Compute", its usageType is "OnDemand"
//     (on-demand) or "Preemptible" (spot), and its description, less a
//     leading "Spot Preemptible " (required for spot) and everything from
//     " running in ", is "FAMILY [AMD|Arm] [Custom ]Instance Core|Ram"
//     (family upper case: "N2 Instance Core", "N2D AMD Instance Ram",
//     "C4A Arm Instance Core", "N2 Custom Instance Ram"), or one of the
//     exceptions "N1 Predefined Instance", "Custom Instance" (N1 custom),
//     "Compute optimized" (C2) and "Memory-optimized Instance" (M1)
//     followed by Core or Ram. A GPU rate is "MODEL GPU running in ..."
//     (on-demand) or "MODEL GPU attached to Spot Preemptible VMs running
//     in ..." (spot), MODEL normalised like a GPU kind ("Nvidia Tesla A100
//     80GB" → a100-80gb). The category's resourceGroup is not used: it is
//     not CPU or RAM for every family (N1's is N1Standard). Everything else
//     (commitments, sole tenancy, licences, Local SSD, per-type SKUs such
//     as f1-micro's) gives no rate. A rate is the last tier's unitPrice
//     (units + nanos) of pricingInfo[0], in USD, per "h" (vCPU, GPU) or
//     "GiBy.h" (memory), for each region in serviceRegions; a matched SKU
//     with another unit or currency is skipped and counted, and two SKUs
//     pricing one rate differently leave it unknown, counted.
//   - A type's price in a region is vCPU × its family's vCPU rate + GiB ×
//     its memory rate, + GPUs × its GPU model's rate for A2, G2 and other
//     types with GPUs, rounded to a millionth of a dollar; custom types
//     use the family's custom rates. On-demand and spot are composed each
//     from their own rates. A price missing any of its rates is unknown
//     (a family without SKUs, an A100 80GB without a GPU SKU), and so are
//     shared-core types' (they are not billed per vCPU).
//
// generatedAt and the two APIs' source dates are the run time.
//
// # Regenerating
//
// From the repository root, `make catalogs` regenerates every plugin's
// catalog, and `make verify` fails when a committed catalog differs from
// what its sources give. By hand, from plugins/gce:
//
//	go run ./catalog/gen [-date YYYY-MM-DD] [-check]
//
// From the APIs:
//
//	go run ./catalog/gen -live -project PROJECT [-regions us-central1,europe-west1] [-api-key KEY]
//
// Its flags:
//
//   - project (required): the project whose machine types are listed; the
//     caller needs compute.machineTypes.list in it.
//   - regions: the regions to cover, default us-central1, us-east1,
//     us-east4, us-west1, europe-west1, europe-west4, asia-southeast1.
//   - api-key (or $GCE_API_KEY): an API key for the Billing Catalog, sent
//     as X-Goog-Api-Key. Without one it gets the OAuth token too.
//   - access-token (or $GCE_ACCESS_TOKEN): an OAuth access token, such as
//     `gcloud auth print-access-token` prints. Without one, Application
//     Default Credentials (`gcloud auth application-default login`,
//     GOOGLE_APPLICATION_CREDENTIALS, or the metadata server).
//   - date: generatedAt, YYYY-MM-DD or RFC 3339; default the run time.
//   - compute-url, billing-url: the APIs' base URLs, default
//     https://compute.googleapis.com/compute/v1 and
//     https://cloudbilling.googleapis.com/v1; tests point them at local
//     fakes.
//   - check, out, source: as offline.
//
// `make verify` checks catalog/gce.json against the offline sources, so a
// live catalog written over it fails there: write it elsewhere with -out
// to compare, or change `make catalogs` too when it is to replace them.
package catalog
