// Package election is kip's leader election: two or more kip processes for
// one virtual node (a Deployment with two replicas) agree on one leader
// through a coordination.k8s.io/v1 Lease, by default kip-system/kip-<node>,
// with client-go's leaderelection. Only the leader runs what touches cells,
// the Node or its Lease, and the cloud plugin; a standby waits for the
// Lease and holds nothing.
//
// Run blocks: it waits for the Lease, calls lead with a context that ends
// when the leadership does, and returns
//
//   - nil when its context ends (SIGTERM): lead returns first, then the
//     Lease is released (ReleaseOnCancel), so that a standby takes over at
//     its next try instead of waiting for the Lease to expire;
//   - an error wrapping ErrLostLease when the Lease was lost while leading
//     (renewals failed for renewDeadline, or another holder took it): the
//     process must end, and start again as a standby;
//   - lead's error otherwise, after the release.
//
// CanHold, before Run, says whether the identity may hold the Lease, in an
// error that names what grants it (deploy/rbac/kip-leader-election.yaml).
// A node identity (system:node:<name>) never may: NodeRestriction admits a
// node's Leases only in kube-node-lease and named after the node, so the
// election uses another identity (leaderElection.kubeconfig; empty, the
// bootstrap identity with the bootstrap on, else the pod's ServiceAccount).
//
// Takeover time: after a kill -9, a standby takes the Lease when it has
// seen it unchanged for leaseDuration, at its next try (every retryPeriod
// to retryPeriod×2.2, client-go's jitter). The defaults (9s, 6s, 1s) bound
// that to leaseDuration + 2×2.2×retryPeriod = 13.4s after the kill; the
// 10s/7s/2s of many controllers would exceed 15s in about one kill in
// twenty.
//
// Config is the leaderElection section of kip.yaml. The package imports
// client-go and host/setting; only host/daemon (and host/config, for
// Config) imports it.
package election
