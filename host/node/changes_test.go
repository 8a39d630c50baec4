package node_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/host/node/nodetest"
)

// changingPods is a Pods whose disks and volume drivers the test changes,
// telling the node as the cell manager does (NodeChangeNotifier).
type changingPods struct {
	*nodetest.Pods
	mu       sync.Mutex
	attached []corev1.AttachedVolume
	drivers  []string
	changed  func()
}

func (p *changingPods) Volumes() ([]corev1.AttachedVolume, []corev1.UniqueVolumeName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var inUse []corev1.UniqueVolumeName
	for _, a := range p.attached {
		inUse = append(inUse, a.Name)
	}
	return slices.Clone(p.attached), inUse
}

func (p *changingPods) VolumeDrivers(context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.drivers), nil
}

func (p *changingPods) NotifyNodeChanges(changed func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changed = changed
}

// change changes what the Pods answer and says so, as a cell does once a
// disk is attached or the plugin was swapped.
func (p *changingPods) change(f func(p *changingPods)) {
	p.mu.Lock()
	f(p)
	changed := p.changed
	p.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// runNode runs a node of pods against client until the test ends, with a
// status interval long enough that only a change said updates the Node.
func runNode(t *testing.T, client *fake.Clientset, pods node.Pods, cfg node.Config) {
	t.Helper()
	cfg.InternalIP, cfg.ListenAddress = "127.0.0.1", "127.0.0.1:0"
	cfg.StatusUpdateInterval = time.Hour
	n, err := node.New(client, pods, cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	go func() { _ = n.Run(ctx) }()
	t.Cleanup(func() {
		<-n.Done()
		if err := n.Err(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := n.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

// A disk attached to a cell is in the Node's volumesAttached and
// volumesInUse soon after, not at the next status interval (an hour
// here), and gone soon after it is detached.
func TestNodeStatusFollowsAttachAndDetach(t *testing.T) {
	client := fake.NewClientset()
	pods := &changingPods{Pods: nodetest.New()}
	runNode(t, client, pods, node.DefaultConfig("kip-vol"))

	name := corev1.UniqueVolumeName("kubernetes.io/csi/ebs.csi.aws.com^vol-1")
	nodeVolumes := func(ctx context.Context) (*corev1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, "kip-vol", metav1.GetOptions{})
	}
	pods.change(func(p *changingPods) {
		p.attached = []corev1.AttachedVolume{{Name: name, DevicePath: "/dev/xvdaa"}}
	})
	waitFor(t, "the disk in the Node's status", func(ctx context.Context) (bool, error) {
		n, err := nodeVolumes(ctx)
		return err == nil && cmp.Equal(n.Status.VolumesAttached, []corev1.AttachedVolume{{Name: name, DevicePath: "/dev/xvdaa"}}) &&
			cmp.Equal(n.Status.VolumesInUse, []corev1.UniqueVolumeName{name}), err
	})
	pods.change(func(p *changingPods) { p.attached = nil })
	waitFor(t, "the disk gone from the Node's status", func(ctx context.Context) (bool, error) {
		n, err := nodeVolumes(ctx)
		return err == nil && len(n.Status.VolumesAttached) == 0 && len(n.Status.VolumesInUse) == 0, err
	})
}

// When the plugin's volume drivers change (a plugin swapped on SIGHUP),
// the Node's driver zone labels and its CSINode follow: the dropped
// driver's label and entry go, the new one's come.
func TestZoneLabelsAndCSINodeFollowTheDrivers(t *testing.T) {
	client := fake.NewClientset()
	pods := &changingPods{Pods: nodetest.New(), drivers: []string{"ebs.csi.aws.com"}}
	cfg := node.DefaultConfig("kip-drv")
	cfg.Zone, cfg.VolumeDrivers = "z1", []string{"ebs.csi.aws.com"}
	runNode(t, client, pods, cfg)

	labelled := func(want ...string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, "kip-drv", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			var got []string
			for _, key := range []string{"topology.ebs.csi.aws.com/zone", "topology.gke.io/zone"} {
				if n.Labels[key] == "z1" {
					got = append(got, key)
				}
			}
			return slices.Equal(got, want) && n.Labels["topology.kubernetes.io/zone"] == "z1", nil
		}
	}
	csiDrivers := func(want ...string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			c, err := client.StorageV1().CSINodes().Get(ctx, "kip-drv", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			var got []string
			for _, d := range c.Spec.Drivers {
				got = append(got, d.Name)
			}
			return slices.Equal(got, want), nil
		}
	}
	waitFor(t, "the EBS zone label", labelled("topology.ebs.csi.aws.com/zone"))
	waitFor(t, "the CSINode with EBS", csiDrivers("ebs.csi.aws.com"))

	pods.change(func(p *changingPods) { p.drivers = []string{"pd.csi.storage.gke.io"} })
	waitFor(t, "the PD zone label alone", labelled("topology.gke.io/zone"))
	waitFor(t, "the CSINode with PD alone", csiDrivers("pd.csi.storage.gke.io"))
	c, err := client.StorageV1().CSINodes().Get(t.Context(), "kip-drv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []storagev1.CSINodeDriver{{Name: "pd.csi.storage.gke.io", NodeID: "kip-drv", TopologyKeys: []string{"topology.gke.io/zone"}}}
	if diff := cmp.Diff(want, c.Spec.Drivers); diff != "" {
		t.Errorf("CSINode drivers (-want +got):\n%s", diff)
	}
	if got := c.Annotations[corev1.MigratedPluginsAnnotationKey]; got != "kubernetes.io/gce-pd" {
		t.Errorf("migrated-plugins annotation %q, want kubernetes.io/gce-pd", got)
	}
}
