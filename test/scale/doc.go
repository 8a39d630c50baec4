// Package scale is issue 19's make bench-scale: the same burst of N pods
// (100, 300, 1,000) on one control plane through each virtual node under
// test, one after the other, each a fresh process: virtual-kubelet
// v1.13.0's own mock provider (MockNode, built from the Go module proxy by
// BuildMock and cached like the control plane), then kip with light cells
// (KipNode, under the e2e tag: framework.StartKip with LightCells on
// loopback addresses) behind the local plugin and behind the aws plugin
// and the EC2 simulator with no boot delay. Of kip, Run measures the kip
// process alone, not its plugin, light cells or simulator; the plugin
// process's CPU time and peak RSS are reported beside.
//
// Run starts a Node (an interface: Name, User, Start, PID, Exited, Stop),
// creates N pods on it at once, waits until all are Running, waits until
// the node has made no event create or patch for 5 s (the burst's backlog
// of events drained; at most 3 minutes; the results say how long after
// all Running the window started), measures the node idle for a minute
// (one period of kip's minute-long cycles), deletes them all and waits
// until they are gone. A Profiled node (kip with KIP_SCALE_PROFILE) saves
// a CPU profile of the idle window and its heap and goroutine profiles
// at the window's end. It measures:
//
//   - the time from the first create to the last pod seen Running, and
//     each pod's start as Kubernetes' node density test
//     (test/e2e_node/density_test.go) defines it: from just before its
//     create to the first watch event showing it in phase Running, both on
//     the harness's clock; their percentiles come from test/bench;
//   - the node process's peak RSS (VmHWM) and its CPU time (utime +
//     stime) over the burst and the deletion, and over the idle window,
//     from /proc (ReadUsage);
//   - the node's API requests, counted in the API server's audit log
//     (AuditArgs: one event per request of a node or a named user, at
//     RequestReceived): the one count that is the same for any node,
//     whatever its client library, with nothing added to the node (the
//     API server's apiserver_request_total has no user label); a node
//     that counts its own work too (Metered: kip's
//     kip_api_requests_total and kip_plugin_calls_total) has those
//     counters' growth reported beside.
//
// Markdown renders the results as docs/benchmarks.md's table, Ratios each
// node's figures over the mock's at the same N (CounterSums reads kip's
// counters from its /metrics), WriteSVG
// plots pods Running over time. The harness itself runs under the e2e
// build tag (scale_e2e_test.go's TestScale, make bench-scale); what is
// pure is unit-tested without it.
//
// It imports client-go, test/bench and test/modbuild, and under the e2e
// tag test/e2e/framework and test/controlplane; it never imports host or
// cell.
package scale
