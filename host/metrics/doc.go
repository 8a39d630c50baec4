// Package metrics is kip's Prometheus instrumentation: a registry of kip's
// own (never the client library's global one) with the Go and process
// collectors, every kip_* metric with its help text, and the hooks the
// host packages call to feed them. docs/observability.md lists each metric
// (name, type, labels, meaning); deploy/grafana/kip.json is built on those
// names, and a test keeps the dashboard's queries to names registered here.
//
// A nil *Metrics is valid and records nothing, so components built without
// metrics (tests, tools) need no special case.
//
// Three kinds of metrics live here:
//
//   - Events counted or timed as they happen: the launch phases of a cell
//     (LaunchPhase), plugin calls (PluginCall, fed by host/plugin's gRPC
//     interceptor), matcher decisions and capacity fallbacks, and the
//     Kubernetes API requests client-go makes (RegisterClientGo, through
//     k8s.io/client-go/tools/metrics).
//   - Instances and their cost (InstanceUp, InstanceDown): the hourly cost
//     of the running instances and their accumulated hours, by instance
//     type, zone and capacity type, from the price of the placement. An
//     instance whose price the catalog does not know is counted in
//     kip_instances_unknown_price and in no cost: a price is never guessed.
//   - State read when scraped (SetCells): the cells by lifecycle phase and
//     the pending pods by reason, from the cell manager's snapshot, which
//     the admin server's /cells also serves (Cell).
//
// It imports client-go's tools/metrics and the Prometheus client library;
// no other host package. host/cells, host/admin, host/daemon and host/cli
// import it.
package metrics
