// Package daemon is kip's composition root: it builds every host component
// from the configuration and runs them until the context ends. `kip run`
// calls Run; nothing else does.
//
// Start order matters: the cloud plugin and the cluster CA first, then the
// cache of the node's pods (synced), then the cluster's Services and
// EndpointSlices (one informer factory, whose host/clusterip table every
// cell gets before its pod), then the cell manager's adoption of cells
// that survived a restart, and only then virtual-kubelet's pod
// controller, which would otherwise treat surviving cells as unknown.
// build makes the components (the plugin's process the only one started);
// lead syncs the caches and runs them as one group (group.go): the node
// starts once the cells are adopted, the first component to return stops
// them all, and a leader drains them before it lets its Lease go.
//
// The node's identity is the kubeconfig's, or, with bootstrap.kubeconfig,
// the certificate of system:node:<nodeName> that host/bootstrap gets by
// TLS bootstrap and renews while kip runs (bootstrap.go). When its
// renewals failed until it expired, Run stops its components as on
// SIGTERM and returns the expiry's error, so that kip exits and starts
// again from its bootstrap identity, as the kubelet does.
//
// Before the plugin starts, Run asks the API server its version, so that a
// server kip cannot reach, or one that refuses kip's credentials, is
// reported at once. The error of every start-up request says which case it
// is (apierrors.go): unreachable, naming the URL and the kubeconfig it came
// from; unauthenticated (401), naming the identity kip presented;
// forbidden (403), naming the verb, the resource and what grants it
// (deploy/rbac: kip-ca-secret.yaml for the CA Secret,
// kip-endpointslices.yaml for EndpointSlices). Other errors keep their
// text and name the request.
//
// The admin server (host/admin: metrics, probes, /cells) starts first,
// before the node's identity (the TLS bootstrap may wait minutes for its
// certificate), and serves until Run returns: its readiness says whether
// kip has its identity, whether the API server answers and whether the
// plugin does; its liveness passes while kip waits for the identity
// (admin.go). Once kip has the identity, it makes its Kubernetes clients
// (clients), each on a rate limiter of its own: the status client (pods'
// status, the Node, its Lease, the informers), the events', the readiness
// check's and the one the admin server reviews callers' tokens with
// (TokenReview, SubjectAccessReview) before it serves them /metrics or
// /cells; nothing a caller of the admin port does spends the status
// client's requests.
//
// With leaderElection.enabled (election.go, host/election), everything
// after the API server's preflight runs only while this process holds the
// node's Lease: a standby starts no plugin, holds no cells and writes
// neither the Node nor its Lease. On becoming leader it runs what a single
// kip runs, so its adoption takes over every cell the old leader left. On
// SIGTERM the leader stops its components, then releases the Lease; a
// leader that loses the Lease stops and Run returns an error (kip exits,
// to start again as a standby). The election's identity is not the node's
// (NodeRestriction): leaderElection.kubeconfig; empty, the bootstrap
// identity (bootstrap.kubeconfig) with the bootstrap on, else the pod's
// ServiceAccount; checked at start (election.CanHold).
//
// The kept logs of ended pods (cells.podLogsDir) outlive a leader
// (keptlogs.go, host/keptlogs): every process serves them on its admin
// server at /keptlogs; a leader writes where on its Node (the Node's
// annotations, through host/node), and each standby mirrors them with
// the election identity's token (or keptLogs.tokenFile) and is ready
// ("kept-logs") only once it has a copy. The mirror stops before the
// process leads.
//
// Every kubeconfig setting (kubeconfig, bootstrap.kubeconfig,
// leaderElection.kubeconfig) is loaded by host/kubeconfig's Load, whose
// errors name the key.
//
// client-go's own components (the leader election, the certificate
// manager, informers) log through klog; Run sends klog to kip's logger,
// as records with component client-go (bridgeKlog).
//
// It imports the host packages, client-go, klog and pluginapi; only
// host/cli imports it.
package daemon
