// Package volumes resolves a pod's persistent volumes into the disks the
// cloud plugin attaches to the pod's cell, as the kubelet's volume
// manager resolves them before it attaches and mounts (docs/volumes.md).
//
// Resolve reads, through a Source (the API server's objects: NewSource
// makes direct GETs), each pod volume that is a disk: a
// persistentVolumeClaim, a generic ephemeral volume (the claim
// "<pod>-<volume>", owned by the pod) or an inline in-tree
// awsElasticBlockStore, gcePersistentDisk or azureDisk volume. It checks
// what the kubelet's desired-state populator checks (the claim is bound,
// not being deleted, its PV bound back to it, the volumeMode matches the
// containers' volumeMounts or volumeDevices), translates in-tree sources
// to their CSI drivers as k8s.io/csi-translation-lib does, and answers a
// Disk per volume: the driver and handle to attach, the zones the disk is
// reachable from (the PV's node affinity, else its zone labels), and how
// to mount it (fsType, readOnly, Block, mountOptions, whether the pod's
// fsGroup applies, decided as the kubelet's CSI plugin decides). A volume
// that cannot be given to a cell is an *Error naming the pod field and a
// Reason; NFS and every volume kind that is no disk are left to others.
//
// It imports the Kubernetes API types, apimachinery and client-go, and
// nothing of host/ or cell/: host/cells calls it before it places a cell,
// attaches through the plugin and sends cell/api's PodRequest.Disks.
package volumes
