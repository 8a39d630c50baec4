//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/test/e2e/framework"
)

// TestPodsAreRightSized: pods with different requests get different
// instance types (the cheapest that fits each, agent reserve included),
// each pod says where it runs in its annotations and events, and the
// plugin launched exactly that type.
func TestPodsAreRightSized(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	// Kip adds 100m and 256Mi for the agent. Local catalog: nano 250m/256Mi,
	// small 500m/512Mi, medium 1/1Gi, large 2/2Gi, xlarge 4/4Gi. AWS: the
	// simulator's amd64 types at the catalog's us-east-1 prices; t3a types'
	// baselines are 2 × 5/10/20% of a vCPU, and c5.large and c6i.large
	// both cost $0.085 (the name decides). GCE: the simulator's machine
	// types (custom ones sold where their family is) at the catalog's
	// us-central1 prices (plugins/gce/catalog/gce.json): f1-micro
	// $0.0076, e2-small $0.01675 (then g1-small $0.0257), e2-highcpu-2
	// $0.04947 (then e2-custom-2-2048 $0.05191), e2-highcpu-4 $0.09894
	// (then e2-custom-4-4096 $0.10383); all zones cost the same, and the
	// first zone wins. Azure: the catalog has no prices, so kip picks the
	// smallest size that fits (B-series by their baselines: B1s 10% of a
	// vCPU and 1 GiB, B1ms 20%, B2s 2 × 20%; F2s_v2 2 vCPU and 4 GiB,
	// F4s_v2 4 and 8 GiB), in the first zone, eastus-1, "price unknown".
	tests := []struct {
		name, cpu, mem string
		want           map[string]string // by plugin
	}{
		{"tiny", "", "", map[string]string{framework.PluginLocal: "local.nano", framework.PluginAWS: "t3a.nano", framework.PluginGCE: "f1-micro", framework.PluginAzure: "Standard_B1s"}},
		{"some-memory", "300m", "300Mi", map[string]string{framework.PluginLocal: "local.medium", framework.PluginAWS: "t3a.small", framework.PluginGCE: "e2-small", framework.PluginAzure: "Standard_B2s"}},
		{"two-cpus", "1500m", "64Mi", map[string]string{framework.PluginLocal: "local.large", framework.PluginAWS: "c5.large", framework.PluginGCE: "e2-highcpu-2", framework.PluginAzure: "Standard_F2s_v2"}},
		{"big", "3", "3Gi", map[string]string{framework.PluginLocal: "local.xlarge", framework.PluginAWS: "c5.xlarge", framework.PluginGCE: "e2-highcpu-4", framework.PluginAzure: "Standard_F4s_v2"}},
	}
	for _, tt := range tests {
		ctr := corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref}
		if tt.cpu != "" {
			ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tt.cpu), corev1.ResourceMemory: resource.MustParse(tt.mem)}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Labels: map[string]string{"app": "sized"}}, Spec: onKip(ctr)}
		f.CreatePod(t, ns, pod)
	}
	pods := f.WaitForPods(t, ns, "app=sized", len(tests), 60*time.Second, "Running with a placement", func(p *corev1.Pod) bool {
		return running(p) && p.Annotations["cell.kipcell.io/instance-type"] != ""
	})
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	zone := map[string]string{framework.PluginLocal: "local", framework.PluginAWS: "us-east-1a", framework.PluginGCE: "us-central1-a", framework.PluginAzure: "eastus-1"}[kip.Plugin]
	// The launch event's price: the offering's, or "price unknown" where
	// the catalog has none (azure).
	price := "(on-demand, $"
	if kip.Plugin == framework.PluginAzure {
		price = "(on-demand, price unknown)"
	}
	for _, tt := range tests {
		p, want := byName[tt.name], tt.want[kip.Plugin]
		if p == nil {
			t.Fatalf("pod %s missing", tt.name)
		}
		a := p.Annotations
		if a["cell.kipcell.io/instance-type"] != want || a["cell.kipcell.io/capacity-type"] != "on-demand" ||
			a["cell.kipcell.io/zone"] != zone || a["cell.kipcell.io/hourly-price"] == "" {
			t.Errorf("pod %s placement annotations = %v, want %s on-demand in zone %s with a price", tt.name, placement(a), want, zone)
		}
		if got := launchedType(t, p.UID); got != want {
			t.Errorf("pod %s: the %s plugin launched %q, want %q", tt.name, kip.Plugin, got, want)
		}
		events := podEvents(t, ns, tt.name)
		if !strings.Contains(events, "LaunchingCell launching cell kip-"+string(p.UID)+" on "+want+" in "+zone+" "+price) {
			t.Errorf("pod %s events lack the launch on %s:\n%s", tt.name, want, events)
		}
	}
}

