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
// There is no price source, so the catalog has no regions: every region
// gets every size with unknown prices (offerings with PriceKnown false),
// and a warning saying so, and the host ranks them by size alone.
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
package catalog
