package match

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
)

// short is a candidate as "type/zone/capacity-type".
func short(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s/%s/%s", c.InstanceType, c.Zone, c.CapacityType)
	}
	return out
}

func TestRank(t *testing.T) {
	cat := NewCatalog(fixtureCatalog())
	noReserve := Config{}
	unlimited := Config{BurstablePolicy: BurstableUnlimited}
	gpuPod := func(n, kind string, opts ...podOpt) *corev1.Pod {
		return mkPod([]corev1.Container{ctr("app", rl("cpu", "1", "memory", "4Gi"), rl("nvidia.com/gpu", n))}, append(opts, withAnn(AnnotationGPUKind, kind))...)
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		cfg         Config
		unavailable func(string, string, pluginapi.CapacityType) bool
		// want is a prefix of the ranking; wantAll the whole ranking.
		want, wantAll []string
		wantErr       string
		check         func(t *testing.T, cs []Candidate)
	}{{
		name: "small pod fits a burstable type within its baseline",
		pod:  simple("100m", "512Mi"),
		cfg:  DefaultConfig(), // 200m, 768Mi with the reserve: t3.micro's baseline is 200m
		want: []string{"t3.micro/us-east-1a/on-demand", "t3.micro/us-east-1b/on-demand", "t4g.medium/us-east-1a/on-demand"},
		check: func(t *testing.T, cs []Candidate) {
			if cs[0].UnlimitedCredits || cs[0].HourlyPrice != 0.0104 || !cs[0].PriceKnown {
				t.Errorf("first = %+v, want t3.micro at its own price without unlimited credits", cs[0])
			}
		},
	}, {
		name: "burstable above baseline: baseline policy refuses it",
		pod:  simple("1", "512Mi"),
		cfg:  noReserve,
		want: []string{"c5.large/us-east-1a/on-demand", "c5.large/us-east-1b/on-demand", "m5a.large/us-east-1a/on-demand"},
	}, {
		name: "burstable above baseline: unlimited policy prices surplus credits in",
		pod:  simple("1", "512Mi"),
		cfg:  unlimited,
		// t3.micro: 0.0104 + 0.8 vCPU × 0.05 = 0.0504; t4g.medium 0.0336 + 0.6 × 0.05 = 0.0636;
		// t3.medium 0.0416 + 0.03 = 0.0716; then c5.large 0.085.
		want: []string{"t3.micro/us-east-1a/on-demand", "t3.micro/us-east-1b/on-demand", "t4g.medium/us-east-1a/on-demand",
			"t4g.medium/us-east-1b/on-demand", "t3.medium/us-east-1a/on-demand", "t3.medium/us-east-1b/on-demand", "c5.large/us-east-1a/on-demand"},
		check: func(t *testing.T, cs []Candidate) {
			want := Candidate{InstanceType: "t3.micro", Zone: zA, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.0104 + 0.8*0.05, PriceKnown: true,
				UnlimitedCredits: true, SurplusCreditPrice: 0.8 * 0.05, MilliCPU: 2000, MemoryBytes: gib}
			if d := cmp.Diff(want, cs[0], cmpopts.EquateApprox(0, 1e-12)); d != "" {
				t.Errorf("first (-want +got):\n%s", d)
			}
			if cs[6].UnlimitedCredits {
				t.Errorf("c5.large is not burstable: %+v", cs[6])
			}
		},
	}, {
		name: "burstable above baseline: unlimited policy, credits make it dearer",
		pod:  simple("1900m", "3Gi"),
		cfg:  unlimited,
		// t3.medium: 0.0416 + 1.5 × 0.05 = 0.1166 > c5.large 0.085 and m5a.large 0.0864.
		want: []string{"c5.large/us-east-1a/on-demand", "c5.large/us-east-1b/on-demand", "m5a.large/us-east-1a/on-demand",
			"m5a.large/us-east-1b/on-demand", "m6a.large/us-east-1a/on-demand", "m6a.large/us-east-1b/on-demand",
			"m5.large/us-east-1a/on-demand", "m5.large/us-east-1b/on-demand", "t4g.medium/us-east-1a/on-demand"},
	}, {
		name: "burstable within baseline under the unlimited policy has no surcharge",
		pod:  simple("150m", "512Mi"),
		cfg:  unlimited,
		check: func(t *testing.T, cs []Candidate) {
			if cs[0].InstanceType != "t3.micro" || cs[0].UnlimitedCredits || cs[0].SurplusCreditPrice != 0 {
				t.Errorf("first = %+v", cs[0])
			}
		},
	}, {
		name:    "equal prices: name then zone decide",
		pod:     simple("1", "6Gi"),
		cfg:     noReserve,
		wantAll: nil,
		want: []string{"m5a.large/us-east-1a/on-demand", "m5a.large/us-east-1b/on-demand", "m6a.large/us-east-1a/on-demand",
			"m6a.large/us-east-1b/on-demand", "m5.large/us-east-1a/on-demand"},
	}, {
		name: "spot prices change the choice",
		pod:  simple("1", "3Gi", withAnn(AnnotationCapacityType, "spot")),
		cfg:  noReserve,
		// On demand c5.large (0.085) beats m5.large (0.096); on spot m5.large in 1a (0.030) beats c5.large (0.032).
		want: []string{"m5.large/us-east-1a/spot", "c5.large/us-east-1a/spot", "c5.large/us-east-1b/spot", "m5.large/us-east-1b/spot"},
	}, {
		name: "spot without fallback never offers on-demand",
		pod:  simple("3", "3Gi", withAnn(AnnotationCapacityType, "spot")),
		cfg:  noReserve,
		// m5.xlarge/us-east-1b/spot has an unknown price: last.
		wantAll: []string{"m6g.xlarge/us-east-1a/spot", "m6g.xlarge/us-east-1b/spot", "c5.xlarge/us-east-1a/spot", "c5.xlarge/us-east-1b/spot",
			"m5.xlarge/us-east-1a/spot", "g4dn.xlarge/us-east-1a/spot", "g4dn.xlarge/us-east-1b/spot", "m5.xlarge/us-east-1b/spot"},
	}, {
		name: "spot with fallback: every spot candidate before on-demand",
		pod:  simple("40", "100Gi", withAnn(AnnotationCapacityType, "spot", AnnotationSpotFallback, "true")),
		cfg:  noReserve,
		wantAll: []string{"g4dn.12xlarge/us-east-1a/on-demand", "g4dn.12xlarge/us-east-1b/on-demand",
			"m5.24xlarge/us-east-1a/on-demand", "m5.24xlarge/us-east-1b/on-demand", "p4d.24xlarge/us-east-1b/on-demand"},
	}, {
		name: "spot with fallback, small pod",
		pod:  simple("3", "12Gi", withAnn(AnnotationCapacityType, "spot", AnnotationSpotFallback, "true")),
		cfg:  Config{MaxCandidates: 2},
		wantAll: []string{"m6g.xlarge/us-east-1a/spot", "m6g.xlarge/us-east-1b/spot",
			"m6g.xlarge/us-east-1a/on-demand", "m6g.xlarge/us-east-1b/on-demand"},
	}, {
		name:    "unknown price excluded",
		pod:     simple("3", "12Gi", withAnn(AnnotationCapacityType, "spot"), withSel(corev1.LabelTopologyZone, zB, corev1.LabelArchStable, "amd64")),
		cfg:     Config{UnknownPrice: UnknownPriceExclude},
		wantAll: []string{"g4dn.xlarge/us-east-1b/spot"},
	}, {
		name:    "unknown price ranks last",
		pod:     simple("3", "12Gi", withAnn(AnnotationCapacityType, "spot"), withSel(corev1.LabelTopologyZone, zB, corev1.LabelArchStable, "amd64")),
		cfg:     noReserve,
		wantAll: []string{"g4dn.xlarge/us-east-1b/spot", "m5.xlarge/us-east-1b/spot"},
		check: func(t *testing.T, cs []Candidate) {
			if cs[1].PriceKnown || cs[1].HourlyPrice != 0 {
				t.Errorf("m5.xlarge spot in us-east-1b = %+v, want an unknown price", cs[1])
			}
		},
	}, {
		name:    "unknown price, nothing else fits, exclude",
		pod:     simple("3", "12Gi", withAnn(AnnotationCapacityType, "spot", AnnotationInstanceType, "m5.xlarge"), withSel(corev1.LabelTopologyZone, zB)),
		cfg:     Config{UnknownPrice: UnknownPriceExclude},
		wantErr: `every offering that fits the pod has an unknown price and the unknown-price rule is "exclude"`,
	}, {
		name: "unavailable offering skipped",
		pod:  simple("1", "3Gi"),
		cfg:  noReserve,
		unavailable: func(typ, zone string, ct pluginapi.CapacityType) bool {
			return typ == "c5.large" && zone == zA && ct == pluginapi.CapacityOnDemand
		},
		want: []string{"c5.large/us-east-1b/on-demand", "m5a.large/us-east-1a/on-demand"},
	}, {
		name: "everything marked unavailable",
		pod:  simple("1", "1Gi", withAnn(AnnotationInstanceType, "c5.large")),
		cfg:  noReserve,
		unavailable: func(string, string, pluginapi.CapacityType) bool {
			return true
		},
		wantErr: "every offering that fits the pod is marked unavailable after a recent launch failed for lack of capacity (2 offerings); kip retries when the marks expire",
	}, {
		// The host's Unavailable reads the clock: a mark may expire
		// between Rank's look and explain's. (explain asked again, heard
		// no, and fell through to "no offering fits the pod".)
		name:        "a mark that expires while Rank explains",
		pod:         simple("1", "1Gi", withAnn(AnnotationInstanceType, "c5.large")),
		cfg:         noReserve,
		unavailable: expiringMarks(nil),
		wantErr:     "every offering that fits the pod is marked unavailable after a recent launch failed for lack of capacity (2 offerings); kip retries when the marks expire",
	}, {
		// m5.xlarge on spot: priced in us-east-1a (marked), unknown in
		// us-east-1b (excluded). The price rule comes before the marks,
		// as in the ranking: the one offering the rule allows is marked.
		// (explain checked the marks first and blamed the unknown price.)
		name: "marked where priced, unpriced elsewhere, exclude",
		pod:  simple("1", "1Gi", withAnn(AnnotationCapacityType, "spot", AnnotationInstanceType, "m5.xlarge")),
		cfg:  Config{UnknownPrice: UnknownPriceExclude},
		unavailable: func(typ, zone string, ct pluginapi.CapacityType) bool {
			return typ == "m5.xlarge" && zone == zA
		},
		wantErr: "every offering that fits the pod is marked unavailable after a recent launch failed for lack of capacity (1 offering); kip retries when the marks expire",
	}, {
		name:    "named type too small",
		pod:     simple("4", "2Gi", withAnn(AnnotationInstanceType, "m5.large")),
		cfg:     noReserve,
		wantErr: "instance type m5.large (2 vCPU, 8 GiB) is too small for the pod (4 vCPU, 2 GiB)",
	}, {
		name:    "named type too small, with agent reserve",
		pod:     simple("2", "2Gi", withAnn(AnnotationInstanceType, "m5.large")),
		cfg:     DefaultConfig(),
		wantErr: "instance type m5.large (2 vCPU, 8 GiB) is too small for the pod (2 vCPU, 2 GiB, plus 0.1 vCPU and 256 MiB for the kip agent)",
	}, {
		name:    "named burstable type below its baseline",
		pod:     simple("1", "2Gi", withAnn(AnnotationInstanceType, "t3.medium")),
		cfg:     noReserve,
		wantErr: `instance type t3.medium is burstable and its baseline (0.4 vCPU) is below the pod's 1 vCPU; the burstable policy is "baseline"`,
	}, {
		name:    "named burstable type below its baseline, unlimited",
		pod:     simple("1", "2Gi", withAnn(AnnotationInstanceType, "t3.medium")),
		cfg:     unlimited,
		wantAll: []string{"t3.medium/us-east-1a/on-demand", "t3.medium/us-east-1b/on-demand"},
	}, {
		name:    "unknown instance type",
		pod:     simple("1", "1Gi", withAnn(AnnotationInstanceType, "x1.weird")),
		wantErr: "unknown instance type x1.weird (annotation kipcell.io/instance-type)",
	}, {
		name:    "Elotl instance type",
		pod:     simple("1", "1Gi", withAnn(AnnotationElotlInstanceType, "m5.large", AnnotationElotlLaunchType, "spot")),
		wantAll: []string{"m5.large/us-east-1a/spot", "m5.large/us-east-1b/spot"},
	}, {
		name:    "glob",
		pod:     simple("1", "1Gi", withAnn(AnnotationInstanceType, "c5.*")),
		cfg:     noReserve,
		wantAll: []string{"c5.large/us-east-1a/on-demand", "c5.large/us-east-1b/on-demand", "c5.xlarge/us-east-1a/on-demand", "c5.xlarge/us-east-1b/on-demand"},
	}, {
		name:    "glob and node selector intersect",
		pod:     simple("1", "1Gi", withAnn(AnnotationInstanceType, "c5.*"), withSel(corev1.LabelInstanceTypeStable, "c5.xlarge")),
		wantAll: []string{"c5.xlarge/us-east-1a/on-demand", "c5.xlarge/us-east-1b/on-demand"},
	}, {
		name:    "glob and node selector disjoint",
		pod:     simple("1", "1Gi", withAnn(AnnotationInstanceType, "c5.*"), withSel(corev1.LabelInstanceTypeStable, "m5.large")),
		wantErr: "no instance type matches both c5.* (annotation kipcell.io/instance-type) and m5.large (nodeSelector node.kubernetes.io/instance-type)",
	}, {
		name:    "glob matching nothing",
		pod:     simple("1", "1Gi", withAnn(AnnotationInstanceType, "c9.*")),
		wantErr: "no instance type matches c9.* (annotation kipcell.io/instance-type)",
	}, {
		name:    "glob too small",
		pod:     simple("8", "1Gi", withAnn(AnnotationInstanceType, "c5.*")),
		cfg:     noReserve,
		wantErr: "no instance type matching c5.* is large enough for the pod (8 vCPU, 1 GiB); the largest is c5.xlarge (4 vCPU, 8 GiB)",
	}, {
		name: "arch",
		pod:  simple("1", "1Gi", withSel(corev1.LabelArchStable, "arm64")),
		cfg:  noReserve,
		want: []string{"c6g.xlarge/us-east-1a/on-demand", "c6g.xlarge/us-east-1b/on-demand", "m6g.xlarge/us-east-1a/on-demand"},
	}, {
		name:    "arch nobody has",
		pod:     simple("1", "1Gi", withSel(corev1.LabelArchStable, "s390x", corev1.LabelTopologyZone, zA)),
		wantErr: "no instance type in us-east-1a has arch s390x (nodeSelector kubernetes.io/arch)",
	}, {
		name:    "named type of another arch",
		pod:     simple("1", "1Gi", withSel(corev1.LabelArchStable, "arm64"), withAnn(AnnotationInstanceType, "c5.large")),
		wantErr: "instance type c5.large is not arm64 (nodeSelector kubernetes.io/arch)",
	}, {
		name:    "zone",
		pod:     simple("1", "1Gi", withSel(corev1.LabelTopologyZone, zB), withAnn(AnnotationInstanceType, "c5.*")),
		wantAll: []string{"c5.large/us-east-1b/on-demand", "c5.xlarge/us-east-1b/on-demand"},
	}, {
		name:    "unknown zone",
		pod:     simple("1", "1Gi", withSel(corev1.LabelTopologyZone, "eu-west-9z")),
		wantErr: "no instance type is offered in eu-west-9z (nodeSelector topology.kubernetes.io/zone)",
	}, {
		name:    "GPU kind from annotation",
		pod:     gpuPod("1", "t4"),
		cfg:     noReserve,
		wantAll: []string{"g4dn.xlarge/us-east-1a/on-demand", "g4dn.xlarge/us-east-1b/on-demand", "g4dn.12xlarge/us-east-1a/on-demand", "g4dn.12xlarge/us-east-1b/on-demand"},
	}, {
		name: "GPU kind from node selector",
		pod: mkPod([]corev1.Container{ctr("app", nil, rl("nvidia.com/gpu", "1"))},
			withSel(LabelGKEAccelerator, "nvidia-tesla-v100")),
		wantAll: []string{"p3.2xlarge/us-east-1a/on-demand", "p3.2xlarge/us-east-1b/on-demand"},
	}, {
		name:    "4 GPUs of a kind no type in the zone offers",
		pod:     gpuPod("4", "a100", withSel(corev1.LabelTopologyZone, zA)),
		wantErr: "no instance type in us-east-1a offers 4 GPUs of kind a100",
	}, {
		name:    "GPUs in the zone that has them",
		pod:     gpuPod("4", "a100", withSel(corev1.LabelTopologyZone, zB)),
		wantAll: []string{"p4d.24xlarge/us-east-1b/on-demand"},
	}, {
		name:    "named type lacks the GPUs",
		pod:     gpuPod("4", "t4", withAnn(AnnotationInstanceType, "p3.2xlarge")),
		wantErr: "instance type p3.2xlarge has 1 GPU of kind v100; the pod needs 4 GPUs of kind t4",
	}, {
		name:    "capacity type not offered",
		pod:     gpuPod("8", "a100", withAnn(AnnotationCapacityType, "spot")),
		wantErr: "no instance type that fits the pod is offered as spot (annotation kipcell.io/capacity-type)",
	}, {
		name:    "named type not offered as spot",
		pod:     simple("1", "1Gi", withAnn(AnnotationCapacityType, "spot", AnnotationInstanceType, "c6g.xlarge")),
		wantErr: "instance type c6g.xlarge is not offered as spot (annotation kipcell.io/capacity-type)",
	}, {
		name:    "extended resource no catalog offers",
		pod:     mkPod([]corev1.Container{ctr("app", rl("example.com/fpga", "1"), nil)}),
		wantErr: "no instance type offers the extended resource example.com/fpga (list it in ignoredResources if cells provide it)",
	}, {
		name:    "too large for any type",
		pod:     simple("128", "1Gi"),
		wantErr: "no instance type is large enough for the pod (128 vCPU, 1 GiB); the largest is p4d.24xlarge (96 vCPU, 1152 GiB)",
	}, {
		name:    "MaxCandidates",
		pod:     simple("1", "1Gi"),
		cfg:     Config{MaxCandidates: 3},
		wantAll: []string{"c5.large/us-east-1a/on-demand", "c5.large/us-east-1b/on-demand", "m5a.large/us-east-1a/on-demand"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := PodRequirements(tt.pod, tt.cfg)
			if err != nil {
				t.Fatalf("PodRequirements: %v", err)
			}
			got, err := cat.Rank(req, tt.unavailable, tt.cfg)
			if tt.wantErr != "" {
				if !IsUnsatisfiable(err) || err.Error() != tt.wantErr {
					t.Fatalf("err = %v\nwant    %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Rank: %v", err)
			}
			if d := cmp.Diff(naiveRank(req, fixtureCatalog(), tt.unavailable, tt.cfg), got); d != "" {
				t.Errorf("Rank differs from the reference (-ref +got):\n%s", d)
			}
			s := short(got)
			if tt.wantAll != nil {
				if d := cmp.Diff(tt.wantAll, s); d != "" {
					t.Errorf("ranking (-want +got):\n%s", d)
				}
			}
			if len(tt.want) > len(s) {
				t.Fatalf("ranking %v shorter than %v", s, tt.want)
			}
			if d := cmp.Diff(tt.want, s[:len(tt.want)], cmpopts.EquateEmpty()); d != "" {
				t.Errorf("ranking prefix (-want +got):\n%s", d)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// TestRankCatalogOrder checks the ranking does not depend on catalog order.
func TestRankCatalogOrder(t *testing.T) {
	req, _ := PodRequirements(simple("1", "1Gi"), Config{})
	want, err := NewCatalog(fixtureCatalog()).Rank(req, nil, Config{MaxCandidates: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		types := fixtureCatalog()
		r.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
		for i := range types {
			o := types[i].Offerings
			r.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
		}
		got, err := Rank(req, types, nil, Config{MaxCandidates: -1})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("order changed with the catalog's (-want +got):\n%s", d)
		}
	}
}

// TestRankMatchesReference compares Rank with the naive reference on random
// requirements over a random catalog, including the few-types path, the
// early exit on the sorted walk, surplus credits and the unavailable set.
func TestRankMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	types := syntheticCatalog(120, 3, r)
	cat := NewCatalog(types)
	cts := [][]pluginapi.CapacityType{
		{pluginapi.CapacityOnDemand}, {pluginapi.CapacitySpot}, {pluginapi.CapacitySpot, pluginapi.CapacityOnDemand},
	}
	n := 3000
	if raceEnabled || testing.Short() {
		n = 500
	}
	for i := range n {
		req := Requirements{
			MilliCPU:      r.Int64N(64000),
			MemoryBytes:   r.Int64N(256 * gib),
			CapacityTypes: cts[r.IntN(len(cts))],
		}
		if r.IntN(4) == 0 {
			req.Zones = []string{fmt.Sprintf("zone-%d", r.IntN(4))}
		}
		if r.IntN(5) == 0 {
			req.Arch = arm
		}
		if r.IntN(6) == 0 {
			req.GPUCount = r.Int64N(4)
			if r.IntN(2) == 0 {
				req.GPUKind = []string{"t4", "a10g"}[r.IntN(2)]
			}
		}
		if r.IntN(6) == 0 {
			req.InstanceTypes = []NamePattern{{Pattern: []string{"c*", "m?.*", "t3.*", "c7.2xlarge"}[r.IntN(4)]}}
		}
		cfg := Config{MaxCandidates: []int{0, 1, 5, -1}[r.IntN(4)]}
		if r.IntN(2) == 0 {
			cfg.BurstablePolicy = BurstableUnlimited
		}
		if r.IntN(3) == 0 {
			cfg.UnknownPrice = UnknownPriceExclude
		}
		marked := map[string]bool{}
		for range r.IntN(10) {
			marked[types[r.IntN(len(types))].Name] = true
		}
		everywhere := r.IntN(8) == 0
		unavailable := func(typ, zone string, ct pluginapi.CapacityType) bool {
			return everywhere || (marked[typ] && zone != "zone-0")
		}
		if r.IntN(10) == 0 {
			req.MilliCPU += 100000 // more than most types have
		}
		got, err := cat.Rank(req, unavailable, cfg)
		want := naiveRank(req, types, unavailable, cfg)
		if (err != nil) != (len(want) == 0) {
			t.Fatalf("case %d: err = %v, reference has %d candidates", i, err, len(want))
		}
		if r, ref := ruleOf(err), naiveExplain(req, types, unavailable, cfg); r != ref {
			t.Fatalf("case %d %+v %+v: Rank refused for rule %v (%v), the reference finds rule %v leaves nothing", i, req, cfg, r, err, ref)
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("case %d %+v %+v: Rank differs from the reference (-ref +got):\n%s", i, req, cfg, d)
		}
	}
}

func TestAppendRankReusesDst(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	cat := NewCatalog(fixtureCatalog())
	req, _ := PodRequirements(simple("1", "1Gi"), Config{})
	dst := make([]Candidate, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = cat.AppendRank(dst[:0], req, nil, Config{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendRank allocates %v times per call, want 0", allocs)
	}
}

func TestUnavailable(t *testing.T) {
	now := time.Unix(1000, 0)
	u := NewUnavailable(0, func() time.Time { return now })
	od := pluginapi.CapacityOnDemand
	if u.Contains("m5.large", zA, od) {
		t.Fatal("empty set contains an offering")
	}
	u.Mark("m5.large", zA, od)
	u.Mark("c5.large", "", pluginapi.CapacitySpot)
	for _, c := range []struct {
		typ, zone string
		ct        pluginapi.CapacityType
		want      bool
	}{
		{"m5.large", zA, od, true},
		{"m5.large", zB, od, false},
		{"m5.large", zA, pluginapi.CapacitySpot, false},
		{"c5.large", zA, pluginapi.CapacitySpot, true},
		{"c5.large", zB, pluginapi.CapacitySpot, true},
		{"c5.large", zB, od, false},
	} {
		if got := u.Contains(c.typ, c.zone, c.ct); got != c.want {
			t.Errorf("Contains(%s, %s, %s) = %v, want %v", c.typ, c.zone, c.ct, got, c.want)
		}
	}
	now = now.Add(DefaultUnavailableTTL - time.Second)
	if !u.Contains("m5.large", zA, od) || u.Len() != 2 {
		t.Errorf("mark expired early")
	}
	u.Mark("m5.large", zA, od) // extends
	now = now.Add(2 * time.Second)
	if !u.Contains("m5.large", zA, od) || u.Contains("c5.large", zA, pluginapi.CapacitySpot) || u.Len() != 1 {
		t.Errorf("after the TTL: m5.large %v, c5.large %v, len %d", u.Contains("m5.large", zA, od), u.Contains("c5.large", zA, pluginapi.CapacitySpot), u.Len())
	}

	// Used by Rank.
	cat := NewCatalog(fixtureCatalog())
	req, _ := PodRequirements(simple("1", "3Gi", withAnn(AnnotationInstanceType, "c5.large")), Config{})
	u.Mark("c5.large", zA, od)
	cs, err := cat.Rank(req, u.Contains, Config{})
	if err != nil || len(cs) != 1 || cs[0].Zone != zB {
		t.Errorf("Rank with c5.large/us-east-1a marked = %v, %v", short(cs), err)
	}
}

func TestUnavailableConcurrent(t *testing.T) {
	u := NewUnavailable(time.Minute, nil)
	cat := NewCatalog(fixtureCatalog())
	req, _ := PodRequirements(simple("1", "1Gi"), Config{})
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				if g%2 == 0 {
					u.Mark(fmt.Sprintf("t%d", i%10), zA, pluginapi.CapacitySpot)
				} else if _, err := cat.Rank(req, u.Contains, Config{}); err != nil {
					t.Error(err)
				}
				_ = u.Len()
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestNewCatalogOddities(t *testing.T) {
	types := []pluginapi.InstanceType{
		it("a.large", 2, 4*gib, amd, []pluginapi.Offering{
			{Zone: zA, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: -1, PriceKnown: true, Available: true},
			{Zone: zB, CapacityType: "reserved", HourlyPrice: 0.01, PriceKnown: true, Available: true},
			{Zone: zB, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.2, PriceKnown: true, Available: false},
		}),
		it("a.large", 64, 512*gib, amd, both(od, 0.001)), // duplicate name: dropped
		it("b.large", 2, 4*gib, amd, []pluginapi.Offering{od(zB, 0.3)}),
	}
	cat := NewCatalog(types)
	req := Requirements{MilliCPU: 1000, CapacityTypes: onDemand}
	cs, err := cat.Rank(req, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b.large/us-east-1b/on-demand", "a.large/us-east-1a/on-demand"}
	if d := cmp.Diff(want, short(cs)); d != "" || cs[1].PriceKnown {
		t.Errorf("ranking (-want +got):\n%s\n%+v", d, cs)
	}
	if cat.Len() != 2 {
		t.Errorf("Len = %d, want 2", cat.Len())
	}
	// A negative baseline is no baseline: no credits, no surcharge.
	neg := []pluginapi.InstanceType{burst(it("n.large", 2, 4*gib, amd, both(od, 0.1)), -1)}
	cs, err = NewCatalog(neg).Rank(req, nil, Config{BurstablePolicy: BurstableUnlimited})
	if err != nil || len(cs) != 2 || cs[0].UnlimitedCredits || cs[0].HourlyPrice != 0.1 {
		t.Errorf("negative baseline: %+v, %v; want n.large at its own price without unlimited credits", cs, err)
	}
	if _, err := NewCatalog(nil).Rank(req, nil, Config{}); err == nil || err.Error() != "the cloud plugin's catalog has no instance types" {
		t.Errorf("empty catalog: %v", err)
	}
	// The one offering of the named type in us-east-1b is unavailable.
	req.InstanceTypes = []NamePattern{{Pattern: "a.large"}}
	req.Zones = []string{zB}
	if _, err := cat.Rank(req, nil, Config{}); err == nil || err.Error() != "every offering that fits the pod is unavailable in the cloud now (1 offerings, such as a.large on-demand in us-east-1b)" {
		t.Errorf("unavailable in the catalog: %v", err)
	}
}
