package match

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
)

// syntheticCatalog builds n instance types in the given number of zones,
// each offered on-demand and spot, with AWS-like shapes: families of
// sizes, some burstable, some arm64, some with GPUs, a few unknown spot
// prices and unavailable offerings. TEST DATA, not a price list.
func syntheticCatalog(n, zones int, r *rand.Rand) []pluginapi.InstanceType {
	sizes := []struct {
		name string
		vcpu int64
	}{{"medium", 1}, {"large", 2}, {"xlarge", 4}, {"2xlarge", 8}, {"4xlarge", 16}, {"8xlarge", 32}, {"12xlarge", 48}, {"16xlarge", 64}, {"24xlarge", 96}, {"metal", 128}}
	var out []pluginapi.InstanceType
	for f := 0; len(out) < n; f++ {
		family := fmt.Sprintf("%c%d", "cmrtgpxz"[f%8], 3+f/8)
		memPerCPU := []int64{2, 4, 8, 4, 4, 8, 16, 8}[f%8] * gib
		perCPU := 0.02 + r.Float64()*0.04
		for _, s := range sizes {
			if len(out) == n {
				break
			}
			t := pluginapi.InstanceType{
				Name:        family + "." + s.name,
				MilliCPU:    s.vcpu * 1000,
				MemoryBytes: s.vcpu * memPerCPU,
				Arch:        pluginapi.ArchAMD64,
			}
			if f%5 == 1 {
				t.Arch = pluginapi.ArchARM64
			}
			if f%8 == 3 {
				t.BurstableBaselineMilliCPU = s.vcpu * 200
			}
			price := perCPU * float64(s.vcpu)
			if f%8 == 4 || f%8 == 5 {
				t.GPU = pluginapi.GPU{Count: int32(max(1, s.vcpu/16)), Kind: []string{"t4", "a10g"}[f%2], MemoryBytes: 16 * gib}
				price += float64(t.GPU.Count) * 0.5
			}
			for z := range zones {
				zone := fmt.Sprintf("zone-%d", z)
				p := price * (1 + 0.02*float64(z%2))
				t.Offerings = append(t.Offerings, pluginapi.Offering{Zone: zone, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: p, PriceKnown: true, Available: r.IntN(50) != 0})
				sp := pluginapi.Offering{Zone: zone, CapacityType: pluginapi.CapacitySpot, HourlyPrice: p * (0.25 + r.Float64()*0.5), PriceKnown: r.IntN(20) != 0, Available: r.IntN(20) != 0}
				if !sp.PriceKnown {
					sp.HourlyPrice = 0
				}
				t.Offerings = append(t.Offerings, sp)
			}
			out = append(out, t)
		}
	}
	return out
}

