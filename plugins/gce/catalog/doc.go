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
// # Regenerating
//
// From the repository root, `make catalogs` regenerates every plugin's
// catalog, and `make verify` fails when a committed catalog differs from
// what its sources give. By hand, from plugins/gce:
//
//	go run ./catalog/gen [-date YYYY-MM-DD] [-check]
package catalog
