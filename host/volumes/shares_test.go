package volumes

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func csiShare(driver, handle string, attrs map[string]string) func(*corev1.PersistentVolume) {
	return withSource(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle, VolumeAttributes: attrs}})
}

// TestResolveShares: ResolveAll's shares: claims bound to NFS PVs become shares (and no disk);
// the NFS CSI drivers' attributes are read as their node plugins read
// them; what a cell cannot mount is refused naming the field.
func TestResolveShares(t *testing.T) {
	nfsPV := func(mods ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		return ebsPV("pv-1", append([]func(*corev1.PersistentVolume){noAffinity,
			withSource(corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.5", Path: "/srv/share"}})}, mods...)...)
	}
	share := func(mods ...func(*Share)) []Share {
		s := Share{Volume: "data", Claim: "data", PV: "pv-1", Server: "10.0.0.5", Path: "/srv/share"}
		for _, m := range mods {
			m(&s)
		}
		return []Share{s}
	}
	runShares(t, []shareCase{
		{
			name: "spec.nfs",
			objs: []runtime.Object{claim("data", "pv-1"), nfsPV(func(pv *corev1.PersistentVolume) { pv.Spec.MountOptions = []string{"nfsvers=3", "port=2049"} })},
			pod:  pod(pvcVol(false)),
			want: share(func(s *Share) { s.MountOptions = []string{"nfsvers=3", "port=2049"} }),
		},
		{
			name: "the claim volume's readOnly",
			objs: []runtime.Object{claim("data", "pv-1"), nfsPV()},
			pod:  pod(pvcVol(true)),
			want: share(func(s *Share) { s.ReadOnly = true }),
		},
		{
			name: "the PV's readOnly",
			objs: []runtime.Object{claim("data", "pv-1"), nfsPV(func(pv *corev1.PersistentVolume) { pv.Spec.NFS.ReadOnly = true })},
			pod:  pod(pvcVol(false)),
			want: share(func(s *Share) { s.ReadOnly = true }),
		},
		{
			name: "csi-driver-nfs with a subdir, attributes in any case",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity,
				csiShare(DriverNFS, "10.0.0.5#srv/share#pvc-1##", map[string]string{"server": "nfs.example.com", "Share": "/srv/share", "subDir": "pvc-1"}))},
			pod:  pod(pvcVol(false)),
			want: share(func(s *Share) { s.Server, s.Path = "nfs.example.com", "/srv/share/pvc-1" }),
		},
		{
			name: "Filestore",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity,
				csiShare(DriverFilestore, "modeInstance/us-central1-a/fs-1/vol1", map[string]string{"ip": "10.9.8.7", "volume": "vol1"}))},
			pod:  pod(pvcVol(false)),
			want: share(func(s *Share) { s.Server, s.Path = "10.9.8.7", "/vol1" }),
		},
		{
			name: "Azure Files over NFS: the account's endpoint, NFS 4.1",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity,
				csiShare(DriverAzureFile, "rg#acct#share1###ns", map[string]string{"protocol": "nfs"}))},
			pod: pod(pvcVol(false)),
			want: share(func(s *Share) {
				s.Server, s.Path, s.MountOptions = "acct.file.core.windows.net", "/acct/share1", []string{"vers=4.1"}
			}),
		},
		{
			name: "an ephemeral volume's claim",
			objs: []runtime.Object{nfsPV(), claim("web-data", "pv-1", func(c *corev1.PersistentVolumeClaim) {
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: podUID, Controller: ptr.To(true)}}
			})},
			pod:  pod(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
			want: share(func(s *Share) { s.Claim = "web-data" }),
		},
		{
			name: "a disk's claim is no share",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod:  pod(pvcVol(false)),
		},
		{
			name:    "Azure Files over SMB",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, csiShare(DriverAzureFile, "rg#acct#share1", map[string]string{"protocol": "smb"}))},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "over SMB"},
		},
		{
			name:    "EFS",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, csiShare(DriverEFS, "fs-0123:/data", nil))},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "fs-0123.efs.<region>.amazonaws.com"},
		},
		{
			name:    "csi-driver-nfs without a server",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, csiShare(DriverNFS, "h", map[string]string{"share": "/x"}))},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "names no server"},
		},
		{
			name:    "a claim not bound",
			objs:    []runtime.Object{claim("data", "", func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimPending })},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotBound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "PVC is not bound"},
		},
	})
}

// shareCase is one case of TestResolveShares.
type shareCase struct {
	name    string
	objs    []runtime.Object
	pod     *corev1.Pod
	want    []Share
	wantErr *Error
}

func runShares(t *testing.T, tests []shareCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := NewSource(fake.NewClientset(tt.objs...))
			disks, got, err := ResolveAll(t.Context(), src, tt.pod, allDrivers)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ResolveAll: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ResolveAll's shares (-want +got):\n%s", diff)
				}
				if len(tt.want) > 0 && len(disks) > 0 {
					t.Errorf("ResolveAll's disks = %v; want no disk for a share", disks)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ResolveAll = %v, %v; want an *Error %s", got, err, tt.wantErr.Reason)
			}
			if e.Reason != tt.wantErr.Reason || e.Field != tt.wantErr.Field || e.Volume != "data" || !strings.Contains(e.Message, tt.wantErr.Message) {
				t.Errorf("ResolveAll error = %+v, want reason %s, field %s, a message with %q", e, tt.wantErr.Reason, tt.wantErr.Field, tt.wantErr.Message)
			}
		})
	}
}
