// Package localprov is the dynamic provisioner of the local plugin's disks
// (issue 31): for a PersistentVolumeClaim of a StorageClass whose
// provisioner is local.csi.kipcell.io (kip-local, deploy/examples), it
// makes a disk with local.CreateVolume in the local plugin's state
// directory and the PersistentVolume that names it; when such a volume is
// released under reclaimPolicy Delete, it deletes the disk
// (local.DeleteVolume) and the volume. kip's host attaches the disk to the
// pod's cell; this package only makes and unmakes it.
//
// It behaves as the external-provisioner (kubernetes-csi/external-provisioner
// over sig-storage-lib-external-provisioner's controller) does for a CSI
// driver, so that a claim, its events and its volume look the same as a
// cloud's:
//
//   - a claim is provisioned once the PV controller annotated it
//     volume.kubernetes.io/storage-provisioner (or the beta annotation)
//     with the driver, it names no volume yet, and, for a
//     WaitForFirstConsumer class, once the scheduler chose a node
//     (volume.kubernetes.io/selected-node);
//   - the volume is named pvc-<claim UID>, annotated
//     pv.kubernetes.io/provisioned-by, bound to the claim through its
//     claimRef (the PV controller completes the binding), and holds the
//     finalizer external-provisioner.volume.kubernetes.io/finalizer while
//     its reclaim policy is Delete, so that the disk is never left behind
//     by a volume deleted by hand;
//   - the claim gets the events Provisioning, then ProvisioningSucceeded or
//     ProvisioningFailed with the reason; a failed deletion is a
//     VolumeFailedDelete event on the volume; a selected node that cannot
//     have the disk (gone, or in another zone) has its selected-node
//     annotation removed, so that the scheduler chooses again.
//
// Topology: a local disk lies in the local plugin's zone. The volume's node
// affinity is topology.local.csi.kipcell.io/zone In [zone]; a WaitForFirstConsumer
// claim's selected node must run the driver (its CSINode lists
// local.csi.kipcell.io with the zone key, which kip writes for its node
// when node.zone is set) and carry that zone's label.
//
// It imports plugins/local (the disks) and client-go; it lives in the root
// module because a plugin's module links no Kubernetes (hack/depcheck.sh).
// cmd/kip-local-provisioner runs it.
package localprov
