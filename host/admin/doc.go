// Package admin is kip's admin HTTP server: /metrics (host/metrics'
// registry in the Prometheus text format), /healthz and /readyz (checks
// registered by name, in the kube-apiserver's format) and /cells (the
// node's cells as JSON, for `kip cells`). It runs in every kip process,
// the leader's and a standby's, from the start of `kip run`.
//
// # Checks
//
// A check is a func(*http.Request) error registered by name
// (AddHealthCheck, AddReadyCheck); the request's context bounds it.
// /healthz and /readyz answer 200 "ok" when every check passes, else 500
// listing each check; with ?verbose each is listed either way:
//
//	[+]ping ok
//	[-]plugin failed: plugin kip-plugin-aws: unavailable
//	readyz check failed
//
// ?exclude=name (repeatable) leaves a check out, and /readyz/<name> (or
// /healthz/<name>) runs one check alone, as the kube-apiserver's do.
// /healthz always has "ping". What kip registers is the daemon's choice
// (host/daemon): the API server reachable and the plugin answering for
// readiness; the lead wires leadership (host/election) and the node
// certificate (host/bootstrap) the same way.
//
// # Who may read what
//
// /metrics, /cells and /debug/pprof/ answer only callers the cluster
// authorizes, as the kubelet's and kube-rbac-proxy's /metrics do: a
// bearer token (else 401) that a TokenReview authenticates (else 401),
// whose user a SubjectAccessReview allows the verb (get for GET) on the
// path as a non-resource URL (else 403), each answer cached (2 minutes
// when yes, 30 s when no; ClusterAccess). The Access interface is that
// decision, so that tests give a fake; the daemon gives ClusterAccess
// once it has a client, on a rate limiter of its own. /healthz and
// /readyz stay open: the kubelet's probes carry no token.
//
// Another package serves a path of its own behind the same protection
// with HandleProtected, even once the server serves: host/keptlogs's
// /keptlogs (the kept logs of ended pods, which a standby mirrors).
//
// Config is the admin section of kip.yaml: listenAddress (default
// 127.0.0.1:10262), off, profiling (default false), which adds Go's
// runtime profiles (net/http/pprof) under /debug/pprof/ for `go tool
// pprof http://127.0.0.1:10262/debug/pprof/heap`, and authorization
// (cluster, the default, or none: anyone who reaches the address).
//
// Cells is the other end of /cells, for `kip cells` (host/cli), which
// sends a bearer token.
//
// It imports host/metrics, host/setting, client-go (the reviews) and the
// Prometheus client library; host/config, host/daemon and host/cli import
// it.
package admin
