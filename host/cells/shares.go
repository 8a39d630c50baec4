package cells

import (
	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/volumes"
)

// This file gives the agent the pod's NFS shares of its claims (a PV of
// spec.nfs or of an NFS CSI driver): nothing is attached, the agent
// mounts them itself. They are resolved with the disks, each claim read
// once (resolveDisks: volumes.ResolveAll), so a claim not bound keeps the
// pod Pending with the same event.

// keepShares keeps the NFS shares of the pod's claims for the agent.
func (c *cell) keepShares(shares []volumes.Share) {
	var m map[string]cellapi.Share
	for _, s := range shares {
		if m == nil {
			m = make(map[string]cellapi.Share, len(shares))
		}
		m[s.Volume] = cellapi.Share{Server: s.Server, Path: s.Path, ReadOnly: s.ReadOnly, MountOptions: s.MountOptions}
	}
	c.mu.Lock()
	c.shares = m
	c.mu.Unlock()
}

// cellShares is what the agent gets of the pod's NFS shares.
func (c *cell) cellShares() map[string]cellapi.Share {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shares
}
