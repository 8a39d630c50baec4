package main

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/localprov"
)

func TestDeleteNotes(t *testing.T) {
	notes := map[string]string{"app": "notes"}
	objects := func() []runtime.Object {
		return []runtime.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "notes", Namespace: "default", Labels: notes}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "notes", Namespace: "default", Labels: notes}},
			&corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data-notes-0", Namespace: "default", Labels: notes},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1"},
			},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}},
			// Not the example's: left alone.
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}},
		}
	}
	tests := []struct {
		name string
		objs []runtime.Object
		// provisioner: the claim's deletion deletes its volume, as
		// kip-local-provisioner does under reclaimPolicy Delete.
		provisioner bool
		wantErr     string
	}{
		{name: "the volumes go with their claims", objs: objects(), provisioner: true},
		{name: "a volume that stays is waited for, then reported", objs: objects(), wantErr: "waiting for the notes volumes to go: 1 left"},
		{name: "no example: nothing to do", objs: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objs...)
			if tt.provisioner {
				client.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
					_ = client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("persistentvolumes"), "", "pvc-1")
					return false, nil, nil
				})
			}
			err := deleteNotes(t.Context(), client, time.Second)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("deleteNotes: %v, want error %q", err, tt.wantErr)
			}
			ctx := t.Context()
			if _, err := client.AppsV1().StatefulSets("default").Get(ctx, "notes", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("StatefulSet notes: %v, want it deleted", err)
			}
			if _, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-notes-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("claim data-notes-0: %v, want it deleted", err)
			}
			if tt.objs != nil {
				if _, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "other", metav1.GetOptions{}); err != nil {
					t.Errorf("claim other: %v, want it left alone", err)
				}
			}
		})
	}
}

// The demo's provisioner reads a selected node's zone under the key kip
// writes into its node's labels and CSINode for the local driver: were
// they two keys, no claim of kip-local would ever be provisioned.
func TestProvisionerZoneKeyIsKips(t *testing.T) {
	if got, want := localprov.ZoneKey, node.ZoneKey(localprov.Driver); got != want {
		t.Errorf("kip-local-provisioner's zone key %q, kip's for %s %q", got, localprov.Driver, want)
	}
}

// TestVolumeSupport: kip-demo applies the StatefulSet example only when
// the Kip node's CSINode lists the local plugin's driver, as a kubelet's
// lists a CSI driver it attaches volumes of.
func TestVolumeSupport(t *testing.T) {
	csiNode := func(name string, drivers ...string) *storagev1.CSINode {
		n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, d := range drivers {
			n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: name})
		}
		return n
	}
	tests := []struct {
		name string
		objs []runtime.Object
		want bool
	}{
		{name: "the driver listed", objs: []runtime.Object{csiNode("kip", "other.csi.example", localprov.Driver)}, want: true},
		{name: "another driver only", objs: []runtime.Object{csiNode("kip", "other.csi.example")}},
		{name: "the driver on another node", objs: []runtime.Object{csiNode("kip-infra", localprov.Driver)}},
		{name: "no CSINode", objs: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objs...)
			if got := volumeSupport(t.Context(), client, "kip", 300*time.Millisecond); got != tt.want {
				t.Errorf("volumeSupport = %v, want %v", got, tt.want)
			}
		})
	}
}
