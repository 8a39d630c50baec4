// Package daemon is kip's composition root: it builds every host component
// from the configuration and runs them until the context ends. `kip run`
// calls Run; nothing else does.
//
// Start order matters: the cloud plugin and the cluster CA first, then the
// cache of the node's pods (synced), then the cell manager's adoption of
// cells that survived a restart, and only then virtual-kubelet's pod
// controller, which would otherwise treat surviving cells as unknown.
package daemon
