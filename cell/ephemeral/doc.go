// Package ephemeral holds a pod to its local ephemeral storage limits on
// its cell, as the kubelet's eviction manager does (localStorageEviction,
// pkg/kubelet/eviction of v1.36): every Interval (the kubelet's
// housekeeping, 10 s) Watch measures what the pod keeps on the cell's
// disk and evicts it, through Pod.Evict, the first time
//
//  1. an emptyDir volume holds more than its sizeLimit: "Usage of
//     EmptyDir volume %q exceeds the limit %q. ";
//  2. the pod holds more than its containers' ephemeral-storage limits
//     together (PodLimits of component-helpers: the regular containers'
//     and sidecars' sum, or an init container's with the sidecars
//     started before it, whichever is more, plus the pod's overhead;
//     containers without a limit add nothing): "Pod ephemeral local
//     storage usage exceeds the total limit of containers %s. ";
//  3. a container holds more than its own limit: "Container %s exceeded
//     its local ephemeral storage limit %q. ".
//
// What a container holds is its writable layer (while it runs) and its
// logs, every attempt's and every rotated file: so a pod's output counts
// against its storage, not against the memory of the agent that writes
// it. What the pod holds adds its local ephemeral volumes (emptyDir on
// disk, configMap; the kubelet's IsLocalEphemeralVolume) and its /etc
// files (hosts, resolv.conf). Sizes are what the files occupy (allocated
// blocks, each inode once, without crossing into another filesystem),
// as the kubelet's du-based measure counts them.
//
// An eviction is the pod's end: Failed, reason Evicted and the message,
// a Warning event Evicted, its containers stopped within a second and not
// restarted (cell/pod's Evict). A pod without limits is not measured.
package ephemeral
