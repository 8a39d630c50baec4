// Package share holds what the host and the cell agent both decide about a
// pod's NFS shares: which servers a pod may have its cell mount. The agent
// mounts a share from the instance's network namespace, not the pod's,
// so a server the pod names must not be one that only the instance
// reaches: the instance itself (loopback, its own addresses), link-local
// addresses (the clouds' instance metadata at 169.254.169.254 among
// them) or Azure's WireServer. The host refuses a pod whose inline nfs
// volume names such an address before its cell is launched; the agent
// checks every address a server's name resolves to before it mounts.
//
// It imports no Kip package.
package share
