//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/pluginapi"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	"github.com/kipcell/kip/test/e2e/framework"
)

// gceLabelPodUID is the label the gce plugin puts a cell's pod UID in
// (plugins/gce/doc.go); a pod UID is a valid GCE label value as it is.
// The azure plugin's tag of it has the same name (plugins/azure/doc.go).
const (
	gceLabelPodUID = "kip-pod-uid"
	azureTagPodUID = "kip-pod-uid"
)

// simInstance is an instance of the EC2, Compute Engine or ARM
// simulator, as the tests that run against any of them compare them.
type simInstance struct {
	// ID is EC2's instance ID, GCE's zone/name (the gce plugin's
	// instance ID), or the Azure VM's name (the azure plugin's).
	ID string
	// Cell is the cell ID it runs (EC2's kip-cell tag, GCE's instance
	// name, Azure's VM name); LocalCell the name of its local cell's
	// directory in kip.StateDir (EC2's instance ID, GCE's instance name,
	// Azure's VM name).
	Cell, LocalCell string
	Type            string
	// Ended is true from the instance's shutdown on (EC2's shutting-down,
	// GCE's STOPPING, Azure's Deleting or Failed), Terminated once it is
	// terminated (or gone).
	Running, Ended, Terminated bool
	Launched                   time.Time
	// UserData is what the instance was given to boot with: EC2's user
	// data, GCE's kip-bootstrap metadata item (the startup script beside
	// it is deploy/gce/startup.sh, the same for every cell), Azure's
	// userData (beside customData, deploy/azure/cloud-init.yaml).
	UserData []byte
}

// simInstances lists the instances of the simulator k's plugin talks
// to, oldest first, with the pod UID each runs; none with the local
// plugin.
func simInstances(t testing.TB, k *framework.Kip) (ins []simInstance, podUIDs []string) {
	t.Helper()
	type withUID struct {
		simInstance
		uid string
	}
	var all []withUID
	switch {
	case k.EC2 != nil:
		for _, in := range k.EC2.Instances() {
			all = append(all, withUID{simInstance{
				ID: in.ID, Cell: in.Tags[pluginapi.TagCell], LocalCell: in.ID, Type: in.InstanceType,
				Running: in.State == "running", Ended: in.State == "shutting-down" || in.State == "terminated", Terminated: in.State == "terminated",
				Launched: in.LaunchTime, UserData: in.UserData,
			}, in.Tags[pluginapi.TagPodUID]})
		}
	case k.GCE != nil:
		for _, in := range k.GCE.Instances() {
			all = append(all, withUID{simInstance{
				ID: in.Zone + "/" + in.Name, Cell: in.Name, LocalCell: in.Name, Type: in.MachineType,
				Running: in.Status == "RUNNING", Ended: in.Gone || in.Status == "STOPPING" || in.Status == "TERMINATED",
				Terminated: in.Gone || in.Status == "TERMINATED",
				Launched:   in.Created, UserData: in.Bootstrap,
			}, in.Labels[gceLabelPodUID]})
		}
	case k.Azure != nil:
		for _, vm := range k.Azure.VMs() {
			all = append(all, withUID{simInstance{
				ID: vm.Name, Cell: vm.Name, LocalCell: vm.Name, Type: vm.Size,
				Running:    vm.ProvisioningState == azuresim.StateSucceeded && vm.PowerState == azuresim.PowerRunning,
				Ended:      vm.Gone || vm.ProvisioningState == azuresim.StateDeleting || vm.ProvisioningState == azuresim.StateFailed,
				Terminated: vm.Gone || vm.ProvisioningState == azuresim.StateFailed,
				Launched:   vm.Created, UserData: vm.Bootstrap,
			}, vm.Tags[azureTagPodUID]})
		}
	}
	slices.SortStableFunc(all, func(a, b withUID) int { return a.Launched.Compare(b.Launched) })
	for _, in := range all {
		ins, podUIDs = append(ins, in.simInstance), append(podUIDs, in.uid)
	}
	return ins, podUIDs
}

// instancesOf is the simulator's instances of a pod of node kip, oldest
// first.
func instancesOf(t testing.TB, uid types.UID) []simInstance {
	t.Helper()
	return simInstancesOf(t, kip, uid)
}

// simInstancesOf is the instances of a pod of k's simulator, oldest
// first.
func simInstancesOf(t testing.TB, k *framework.Kip, uid types.UID) []simInstance {
	t.Helper()
	var out []simInstance
	ins, uids := simInstances(t, k)
	for i, in := range ins {
		if uids[i] == string(uid) {
			out = append(out, in)
		}
	}
	return out
}

