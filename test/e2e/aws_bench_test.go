//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kipcell/kip/test/e2e/framework"
)

// BenchmarkBurstStartup measures 1 pod, then 20 pods started at once.
// With the aws plugin (KIP_E2E_PLUGIN=aws) the EC2 simulator, with the
// gce plugin (KIP_E2E_PLUGIN=gce) the Compute Engine simulator, with the
// azure plugin (KIP_E2E_PLUGIN=azure) the ARM simulator boots every
// instance in 20 s: it reports each pod's created → Running minus that
// boot delay (what kip and the plugin add to the cloud's boot) and the
// cloud API calls per pod lifecycle (launch, boot, run, delete, until the
// instance is terminated): ec2-calls/pod, gce-calls/pod or arm-calls/pod.
// The one-pod run comes first: it shows the path without
// contention, and the plugin has seen a boot when the burst starts, as in
// any cluster that has run a pod. With the local plugin there is no boot
// delay: the burst shows what 20 simultaneous cell starts cost this
// machine, whose two cores run every cell of the burst.
//
//	KIP_E2E_PLUGIN=aws go test -tags e2e -run '^$' -bench BurstStartup -benchtime=1x ./test/e2e/
//	KIP_E2E_PLUGIN=gce go test -tags e2e -run '^$' -bench BurstStartup -benchtime=1x ./test/e2e/
//	KIP_E2E_PLUGIN=azure go test -tags e2e -run '^$' -bench BurstStartup -benchtime=1x ./test/e2e/
func BenchmarkBurstStartup(b *testing.B) {
	boot := time.Duration(0)
	if sim := kip.Sim(); sim != nil {
		boot = 20 * time.Second
		sim.SetBootDelay(boot)
		b.Cleanup(func() { sim.SetBootDelay(0) })
	}
	for _, pods := range []int{1, 20} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) { burst(b, pods, boot) })
	}
}

// burst starts pods at once, each on its own cell, and reports their
// created → Running less boot, then deletes them and reports the cloud
// API calls per pod once every instance is terminated.
func burst(b *testing.B, pods int, boot time.Duration) {
	// The cells and instances of the run (CoreDNS's, when the cluster DNS
	// runs), which outlive each round.
	cellsBefore, instancesBefore := cellNames(b), liveInstances(b)
	sim := kip.Sim()
	for b.Loop() {
		ctx := b.Context()
		ns := f.Namespace(b)
		w, err := f.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if sim != nil {
			sim.ResetCalls()
		}
		created := map[string]time.Time{}
		for i := range pods {
			name := fmt.Sprintf("boot-%02d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "boot"}},
				Spec: onKip(corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref})}
			created[name] = time.Now()
			f.CreatePod(b, ns, pod)
		}
		var overhead []time.Duration
		seen := map[string]bool{}
		deadline := time.After(boot + 90*time.Second)
		for len(seen) < pods {
			select {
			case ev := <-w.ResultChan():
				now := time.Now()
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) || seen[p.Name] || !running(p) {
					continue
				}
				seen[p.Name] = true
				overhead = append(overhead, now.Sub(created[p.Name])-boot)
			case <-deadline:
				b.Fatalf("%d of %d pods Running after %v", len(seen), pods, boot+90*time.Second)
			}
		}
		w.Stop()
		b.StopTimer()
		report(b, "running-minus-boot", overhead)
		if err := f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=boot"}); err != nil {
			b.Fatal(err)
		}
		f.WaitFor(b, 90*time.Second, "every instance terminated", func(context.Context) (bool, error) {
			return liveInstances(b) == instancesBefore && newCells(b, cellsBefore) == 0, nil
		})
		if sim == nil {
			b.StartTimer()
			continue
		}
		calls := 0
		for _, n := range sim.Calls() {
			calls += n
		}
		b.ReportMetric(float64(calls)/float64(pods), map[string]string{framework.PluginAWS: "ec2", framework.PluginGCE: "gce", framework.PluginAzure: "arm"}[kip.Plugin]+"-calls/pod")
		b.Logf("%s calls for %d pod lifecycles: %v (%.2f per pod)", kip.Plugin, pods, sim.Calls(), float64(calls)/float64(pods))
		b.StartTimer()
	}
}
