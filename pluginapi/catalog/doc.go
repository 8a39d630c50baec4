// Package catalog is the offline instance-type catalog a cloud plugin
// embeds and serves through ListInstanceTypes: sizes (vCPU, memory, GPUs,
// architecture, burstable baseline) and hourly prices per region, with the
// provenance of every figure.
//
// A catalog is a JSON document (schema 1) generated from CSV files by a
// plugin's own generator (`make catalogs`), committed, and embedded (with
// a go:embed directive). Parse validates it; Catalog.InstanceTypes turns
// one region of it into the plugin contract's []pluginapi.InstanceType for
// the zones the plugin was configured with; Catalog.Info reports its
// sources and date for GetInfo, from which kip derives the catalog's age.
//
// # Unknown figures
//
// A price with no source is absent from the file (JSON null), and becomes
// an offering with PriceKnown false: never a guessed number. A region the
// catalog has no prices for still gets every type, each with unknown
// prices, and a warning the plugin passes on from Configure. The matcher
// in the host ranks unknown-price offerings after every priced one.
//
// # CSV inputs
//
// ReadSpecs reads the size table
// (type,vcpu,memory_mib,gpu_count,gpu_kind,gpu_memory_mib,arch,baseline_millicpu)
// and ReadPrices the price table (region,type,capacity_type,usd_per_hour);
// lines starting with '#' are comments, where the files name their sources.
// A generator reads its own tables (rates, limits) the same way with
// ReadTable, whose Fields parse the cells; an error names the file, the
// line and the column of the first bad cell.
//
// # Generators
//
// A Generator is what every plugin's generator (`go run ./catalog/gen`)
// shares: the flags -source, -out and -check, the usage -h prints, and the
// run from parsing the flags to the summary line; a generator adds its own
// flags and a Build function, and its main is Generator.Main.
//
// Emit (over WriteOrCheck) is a generator's last step: it writes the
// marshalled catalog or, with the generator's -check flag (which `make
// verify` runs), fails when the committed file differs from what its
// sources give. A catalog a generator built from the cloud's APIs is marked
// Live: nothing in the repository can rebuild it, so -check validates it
// and keeps it; commit a live refresh together with the code that made it.
//
// It imports only the standard library and pluginapi.
package catalog