// liveInstances counts the simulator's instances that are not terminated
// (EC2's terminated, GCE's TERMINATED or gone); 0 with the local plugin.
func liveInstances(t testing.TB) int {
	t.Helper()
	n := 0
	ins, _ := simInstances(t, kip)
	for _, in := range ins {
		if !in.Terminated {
			n++
		}
	}
	return n
}

// spotReclaimReplacesThePod runs a Deployment (app) of one Spot pod, has
// the cloud reclaim its instance (reclaim, given the pod's UID: a GCE
// preemption, an Azure eviction), and checks that the pod fails with
// CellLost and a message that names the reclaim (names), in its status
// and its events, and that the Deployment's replacement runs.
func spotReclaimReplacesThePod(t *testing.T, app string, reclaim func(t *testing.T, uid types.UID), names func(message string) bool) {
	t.Helper()
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	settle(t, ns)
	helloDeployment(t, ns, app, 1, map[string]string{"kipcell.io/capacity-type": "spot"})
	first := f.WaitForPods(t, ns, "app="+app, 1, 60*time.Second, "Running on spot", func(p *corev1.Pod) bool {
		return running(p) && p.Annotations["cell.kipcell.io/capacity-type"] == "spot"
	})[0]
	reclaim(t, first.UID)
	f.WaitFor(t, 60*time.Second, "the reclaimed pod Failed with the reason", func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "CellLost" && names(p.Status.Message), nil
	})
	f.WaitForPods(t, ns, "app="+app, 2, 60*time.Second, "a replacement Running beside the failed pod", func(p *corev1.Pod) bool {
		return p.Name == first.Name || running(p)
	})
	events := podEvents(t, ns, first.Name)
	lost := false
	for _, line := range strings.Split(events, "\n") {
		lost = lost || strings.HasPrefix(line, "Warning CellLost ") && names(line)
	}
	if !lost {
		t.Errorf("the reclaimed pod's events do not say why:\n%s", events)
	}
	t.Logf("events of the reclaimed pod:\n%s", events)
}

// squeezedPod runs pod "squeezed" (300m CPU, 300Mi: the cheapest type
// that fits is EC2's t3a.small, GCE's e2-small) in a namespace of its
// own, once the caller made a type short; clear ends the shortage when the
// test ends, which then waits out framework.UnavailableTTL, for which kip
// skips the type, so that the next test's pods get it. It returns the pod
// once Running, and its events.
func squeezedPod(t *testing.T, clear func()) (corev1.Pod, string) {
	t.Helper()
	kipLogOnFailure(t)
	t.Cleanup(func() {
		clear()
		time.Sleep(framework.UnavailableTTL + time.Second)
	})
	ns := f.Namespace(t)
	settle(t, ns)
	ctr := corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref, Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("300Mi")}}}
	createPod(t, ns, "squeezed", onKip(ctr))
	got := f.WaitForPods(t, ns, "app=squeezed", 1, 60*time.Second, "Running", running)[0]
	return got, podEvents(t, ns, "squeezed")
}

// throttledDeployment runs a Deployment of six pods while the simulator
// refuses the next refused calls (inject makes it so), and checks that
// every pod ends Running, that the simulator saw the refused calls beside
// at least six launches, and that the plugin never made more than limit
// calls in one second (its own rate limit).
func throttledDeployment(t *testing.T, sim framework.Sim, refused int, inject func(), limit int) {
	t.Helper()
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	settle(t, ns)
	sim.ResetCalls()
	inject()
	helloDeployment(t, ns, "throttled", 6, nil)
	f.WaitForPods(t, ns, "app=throttled", 6, 120*time.Second, "Running", running)
	calls := 0
	for _, n := range sim.Calls() {
		calls += n
	}
	// Six launches cannot take fewer than 6 calls; the refused ones come
	// on top (Throttled counts only the rate limit's refusals, not
	// injected ones).
	if calls < 6+refused {
		t.Errorf("the simulator saw %d calls, fewer than the %d refused plus 6 launches", calls, refused)
	}
	if peak := sim.MaxCallsPerSecond(); peak > limit {
		t.Errorf("the plugin made %d %s calls in one second, above its limit of %d", peak, kip.Plugin, limit)
	}
	t.Logf("%s calls: %v, peak %d/s, throttled %d", kip.Plugin, sim.Calls(), sim.MaxCallsPerSecond(), sim.Throttled())
}
