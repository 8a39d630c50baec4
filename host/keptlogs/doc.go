// Package keptlogs keeps the logs of ended pods through a rollout or a
// change of leader: each standby mirrors the leader's.
//
// When a pod ends, the leader reads each container's log from the agent
// and keeps it in cells.podLogsDir (host/cells, podLogs), one directory
// per pod, <namespace>_<name>_<uid>/<container>.log, until the pod is
// deleted; `kubectl logs` reads it there. The directory is on the pod's
// own volume (an emptyDir in the Deployment), the cell is gone with its
// pod, and the replicas run on different machines, so no volume can hold
// the logs for the next leader. Instead:
//
//   - the leader serves them on its admin port (Server, at Path: a
//     listing and each file as a stream), behind the admin server's
//     protection (host/admin's HandleProtected: TokenReview, then a
//     SubjectAccessReview of get on the non-resource URL /keptlogs or
//     /keptlogs/<pod>/<file>);
//   - it advertises where, as Annotation on the virtual Node (an
//     Advertisement: its identity in the election's Lease and its admin
//     URL);
//   - every standby runs a Mirror into its own podLogsDir: it finds the
//     leader (Leader: the Node's advertisement, if it names the Lease's
//     holder), lists its kept logs, fetches what it lacks or what changed
//     (size, mtime) through a temporary file and a rename, keeps the
//     leader's mtime (pruning removes the oldest first) and removes what
//     the leader no longer has. Once it has a copy, it asks again with
//     the listing's generation (a long poll), which the leader answers
//     as soon as host/cells tells it the kept logs changed (Changes;
//     a rescan every RescanWithChanges else), so that a log the leader
//     keeps reaches the standby at once. It authenticates
//     with a bearer token (keptLogs.tokenFile; by default the election's
//     identity, in a pod its ServiceAccount, which
//     deploy/rbac/kip-kept-logs.yaml lets get /keptlogs).
//
// A standby is ready (Mirror.Check) only once its first copy is made, so
// that a rolling update (maxSurge 1, maxUnavailable 0) takes the old
// leader away only once a new replica holds its kept logs. A leader that
// advertises nothing for a minute (a release without mirroring, or no
// admin server) does not hold a rollout forever: the standby then counts
// as ready, and says so. When the standby becomes leader its mirror stops
// (host/daemon waits for it) and it serves what it copied.
//
// The mirror trusts the leader, within bounds: it takes only names of the
// layout (ValidPodDir, ValidFile: no listing reaches outside its
// directory) and at most cells.podLogsMaxTotalBytes, the newest first.
//
// Config is the keptLogs section of kip.yaml. The package imports
// host/setting and the Kubernetes API types; host/config and host/daemon
// import it.
package keptlogs
