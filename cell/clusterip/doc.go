// Package clusterip makes the cluster's ClusterIP Services reachable from
// the cell: it keeps the table of services the host sends (ApplyServices
// in cell/api) and programs it into the pod's network namespace as
// iptables DNAT rules, as kube-proxy's iptables mode does on a node.
//
// A Proxy holds the table: the host's table ID, its revision and the
// services. Apply takes a whole table or a delta against the revision the
// Proxy has (ErrBaseMismatch otherwise, and the host sends the whole
// table), hands the resulting services to a Programmer, and keeps them
// only once the Programmer succeeded, so a failed attempt leaves the old
// table and rules in place for the host to retry.
//
// IPTables is the Programmer of a real cell. For every Service port with
// ready endpoints, the nat table's KIP-SERVICES chain, jumped to from
// OUTPUT (a pod is the client in its own network namespace: its traffic
// is locally generated), sends ClusterIP:port to a KIP-SVC-… chain that
// picks an endpoint with `statistic --mode random` (endpoint i of n with
// probability 1/(n-i)), whose KIP-SEP-… chain DNATs to the endpoint's IP
// and target port. sessionAffinity ClientIP adds a `recent` check per
// endpoint before the random pick and a `recent --set` in the endpoint's
// chain, with the Service's timeout. A port without ready endpoints gets
// a REJECT in the filter table's KIP-SERVICES chain (also jumped to from
// OUTPUT), so a client is refused at once rather than left to time out.
// A pod that is a backend of a Service it calls reaches itself: the DNAT
// to its own address is delivered locally.
//
// Each sync is one iptables-restore --noflush run: it rewrites the
// KIP-SERVICES chains and only the Service chains whose rules changed,
// and deletes the chains no longer wanted, so that an endpoint change in
// a table of a thousand Services costs tens of milliseconds, not the
// second a full rewrite takes. The first sync (and any after a failure)
// reads the namespace's chains with iptables-save, so that chains left by
// an earlier agent are replaced or removed. Chains and rules outside the
// KIP- prefix are never touched. Only IPv4 is programmed; TCP and UDP are,
// SCTP is not (the host leaves it out).
//
// Why iptables rather than a proxy in the agent: DNAT in the kernel keeps
// the client's source address (the pod IP) for the backend, carries UDP
// without a user-space session table, adds no copy or hop to the data
// path, and costs the agent nothing while traffic flows; iptables is
// already on every cell (hack/install-deps.sh, deploy/aws's boot recipe)
// and the rules are kube-proxy's, which operators know how to read
// (iptables-save in the cell's namespace). nftables would scale better
// past thousands of Services (maps instead of rule lists) but needs the
// nft command, which the cell image does not carry.
//
// It imports the standard library only.
package clusterip
