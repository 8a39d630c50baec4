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
)

// TestPodsAreRightSized: pods with different requests get different local
// instance types (the cheapest that fits each, agent reserve included),
// each pod says where it runs in its annotations and events, and the local
// plugin launched exactly that type.
func TestPodsAreRightSized(t *testing.T) {
	kipLogOnFailure(t)
	ctx := context.Background()
	ns := f.Namespace(t)
	// The local catalog: nano 250m/256Mi, small 500m/512Mi, medium 1/1Gi,
	// large 2/2Gi, xlarge 4/4Gi; kip adds 100m and 256Mi for the agent.
	tests := []struct {
		name, cpu, mem, want string
	}{
		{"tiny", "", "", "local.nano"},
		{"some-memory", "300m", "300Mi", "local.medium"},
		{"two-cpus", "1500m", "64Mi", "local.large"},
		{"big", "3", "3Gi", "local.xlarge"},
	}
	for _, tt := range tests {
		ctr := corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref}
		if tt.cpu != "" {
			ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tt.cpu), corev1.ResourceMemory: resource.MustParse(tt.mem)}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Labels: map[string]string{"app": "sized"}}, Spec: onKip(ctr)}
		if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := f.WaitForPods(t, ns, "app=sized", len(tests), 60*time.Second, "Running with a placement", func(p *corev1.Pod) bool {
		return running(p) && p.Annotations["cell.kipcell.io/instance-type"] != ""
	})
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	for _, tt := range tests {
		p := byName[tt.name]
		if p == nil {
			t.Fatalf("pod %s missing", tt.name)
		}
		a := p.Annotations
		if a["cell.kipcell.io/instance-type"] != tt.want || a["cell.kipcell.io/capacity-type"] != "on-demand" ||
			a["cell.kipcell.io/zone"] != "local" || a["cell.kipcell.io/hourly-price"] == "" {
			t.Errorf("pod %s placement annotations = %v, want %s on-demand in zone local with a price", tt.name, placement(a), tt.want)
		}
		if got := localRecordType(t, "kip-"+string(p.UID)); got != tt.want {
			t.Errorf("pod %s: the local plugin launched %q, want %q", tt.name, got, tt.want)
		}
		events := podEvents(t, ns, tt.name)
		if !strings.Contains(events, "LaunchingCell launching cell kip-"+string(p.UID)+" on "+tt.want+" in local (on-demand, $") {
			t.Errorf("pod %s events lack the launch on %s:\n%s", tt.name, tt.want, events)
		}
	}
}

// TestImpossiblePodStaysPending: a pod no instance type fits stays Pending
// with reason NoInstanceType, an event saying why, and no cell.
func TestImpossiblePodStaysPending(t *testing.T) {
	kipLogOnFailure(t)
	ctx := context.Background()
	ns := f.Namespace(t)
	ctr := corev1.Container{Name: "huge", Image: cells.Images.Hello.Ref,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge", Labels: map[string]string{"app": "huge"}}, Spec: onKip(ctr)}
	if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := f.WaitForPods(t, ns, "app=huge", 1, 30*time.Second, "reason NoInstanceType", func(p *corev1.Pod) bool {
		return p.Status.Reason == "NoInstanceType"
	})[0]
	if got.Status.Phase != corev1.PodPending || !strings.Contains(got.Status.Message, "64") || !strings.Contains(got.Status.Message, "local.xlarge") {
		t.Errorf("status = %s %q, want Pending with a message naming the 64 vCPU asked and the largest type", got.Status.Phase, got.Status.Message)
	}
	f.WaitFor(t, 20*time.Second, "a NoInstanceType event", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "huge"), "Warning NoInstanceType "), nil
	})
	// Long enough for a launch to have shown up, had there been one.
	time.Sleep(3 * time.Second)
	if _, err := os.Stat(filepath.Join(kip.StateDir, "cells", "kip-"+string(got.UID))); !os.IsNotExist(err) {
		t.Errorf("a cell exists for the impossible pod (stat: %v)", err)
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

// localRecordType reads the instance type the local plugin recorded for a cell.
func localRecordType(t *testing.T, cellID string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kip.StateDir, "cells", cellID, "instance.json"))
	if err != nil {
		t.Fatalf("reading the local plugin's record of %s: %v", cellID, err)
	}
	var r struct {
		InstanceType string `json:"instanceType"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.InstanceType
}

// podEvents lists a pod's events as "Type Reason Message" lines.
func podEvents(t *testing.T, ns, name string) string {
	t.Helper()
	list, err := f.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
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
