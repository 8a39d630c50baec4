package cell_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
)

// TestAgentEtcFiles: through real containerd and runc, a busybox
// container sees the pod's /etc/resolv.conf, /etc/hosts and /etc/hostname
// as the kubelet writes them, and a new generation's cluster DNS in the
// same running container.
func TestAgentEtcFiles(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.43")
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "uid-etc"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Hostname: "web-0", Subdomain: "web",
			HostAliases: []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db"}}},
			Containers: []corev1.Container{{Name: "main", Image: e.img.Busybox.Ref,
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"}}},
		},
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	user, pass := e.reg.Credentials()
	apply := func(gen int64, dns string) {
		t.Helper()
		if _, err := a.client.ApplyPod(t.Context(), &api.PodRequest{
			PodJSON: data, Generation: gen,
			ClusterDNS:          &api.ClusterDNS{Servers: []string{dns}, Domain: "cluster.local"},
			RegistryCredentials: []api.RegistryCredential{{Server: e.reg.Host(), Username: user, Password: pass}},
		}); err != nil {
			t.Fatalf("ApplyPod: %v", err)
		}
	}
	apply(1, "10.96.0.10")
	watch(t, a, "running", func(s *corev1.PodStatus) bool { return containerStatus(s, "main").State.Running != nil })
	run := func(script string) string {
		t.Helper()
		out, errOut, code := execute(t, a, &api.ExecStart{Container: "main", Command: []string{"sh", "-c", script}, Stdout: true, Stderr: true})
		if code != 0 {
			t.Fatalf("%q exited %d: %s%s", script, code, out, errOut)
		}
		return out
	}

	if got, want := run("cat /etc/resolv.conf"), "search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"; got != want {
		t.Errorf("/etc/resolv.conf = %q, want %q", got, want)
	}
	hosts := run("cat /etc/hosts")
	for _, line := range []string{"# Kubernetes-managed hosts file.\n", "10.251.9.43\tweb-0.web.shop.svc.cluster.local\tweb-0\n", "10.1.2.3\tdb\n"} {
		if !strings.Contains(hosts, line) {
			t.Errorf("/etc/hosts lacks %q:\n%s", line, hosts)
		}
	}
	if got := run("cat /etc/hostname; hostname"); got != "web-0\nweb-0\n" {
		t.Errorf("/etc/hostname and hostname = %q, want web-0 twice", got)
	}

	// The next generation's cluster DNS reaches the running container.
	apply(2, "10.96.0.53")
	if got := run("cat /etc/resolv.conf"); !strings.Contains(got, "nameserver 10.96.0.53\n") {
		t.Errorf("/etc/resolv.conf after generation 2 = %q", got)
	}
}
