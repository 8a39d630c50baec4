package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelZone is the well-known zone label the node carries with Config.Zone.
const LabelZone = corev1.LabelTopologyZone

// driverTopology is, for each CSI driver a plugin may attach, the zone
// key of its topology (the label its node plugin reports in
// NodeGetInfo's accessible topology, which the external-provisioner
// reads from CSINode and the node's labels) and the in-tree plugin that
// migrated to it (the CSINode annotation the kubelet writes).
var driverTopology = map[string]struct{ zoneKey, inTree string }{
	"ebs.csi.aws.com":       {"topology.ebs.csi.aws.com/zone", "kubernetes.io/aws-ebs"},
	"pd.csi.storage.gke.io": {"topology.gke.io/zone", "kubernetes.io/gce-pd"},
	"disk.csi.azure.com":    {"topology.disk.csi.azure.com/zone", "kubernetes.io/azure-disk"},
	"local.csi.kipcell.io":  {"topology.local.csi.kipcell.io/zone", ""},
}

// ZoneKey is the topology key of driver's zone
// (topology.ebs.csi.aws.com/zone for ebs.csi.aws.com), "" for a driver
// whose key kip does not know.
func ZoneKey(driver string) string { return driverTopology[driver].zoneKey }

// zoneLabels are the node's labels of Config.Zone: the well-known zone
// label and the zone key of each volume driver the cells attach now;
// none without a zone. Labels outside kubernetes.io/ and k8s.io/ are
// free to a node under NodeRestriction, and topology.kubernetes.io/zone
// is on its list.
func (c Config) zoneLabels(drivers []string) map[string]string {
	if c.Zone == "" {
		return nil
	}
	out := map[string]string{LabelZone: c.Zone}
	for _, d := range drivers {
		if key := ZoneKey(d); key != "" {
			out[key] = c.Zone
		}
	}
	return out
}

// csiNodeObject is the CSINode of the node n, as the kubelet's CSI
// plugin registration writes it (pkg/volume/csi/nodeinfomanager): named
// and owned by the Node, a driver entry per volume driver the cells
// attach now (drivers) with the node
// ID (the node's name: kip attaches, no node plugin answers NodeGetInfo)
// and, with a zone, the driver's zone key as its topology keys; no
// allocatable count (the plugin's AttachVolume answers attachment-limit).
// The migrated-plugins annotation lists the in-tree plugins whose
// volumes kip translates to those drivers.
func csiNodeObject(c Config, drivers []string, n *corev1.Node) *storagev1.CSINode {
	obj := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name:            c.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	var migrated []string
	for _, d := range drivers {
		driver := storagev1.CSINodeDriver{Name: d, NodeID: c.Name}
		if key := ZoneKey(d); key != "" && c.Zone != "" {
			driver.TopologyKeys = []string{key}
		}
		obj.Spec.Drivers = append(obj.Spec.Drivers, driver)
		if p := driverTopology[d].inTree; p != "" {
			migrated = append(migrated, p)
		}
	}
	if len(migrated) > 0 {
		slices.Sort(migrated)
		obj.Annotations = map[string]string{corev1.MigratedPluginsAnnotationKey: strings.Join(migrated, ",")}
	}
	return obj
}

// ensureCSINode creates the node's CSINode, or updates it to what
// csiNodeObject says of the drivers the cells attach now (its spec, owner and annotation; other annotations
// and labels stay). The Node must exist: the CSINode is owned by it, so
// that the garbage collector deletes it with the Node. The Node
// authorizer lets a node get, create and update the CSINode of its own
// name, and NodeRestriction no other.
func (n *Node) ensureCSINode(ctx context.Context) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the Node: %w", err)
	}
	drivers := n.provider.state().drivers
	want := csiNodeObject(n.cfg, drivers, node)
	csinodes := n.client.StorageV1().CSINodes()
	cur, err := csinodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := csinodes.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the CSINode: %w", err)
		}
		n.log.Info("CSINode created", "drivers", drivers, "zone", n.cfg.Zone)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the CSINode: %w", err)
	}
	wantMigrated, curMigrated := want.Annotations[corev1.MigratedPluginsAnnotationKey], cur.Annotations[corev1.MigratedPluginsAnnotationKey]
	if equality.Semantic.DeepEqual(cur.Spec, want.Spec) && equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) && curMigrated == wantMigrated {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Spec, upd.OwnerReferences = want.Spec, want.OwnerReferences
	upd.Annotations = maps.Clone(cur.Annotations)
	if wantMigrated == "" {
		delete(upd.Annotations, corev1.MigratedPluginsAnnotationKey)
	} else {
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[corev1.MigratedPluginsAnnotationKey] = wantMigrated
	}
	if _, err := csinodes.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the CSINode: %w", err)
	}
	n.log.Info("CSINode updated", "drivers", drivers, "zone", n.cfg.Zone)
	return nil
}

// runCSINode writes the CSINode (keepCSINode) and again each time
// csiNodeKick asks (the Node registered anew, the volume drivers
// changed), until ctx ends.
func (n *Node) runCSINode(ctx context.Context) {
	for {
		n.keepCSINode(ctx)
		select {
		case <-ctx.Done():
			return
		case <-n.csiNodeKick:
		}
	}
}

// csiNodeRetry bounds the wait between two attempts of keepCSINode.
const (
	csiNodeRetryFirst = time.Second
	csiNodeRetryMax   = time.Minute
)

// keepCSINode writes the CSINode until it succeeds or ctx ends, waiting
// from a second up to a minute between attempts, as the kubelet retries
// its CSINode at start-up: a failure is logged, never fatal to the node
// (its pods without volumes run regardless).
func (n *Node) keepCSINode(ctx context.Context) {
	wait := csiNodeRetryFirst
	for {
		err := n.ensureCSINode(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		n.log.Warn("writing the node's CSINode failed; retrying", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, csiNodeRetryMax)
	}
}
