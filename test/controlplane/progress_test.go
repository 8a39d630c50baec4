package controlplane

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProgress(t *testing.T) {
	opts := BuildOptions{KubeVersion: "v1.36.3", CacheDir: "/cache dir"}
	tests := []struct {
		name   string
		writes []string // written in this order, split anywhere
		want   string   // on the screen
	}{
		{
			name: "a cold control-plane build",
			writes: []string{
				resolvingLine(controlPlaneSpec(opts), opts.KubeVersion),
				"go: downloading k8s.io/api v0.36.3\ngo: downl", "oading go.etcd.io/etcd/server/v3 v3.6.5\n",
				buildingLine(controlPlaneSpec(opts), opts.KubeVersion),
				"controlplane: built in 6m48s\n",
			},
			want: "  downloading the Go modules of k8s.io/kubernetes@v1.36.3 for the control plane, once\n" +
				"  building the control plane (Kubernetes v1.36.3) from source, about 7 minutes, once\n" +
				"  built in 6m48s\n",
		},
		{
			name:   "the kubelet node's build",
			writes: []string{buildingLine(nodeSpec(opts), opts.KubeVersion)},
			want:   "  building the kubelet and kube-proxy (Kubernetes v1.36.3) from source, about a minute (7 without the control plane's build first), once\n",
		},
		{
			// test/modbuild's Program.Build prints these three lines.
			name: "a cold CoreDNS build, a line split in two writes",
			writes: []string{
				"modbuild: resolving coredns v1.15.0: github.com/coredns/coredns/core/dnsserver@v1.15.0 github.com/coredns/coredns/plugin/forward@v1.15.0\n",
				"go: downloading github.com/miekg/dns v1.1.68\n",
				"modbuild: building coredns v1.15.0 into /root/.cache/kip/coredns/v1.15.0/bin (cold: ab",
				"out 3 minutes; cached afterwards)\nmodbuild: built coredns in 2m50s\n",
			},
			want: "  downloading the Go modules of coredns v1.15.0, once\n" +
				"  building coredns v1.15.0 from source, about 3 minutes, once\n  built in 2m50s\n",
		},
		{
			name: "a warm run: nothing",
			writes: []string{
				"controlplane: kube-apiserver ready after 2.1s\n",
				"kubeletnode: node kip-infra Ready after 4s (InternalIP 10.1.0.2, pods 10.2.0.0/24)\n",
			},
		},
		{
			name:   "a last line with no newline",
			writes: []string{"controlplane: built in 1s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var screen, log bytes.Buffer
			w := Progress(&screen, &log)
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
				}
			}
			if diff := cmp.Diff(tt.want, screen.String()); diff != "" {
				t.Errorf("screen (-want +got):\n%s", diff)
			}
			if got, want := log.String(), strings.Join(tt.writes, ""); got != want {
				t.Errorf("log = %q, want every byte written, %q", got, want)
			}
		})
	}
}
