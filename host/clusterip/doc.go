// Package clusterip is the host's half of making ClusterIP Services
// reachable from every cell: it watches Services and EndpointSlices once
// for the whole node (no cell ever talks to the API server) and keeps one
// Table of what cells program, which Sync streams to each cell's agent
// (ApplyServices in cell/api; the agent's half is cell/clusterip).
//
// # The table
//
// Each Service with something to program becomes one cellapi.Service: its
// IPv4 ClusterIPs (ClusterIP, NodePort and LoadBalancer Services alike;
// headless and ExternalName Services have none), and per TCP or UDP port
// the ready endpoints of its EndpointSlices (Ready unset counts as ready,
// as the API says) with the target port the slice resolved, so that a
// named targetPort reaches each pod on its own number. sessionAffinity
// ClientIP carries its timeout (10800 s by default). An SCTP port is left
// out, with one warning event on the Service. internalTrafficPolicy
// Local keeps the endpoints on this node, which is every cell's node.
//
// Every change to a Service's entry is a new revision of the table; an
// event that changes nothing a cell programs (a resync, a status update)
// is not. The table has an ID, random per host process, so that an agent
// never applies a delta of one host's table to another's.
//
// # Streaming to cells
//
// Sync runs for as long as a cell is served. It waits for the table's
// first sync, sends the whole table, and then, whenever the table moves,
// the delta from the revision the agent last acknowledged to the current
// one: the Services changed since, whole, and the keys of those gone.
// Changes that come while a call is under way are coalesced into the
// next, so a slow cell gets fewer, larger deltas and never a backlog. A
// delta the agent refuses (FailedPrecondition: it restarted, or has
// another table) is followed by the whole table; an agent that programs
// no services (Unimplemented) is left alone; any other failure is retried
// with back-off. Deletions are remembered as tombstones so that deltas
// can carry them; past maxTombstones they are dropped, and a cell whose
// revision is older than that gets the whole table.
//
// The informers are handed in (New takes the Service and EndpointSlice
// informers of a SharedInformerFactory the daemon starts), so that other
// host components that need Services share the same watch.
//
// It imports cell/api and client-go; never host/cells, whose
// cells call Sync.
package clusterip