// TestImpossiblePodStaysPending: a pod no instance type fits stays Pending
// with reason NoInstanceType, an event saying why, and no cell. It asks
// for 900 vCPU: more than any type has, and less than the node's 1000,
// some of which the cluster DNS's pod takes.
func TestImpossiblePodStaysPending(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	ctr := corev1.Container{Name: "huge", Image: cells.Images.Hello.Ref,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900")}}}
	createPod(t, ns, "huge", onKip(ctr))
	got := f.WaitForPods(t, ns, "app=huge", 1, 30*time.Second, "reason NoInstanceType", func(p *corev1.Pod) bool {
		return p.Status.Reason == "NoInstanceType"
	})[0]
	if msg := got.Status.Message; got.Status.Phase != corev1.PodPending || !strings.Contains(msg, "no instance type is large enough for the pod (900 vCPU") ||
		!strings.Contains(msg, "the largest is ") {
		t.Errorf("status = %s %q, want Pending with a message naming the 900 vCPU asked and the largest type", got.Status.Phase, msg)
	}
	f.WaitFor(t, 20*time.Second, "a NoInstanceType event", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "huge"), "Warning NoInstanceType "), nil
	})
	// Long enough for a launch to have shown up, had there been one.
	time.Sleep(3 * time.Second)
	if id := cellDirOf(t, got.UID); id != "" {
		t.Errorf("a cell exists for the impossible pod: %s", id)
	}
	if ev := podEvents(t, ns, "huge"); strings.Contains(ev, "LaunchingCell") {
		t.Errorf("a launch was attempted:\n%s", ev)
	}
	out, _ := kubectl(t, "get", "pod", "-n", ns, "huge", "--no-headers")
	if !strings.Contains(out, "NoInstanceType") {
		t.Errorf("kubectl get pod shows %q, want the reason NoInstanceType", out)
	}
}

func placement(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if strings.HasPrefix(k, "cell.kipcell.io/") {
			out[k] = v
		}
	}
	return out
}