// BenchmarkRank ranks pods over a synthetic catalog of 800 types × 6
// zones × 2 capacity types (9,600 offerings).
func BenchmarkRank(b *testing.B) {
	types := syntheticCatalog(800, 6, rand.New(rand.NewPCG(1, 1)))
	cat := NewCatalog(types)
	u := NewUnavailable(0, nil)
	u.Mark(types[0].Name, "zone-0", pluginapi.CapacityOnDemand)
	contains := u.Contains // a method value allocates: take it once, as the host should
	spotFallback := []pluginapi.CapacityType{pluginapi.CapacitySpot, pluginapi.CapacityOnDemand}
	cases := []struct {
		name string
		req  Requirements
		cfg  Config
	}{
		{"small", Requirements{MilliCPU: 600, MemoryBytes: gib, CapacityTypes: onDemand}, Config{}},
		{"medium-spot-fallback", Requirements{MilliCPU: 4000, MemoryBytes: 8 * gib, CapacityTypes: spotFallback}, Config{}},
		{"large", Requirements{MilliCPU: 60000, MemoryBytes: 200 * gib, CapacityTypes: onDemand}, Config{}},
		{"gpu-kind", Requirements{MilliCPU: 4000, MemoryBytes: 16 * gib, GPUCount: 2, GPUKind: "a10g", CapacityTypes: onDemand}, Config{}},
		{"zone-arch", Requirements{MilliCPU: 2000, MemoryBytes: 4 * gib, Arch: pluginapi.ArchARM64, Zones: []string{"zone-3"}, CapacityTypes: onDemand}, Config{}},
		{"glob", Requirements{MilliCPU: 2000, MemoryBytes: 4 * gib, InstanceTypes: []NamePattern{{Pattern: "m*.*"}}, CapacityTypes: onDemand}, Config{}},
		{"named", Requirements{MilliCPU: 2000, MemoryBytes: 4 * gib, InstanceTypes: []NamePattern{{Pattern: types[23].Name}}, CapacityTypes: onDemand}, Config{}},
		{"burstable-unlimited", Requirements{MilliCPU: 1500, MemoryBytes: 2 * gib, CapacityTypes: onDemand}, Config{BurstablePolicy: BurstableUnlimited}},
		{"unbounded", Requirements{MilliCPU: 2000, MemoryBytes: 4 * gib, CapacityTypes: onDemand}, Config{MaxCandidates: -1}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if _, err := cat.Rank(c.req, contains, c.cfg); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, _ = cat.Rank(c.req, contains, c.cfg)
			}
		})
	}
	b.Run("unsatisfiable", func(b *testing.B) {
		req := Requirements{MilliCPU: 4000, GPUCount: 64, CapacityTypes: onDemand}
		b.ReportAllocs()
		for b.Loop() {
			_, _ = cat.Rank(req, contains, Config{})
		}
	})
	b.Run("pod-requirements+rank", func(b *testing.B) {
		pod := simple("1500m", "3Gi", withAnn(AnnotationCapacityType, "spot", AnnotationSpotFallback, "true"))
		b.ReportAllocs()
		for b.Loop() {
			req, err := PodRequirements(pod, DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			_, _ = cat.Rank(req, contains, Config{})
		}
	})
}

// BenchmarkNewCatalog indexes the synthetic 800-type catalog.
func BenchmarkNewCatalog(b *testing.B) {
	types := syntheticCatalog(800, 6, rand.New(rand.NewPCG(1, 1)))
	b.ReportAllocs()
	for b.Loop() {
		NewCatalog(types)
	}
}

// BenchmarkMatchAWS matches one pod (PodRequirements + Rank, as the host
// does for every pod) over the AWS plugin's whole catalog for us-east-1,
// offered in six zones, on-demand and spot.
func BenchmarkMatchAWS(b *testing.B) {
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"}
	types := realTypes(b, "aws", "us-east-1", zones...)
	cat := NewCatalog(types)
	u := NewUnavailable(0, nil)
	u.Mark("t3a.small", "us-east-1a", pluginapi.CapacityOnDemand)
	contains := u.Contains
	cfg := DefaultConfig()
	cfg.DefaultArch = pluginapi.ArchAMD64
	gpu := simple("4", "16Gi", withAnn(AnnotationGPUKind, "t4"))
	gpu.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1")
	offerings := 0
	for _, t := range types {
		offerings += len(t.Offerings)
	}
	b.Logf("AWS us-east-1: %d types, %d offerings", len(types), offerings)
	cases := []struct {
		name string
		pod  *corev1.Pod
	}{
		{"small", simple("250m", "512Mi")},
		{"init-container", mkPod([]corev1.Container{ctr("app", rl("cpu", "500m", "memory", "1Gi"), nil)}, withInit(ctr("migrate", rl("cpu", "3", "memory", "6Gi"), nil)))},
		{"large", simple("60", "200Gi")},
		{"spot-fallback", simple("2", "4Gi", withAnn(AnnotationCapacityType, "spot", AnnotationSpotFallback, "true"))},
		{"gpu-kind", gpu},
		{"arm64-zone", simple("2", "4Gi", withSel(corev1.LabelArchStable, "arm64", corev1.LabelTopologyZone, "us-east-1c"))},
		{"glob", simple("2", "4Gi", withAnn(AnnotationInstanceType, "m*.*"))},
		{"named", simple("2", "4Gi", withAnn(AnnotationInstanceType, "m5.xlarge"))},
		{"unsatisfiable", simple("1000", "1Gi")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := PodRequirements(c.pod, cfg)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = cat.Rank(req, contains, cfg)
			}
		})
	}
}
