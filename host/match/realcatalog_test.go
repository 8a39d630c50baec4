package match

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// realTypes loads a cloud plugin's committed catalog (the data the plugin
// embeds) for one region and its zones.
func realTypes(t testing.TB, cloud, region string, zones ...string) []pluginapi.InstanceType {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "plugins", cloud, "catalog", cloud+".json"))
	if err != nil {
		t.Fatalf("reading the %s catalog: %v", cloud, err)
	}
	c, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	types, warnings := c.InstanceTypes(region, zones)
	if len(warnings) > 0 {
		t.Fatalf("%s %s: %v", cloud, region, warnings)
	}
	return types
}

var awsZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// TestRankRealCatalogs runs the matcher's rules over the AWS (us-east-1)
// and GCE (us-central1) catalogs the plugins ship. The expected answers
// were read off the data files; each case is also checked against the
// reference ranking.
func TestRankRealCatalogs(t *testing.T) {
	aws := realTypes(t, "aws", "us-east-1", awsZones...)
	gce := realTypes(t, "gce", "us-central1", "us-central1-a")
	cfg := DefaultConfig()
	cfg.DefaultArch = pluginapi.ArchAMD64
	app := func(cpu, mem string) corev1.Container { return ctr("app", rl("cpu", cpu, "memory", mem), nil) }

	tests := []struct {
		name        string
		types       []pluginapi.InstanceType
		pod         *corev1.Pod
		unavailable [][3]string // type, zone, capacity type
		want        []string    // the first candidates, "type zone capacity"
		wantErr     string
	}{{
		// 350m and 768Mi with the agent reserve: t3a.small's baseline
		// (2 × 20%) covers it at $0.0188; t3a.nano/micro are cheaper but
		// their baselines (100m, 200m) do not.
		name:  "small pod on the cheapest burstable whose baseline covers it",
		types: aws, pod: simple("250m", "512Mi"),
		want: []string{"t3a.small us-east-1a on-demand", "t3a.small us-east-1b on-demand", "t3a.small us-east-1c on-demand", "t3.small us-east-1a on-demand"},
	}, {
		// Elotl Kip ignored init containers: the app alone (600m, 1.25Gi)
		// would get c7a.medium, which cannot run the 3-vCPU migration.
		name:  "init container larger than the app",
		types: aws,
		pod:   mkPod([]corev1.Container{app("500m", "1Gi")}, withInit(ctr("migrate", rl("cpu", "3", "memory", "6Gi"), nil))),
		want:  []string{"c6a.xlarge us-east-1a on-demand"},
	}, {
		name: "the same pod without the init container", types: aws,
		pod:  mkPod([]corev1.Container{app("500m", "1Gi")}),
		want: []string{"c7a.medium us-east-1a on-demand"},
	}, {
		// c5.24xlarge and c5.metal cost the same ($4.08) and have the same
		// size: the name decides, never the catalog's order.
		name:  "equal prices",
		types: aws, pod: simple("80", "1Gi", withAnn(AnnotationInstanceType, "c5.*")),
		want: []string{"c5.24xlarge us-east-1a on-demand", "c5.24xlarge us-east-1b on-demand", "c5.24xlarge us-east-1c on-demand", "c5.metal us-east-1a on-demand"},
	}, {
		name:  "an unavailable offering is skipped, then its type",
		types: aws, pod: simple("250m", "512Mi"),
		unavailable: [][3]string{{"t3a.small", "us-east-1a", "on-demand"}, {"t3a.small", "us-east-1b", "on-demand"}, {"t3a.small", "us-east-1c", "on-demand"}, {"t3.small", "us-east-1a", "on-demand"}},
		want:        []string{"t3.small us-east-1b on-demand", "t3.small us-east-1c on-demand", "t3a.medium us-east-1a on-demand"},
	}, {
		name:  "GPU kind",
		types: aws, pod: simple("1", "1Gi", withAnn(AnnotationGPUKind, "nvidia-tesla-t4"), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1")
		}),
		want: []string{"g4dn.xlarge us-east-1a on-demand"},
	}, {
		name:  "arm64 by node selector",
		types: aws, pod: simple("1", "2Gi", withSel(corev1.LabelArchStable, "arm64")),
		want: []string{"c6g.large us-east-1a on-demand"},
	}, {
		name:  "zone by node selector",
		types: aws, pod: simple("250m", "512Mi", withSel(corev1.LabelTopologyZone, "us-east-1c")),
		want: []string{"t3a.small us-east-1c on-demand", "t3.small us-east-1c on-demand"},
	}, {
		name:  "named type too small",
		types: aws, pod: simple("2", "1Gi", withAnn(AnnotationInstanceType, "t3.micro")),
		wantErr: "instance type t3.micro (2 vCPU, 1 GiB) is too small for the pod (2 vCPU, 1 GiB, plus 0.1 vCPU and 256 MiB for the kip agent)",
	}, {
		name:  "named burstable type whose baseline is too low",
		types: aws, pod: simple("1", "1Gi", withAnn(AnnotationElotlInstanceType, "t3.medium")),
		wantErr: "instance type t3.medium is burstable and its baseline (0.4 vCPU) is below the pod's 1.1 vCPU",
	}, {
		// AWS spot prices have no source here: every spot offering is
		// unknown and ranks by vCPU, memory, then name (the 1-vCPU
		// c7a.medium before the 2-vCPU t3.small whose baseline fits too).
		name:  "spot with unknown prices ranks by size",
		types: aws, pod: simple("250m", "512Mi", withAnn(AnnotationCapacityType, "spot")),
		want: []string{"c7a.medium us-east-1a spot", "c7a.medium us-east-1b spot", "c7a.medium us-east-1c spot", "m7a.medium us-east-1a spot"},
	}, {
		// GCE spot discounts differ by family, so the spot pod lands on
		// another family than the on-demand pod of the same size (Elotl
		// Kip ranked spot pods on on-demand prices).
		name:  "on-demand on GCE",
		types: gce, pod: simple("2", "8Gi"),
		want: []string{"e2-custom-4-12288 us-central1-a on-demand"},
	}, {
		name:  "a spot price changes the choice",
		types: gce, pod: simple("2", "8Gi", withAnn(AnnotationCapacityType, "spot")),
		want: []string{"n2d-custom-4-12288 us-central1-a spot"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := PodRequirements(tt.pod, cfg)
			if err != nil {
				t.Fatal(err)
			}
			marks := map[[3]string]bool{}
			for _, u := range tt.unavailable {
				marks[u] = true
			}
			unavailable := func(typ, zone string, ct pluginapi.CapacityType) bool { return marks[[3]string{typ, zone, string(ct)}] }
			got, err := Rank(req, tt.types, unavailable, cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var first []string
			for _, c := range got[:min(len(tt.want), len(got))] {
				first = append(first, c.InstanceType+" "+c.Zone+" "+string(c.CapacityType))
			}
			if diff := cmp.Diff(tt.want, first); diff != "" {
				t.Errorf("first candidates (-want +got):\n%s", diff)
			}
			ref := naiveRank(req, tt.types, unavailable, cfg)
			if diff := cmp.Diff(ref, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("differs from the reference ranking (-ref +got):\n%s", diff)
			}
		})
	}
}
