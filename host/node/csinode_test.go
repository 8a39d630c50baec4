package node

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestZoneLabels(t *testing.T) {
	tests := []struct {
		name    string
		zone    string
		drivers []string
		want    map[string]string
	}{
		{name: "no zone, no labels", drivers: []string{"ebs.csi.aws.com"}},
		{name: "a zone without drivers", zone: "us-east-1a", want: map[string]string{"topology.kubernetes.io/zone": "us-east-1a"}},
		{
			name: "each known driver's key", zone: "z1",
			drivers: []string{"ebs.csi.aws.com", "pd.csi.storage.gke.io", "disk.csi.azure.com", "local.csi.kipcell.io", "example.com/unknown"},
			want: map[string]string{
				"topology.kubernetes.io/zone":        "z1",
				"topology.ebs.csi.aws.com/zone":      "z1",
				"topology.gke.io/zone":               "z1",
				"topology.disk.csi.azure.com/zone":   "z1",
				"topology.local.csi.kipcell.io/zone": "z1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("kip")
			cfg.Zone = tt.zone
			n := nodeObject(cfg, "10.0.0.7", 1, nodeState{drivers: tt.drivers}, metav1.Now().Time)
			got := map[string]string{}
			for k, v := range n.Labels {
				if k == LabelZone || ZoneKey(driverOfKey(k)) == k {
					got[k] = v
				}
			}
			want := tt.want
			if want == nil {
				want = map[string]string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("zone labels (-want +got):\n%s", diff)
			}
		})
	}
}

// driverOfKey is the driver whose zone key is key, "" for none.
func driverOfKey(key string) string {
	for d, topo := range driverTopology {
		if topo.zoneKey == key {
			return d
		}
	}
	return ""
}

func TestCSINodeObject(t *testing.T) {
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "kip", UID: "node-uid"}}
	tests := []struct {
		name    string
		zone    string
		drivers []string
		want    *storagev1.CSINode
	}{
		{
			name: "no driver",
			want: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "kip", OwnerReferences: owner}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}}},
		},
		{
			name: "drivers without a zone: no topology", drivers: []string{"ebs.csi.aws.com"},
			want: &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: "kip", OwnerReferences: owner, Annotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"}},
				Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "kip"}}},
			},
		},
		{
			name: "a zone: each known driver's key", zone: "europe-west1-b", drivers: []string{"pd.csi.storage.gke.io", "local.csi.kipcell.io", "example.com/unknown", "disk.csi.azure.com"},
			want: &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: "kip", OwnerReferences: owner, Annotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/azure-disk,kubernetes.io/gce-pd"}},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
					{Name: "pd.csi.storage.gke.io", NodeID: "kip", TopologyKeys: []string{"topology.gke.io/zone"}},
					{Name: "local.csi.kipcell.io", NodeID: "kip", TopologyKeys: []string{"topology.local.csi.kipcell.io/zone"}},
					{Name: "example.com/unknown", NodeID: "kip"},
					{Name: "disk.csi.azure.com", NodeID: "kip", TopologyKeys: []string{"topology.disk.csi.azure.com/zone"}},
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("kip")
			cfg.Zone = tt.zone
			got := csiNodeObject(cfg, tt.drivers, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kip", UID: "node-uid"}})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CSINode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnsureCSINode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kip", UID: "node-uid"}}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "kip", UID: "node-uid"}}
	want := storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "kip", TopologyKeys: []string{"topology.ebs.csi.aws.com/zone"}}}}
	migrated := "kubernetes.io/aws-ebs"
	tests := []struct {
		name string
		objs []runtime.Object
		// wantVerb is the CSINode write expected ("" for none);
		// wantAnnotations the CSINode's annotations after.
		wantVerb        string
		wantAnnotations map[string]string
		wantErr         bool
	}{
		{name: "none yet: created", objs: []runtime.Object{node}, wantVerb: "create", wantAnnotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": migrated}},
		{
			name: "stale: updated, other annotations kept",
			objs: []runtime.Object{node, &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: "kip", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "kip", UID: "old-uid"}},
					Annotations: map[string]string{"example.com/note": "kept", "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd"}},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "pd.csi.storage.gke.io", NodeID: "kip"}}},
			}},
			wantVerb:        "update",
			wantAnnotations: map[string]string{"example.com/note": "kept", "storage.alpha.kubernetes.io/migrated-plugins": migrated},
		},
		{
			name: "a new Node's UID: the owner updated",
			objs: []runtime.Object{node, &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: "kip", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "kip", UID: "old-uid"}},
					Annotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": migrated}},
				Spec: want,
			}},
			wantVerb:        "update",
			wantAnnotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": migrated},
		},
		{
			name: "as wanted: no write",
			objs: []runtime.Object{node, &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: "kip", OwnerReferences: owner, Annotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": migrated}},
				Spec:       want,
			}},
			wantAnnotations: map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": migrated},
		},
		{name: "no Node yet: an error, nothing written", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objs...)
			cfg := DefaultConfig("kip")
			cfg.Zone = "us-east-1a"
			n := &Node{client: client, cfg: cfg, log: slog.New(slog.DiscardHandler), provider: &nodeProvider{volDrivers: []string{"ebs.csi.aws.com"}}}
			client.ClearActions()
			err := n.ensureCSINode(t.Context())
			if (err != nil) != tt.wantErr {
				t.Fatalf("ensureCSINode = %v, want error %v", err, tt.wantErr)
			}
			var verbs []string
			for _, a := range client.Actions() {
				if a.GetResource().Resource == "csinodes" && a.GetVerb() != "get" {
					verbs = append(verbs, a.GetVerb())
				}
			}
			var wantVerbs []string
			if tt.wantVerb != "" {
				wantVerbs = []string{tt.wantVerb}
			}
			if diff := cmp.Diff(wantVerbs, verbs); diff != "" {
				t.Errorf("CSINode writes (-want +got):\n%s", diff)
			}
			if tt.wantErr {
				return
			}
			got, err := client.StorageV1().CSINodes().Get(t.Context(), "kip", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got.Spec); diff != "" {
				t.Errorf("CSINode spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(owner, got.OwnerReferences); diff != "" {
				t.Errorf("CSINode owner (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnnotations, got.Annotations); diff != "" {
				t.Errorf("CSINode annotations (-want +got):\n%s", diff)
			}
		})
	}
}