// cellDirOf returns the local cell directory of the pod's cell: named
// after the cell ID with the local plugin, after the EC2 instance ID with
// the aws plugin and after the GCE instance name (the cell ID) with the
// gce plugin (whose simulators run each instance as a local cell); ""
// when there is none.
func cellDirOf(t testing.TB, uid types.UID) string {
	t.Helper()
	id := "kip-" + string(uid)
	if kip.Sim() != nil {
		id = ""
		for _, in := range instancesOf(t, uid) {
			if !in.Terminated {
				id = in.LocalCell
			}
		}
		if id == "" {
			return ""
		}
	}
	dir := filepath.Join(kip.StateDir, "cells", id)
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

// launchedType reads the instance type the local plugin recorded for the
// pod's cell (with the aws and gce plugins: the simulator's instance or
// machine type, which names the local cell's type too).
func launchedType(t *testing.T, uid types.UID) string {
	t.Helper()
	dir := cellDirOf(t, uid)
	if dir == "" {
		t.Fatalf("no cell for pod %s", uid)
	}
	data, err := os.ReadFile(filepath.Join(dir, "instance.json"))
	if err != nil {
		t.Fatalf("reading the local plugin's record: %v", err)
	}
	var r struct {
		InstanceType string `json:"instanceType"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if kip.Sim() != nil {
		found := false
		for _, in := range instancesOf(t, uid) {
			if in.LocalCell == filepath.Base(dir) {
				found = true
				if in.Type != r.InstanceType {
					t.Errorf("%s instance %s is %s; its local cell is %s", kip.Plugin, in.ID, in.Type, r.InstanceType)
				}
			}
		}
		if !found {
			t.Errorf("no %s instance runs local cell %s", kip.Plugin, filepath.Base(dir))
		}
	}
	return r.InstanceType
}

// podEvents lists a pod's events as "Type Reason Message" lines.
func podEvents(t testing.TB, ns, name string) string {
	t.Helper()
	list, err := f.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range list.Items {
		lines = append(lines, e.Type+" "+e.Reason+" "+e.Message)
	}
	return strings.Join(lines, "\n")
}

// choicesNode is the kip node TestOperatorBoundsInstanceChoices runs,
// beside the shared one, with cells.choices rules of its own.
const choicesNode = "kip-choices"

// TestOperatorBoundsInstanceChoices: a kip whose cells.choices lets the
// test's namespace name local.* types at up to twice the price of the
// cheapest that fits (local.nano for a pod that asks for nothing) and no
// instance profile. A pod that names local.xlarge (16 times the price)
// stays Pending with reason ChoiceForbidden, an event that names the rule
// and the annotation, and no cell; so does one that names an instance
// profile. One that names local.small (twice) runs there, and the refused
// pod runs once its annotation is changed to what the rule allows.
func TestOperatorBoundsInstanceChoices(t *testing.T) {
	if kip.Plugin != framework.PluginLocal {
		t.Skipf("names the local plugin's types; with %s it would be refused for another reason", kip.Plugin)
	}
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	ck := startSideKip(t, framework.KipOptions{
		NodeName: choicesNode, Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-choices", Network: 4,
		Choices: "rules:\n  - name: bounded\n    namespaces: [" + ns + "]\n    instanceTypes: [\"local.*\"]\n    maxPriceRatio: 2\n",
	})
	create := func(name string, annotations map[string]string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}, Annotations: annotations},
			Spec:       onNode(choicesNode, sleeper()),
		}
		f.CreatePod(t, ns, pod)
	}
	forbidden := func(p *corev1.Pod) bool { return p.Status.Reason == "ChoiceForbidden" }
	refused := []struct{ name, annotation, value, says string }{
		{"dear", "kipcell.io/instance-type", "local.xlarge",
			`annotation kipcell.io/instance-type asks for instance type "local.xlarge": rule "bounded" of kip's cells.choices (for namespace "` + ns + `") allows at most 2× the hourly price of local.nano`},
		{"identity", "kipcell.io/instance-profile", "admin",
			`annotation kipcell.io/instance-profile asks for instance profile "admin": rule "bounded" of kip's cells.choices (for namespace "` + ns + `") allows none (instanceProfiles)`},
	}
	for _, r := range refused {
		create(r.name, map[string]string{r.annotation: r.value})
	}
	create("fits", map[string]string{"kipcell.io/instance-type": "local.small"})
	for _, r := range refused {
		p := f.WaitForPods(t, ns, "app="+r.name, 1, time.Minute, "ChoiceForbidden", forbidden)[0]
		if p.Status.Phase != corev1.PodPending || !strings.Contains(p.Status.Message, r.says) {
			t.Errorf("pod %s: %s %q, want Pending with a message saying %q", r.name, p.Status.Phase, p.Status.Message, r.says)
		}
		// The event is recorded apart from the status, and may come after it.
		f.WaitFor(t, 30*time.Second, "pod "+r.name+"'s ChoiceForbidden event", func(context.Context) (bool, error) {
			ev := podEvents(t, ns, r.name)
			return strings.Contains(ev, "Warning ChoiceForbidden ") && strings.Contains(ev, r.says), nil
		})
		if podCells(t, ck)["kip-"+string(p.UID)] {
			t.Errorf("pod %s has a cell, though its choice was refused", r.name)
		}
	}
	p := f.WaitForPods(t, ns, "app=fits", 1, 2*time.Minute, "Running", running)[0]
	if got := p.Annotations["cell.kipcell.io/instance-type"]; got != "local.small" {
		t.Errorf("pod fits runs on %q, want local.small, which it named", got)
	}

	// The refused pod loses nothing: with an allowed type it runs.
	patch := []byte(`{"metadata":{"annotations":{"kipcell.io/instance-type":"local.small"}}}`)
	if _, err := f.Client.CoreV1().Pods(ns).Patch(ctx, "dear", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p = f.WaitForPods(t, ns, "app=dear", 1, 2*time.Minute, "Running", running)[0]
	if got := p.Annotations["cell.kipcell.io/instance-type"]; got != "local.small" {
		t.Errorf("pod dear runs on %q after its fix, want local.small", got)
	}
}
