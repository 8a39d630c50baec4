// Package snapshot is a plugin's shared, coalesced picture of its cluster's
// instances: one paginated listing of the cloud (by the cluster's tag or
// label) serves every Describe, List and WatchEvents of its age, however
// many callers ask, and the plugin's own changes (instances it launched or
// terminated since) overlay it. The aws, gce and azure plugins answer
// Describe and List from a View; a third party's plugin may do the same to
// keep its cloud calls per pod low (List and Describe answer them from a
// view, Describe asking the cloud only for IDs not in it). View.Poll is an event watcher's loop
// over the view (WatchEvents): a poll, what changed sent, a sleep cut short
// by the plugin's next launch, with Timings.Next's intervals that follow a
// boot; the three clouds' watchers are built on it. Deletions remembers
// which instances the plugin deleted itself, so that its event watch tells
// them from those the cloud reclaimed.
//
// The package imports only the standard library.
package snapshot
