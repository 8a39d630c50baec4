package match

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/pluginapi"
)

// rl builds a ResourceList from name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

type podOpt func(*corev1.Pod)

func withInit(c ...corev1.Container) podOpt {
	return func(p *corev1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, c...) }
}

func withAnn(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func withSel(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func mkPod(containers []corev1.Container, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: containers}}
	p.Name, p.Namespace = "p", "default"
	for _, o := range opts {
		o(p)
	}
	return p
}

// simple is a pod of one container requesting cpu and memory.
func simple(cpu, mem string, opts ...podOpt) *corev1.Pod {
	return mkPod([]corev1.Container{ctr("app", rl("cpu", cpu, "memory", mem), nil)}, opts...)
}

var onDemand = []pluginapi.CapacityType{pluginapi.CapacityOnDemand}

const defaultCTSource = "config defaultCapacityType"

func TestPodRequirements(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	base := func(cpu, mem int64) Requirements {
		return Requirements{MilliCPU: cpu, MemoryBytes: mem, CapacityTypes: onDemand, CapacityTypeSource: defaultCTSource}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		cfg  Config
		want func(r *Requirements)
		base Requirements
	}{{
		name: "sum of app containers",
		pod:  mkPod([]corev1.Container{ctr("a", rl("cpu", "500m", "memory", "512Mi"), nil), ctr("b", rl("cpu", "1", "memory", "1Gi"), nil)}),
		base: base(1500, 1536*mib),
	}, {
		// Elotl Kip ignored init containers.
		name: "init container larger than the app containers",
		pod: mkPod([]corev1.Container{ctr("app", rl("cpu", "500m", "memory", "512Mi"), nil)},
			withInit(ctr("migrate", rl("cpu", "2", "memory", "3Gi"), nil), ctr("small", rl("cpu", "100m"), nil))),
		base: base(2000, 3*gib),
	}, {
		name: "app larger than init per resource",
		pod: mkPod([]corev1.Container{ctr("app", rl("cpu", "4", "memory", "512Mi"), nil)},
			withInit(ctr("init", rl("cpu", "1", "memory", "2Gi"), nil))),
		base: base(4000, 2*gib),
	}, {
		name: "sidecar adds to the app and to later init containers",
		pod: func() *corev1.Pod {
			side := ctr("proxy", rl("cpu", "250m", "memory", "256Mi"), nil)
			side.RestartPolicy = &always
			return mkPod([]corev1.Container{ctr("app", rl("cpu", "500m", "memory", "256Mi"), nil)},
				withInit(side, ctr("init", rl("cpu", "1", "memory", "128Mi"), nil)))
		}(),
		base: base(1250, 512*mib),
	}, {
		// Elotl Kip let limits win over requests.
		name: "requests win over limits",
		pod:  mkPod([]corev1.Container{ctr("app", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "4", "memory", "8Gi"))}),
		base: base(1000, gib),
	}, {
		name: "limit stands in for a missing request",
		pod:  mkPod([]corev1.Container{ctr("app", rl("cpu", "1"), rl("cpu", "4", "memory", "8Gi"))}),
		base: base(1000, 8*gib),
	}, {
		name: "IgnoreLimits",
		pod:  mkPod([]corev1.Container{ctr("app", rl("cpu", "1"), rl("cpu", "4", "memory", "8Gi"))}),
		cfg:  Config{IgnoreLimits: true},
		base: base(1000, 0),
	}, {
		name: "overhead and agent reserve",
		pod: func() *corev1.Pod {
			p := simple("1", "1Gi")
			p.Spec.Overhead = rl("cpu", "250m", "memory", "120Mi")
			return p
		}(),
		cfg:  DefaultConfig(),
		base: Requirements{MilliCPU: 1350, MemoryBytes: gib + 376*mib, ReserveMilliCPU: 100, ReserveMemoryBytes: 256 * mib, CapacityTypes: onDemand, CapacityTypeSource: defaultCTSource},
	}, {
		name: "pod-level resources",
		pod: func() *corev1.Pod {
			p := simple("1", "1Gi")
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3")}
			return p
		}(),
		base: base(3000, gib),
	}, {
		name: "GPU count from limits, kind from annotation",
		pod:  mkPod([]corev1.Container{ctr("app", rl("cpu", "1"), rl("nvidia.com/gpu", "4"))}, withAnn(AnnotationGPUKind, "A100")),
		base: base(1000, 0),
		want: func(r *Requirements) {
			r.GPUCount, r.GPUResource, r.GPUKind, r.GPUKindSource = 4, "nvidia.com/gpu", "a100", "annotation "+AnnotationGPUKind
		},
	}, {
		name: "GPU kind from node selector",
		pod:  mkPod([]corev1.Container{ctr("app", nil, rl("nvidia.com/gpu", "1"))}, withSel(LabelGPUKind, "t4")),
		base: base(0, 0),
		want: func(r *Requirements) {
			r.GPUCount, r.GPUResource, r.GPUKind, r.GPUKindSource = 1, "nvidia.com/gpu", "t4", "nodeSelector "+LabelGPUKind
		},
	}, {
		name: "GPU kind from GKE and Elotl node selectors agree",
		pod: mkPod([]corev1.Container{ctr("app", nil, rl("nvidia.com/gpu", "1"))},
			withSel(LabelGKEAccelerator, "nvidia-tesla-t4", "node.elotl.co/gpu-nvidia-tesla-t4", "true")),
		base: base(0, 0),
		want: func(r *Requirements) {
			r.GPUCount, r.GPUResource, r.GPUKind, r.GPUKindSource = 1, "nvidia.com/gpu", "t4", "nodeSelector "+LabelGKEAccelerator
		},
	}, {
		name: "extended resources: GPU, ignored and other",
		pod:  mkPod([]corev1.Container{ctr("app", rl("amd.com/gpu", "2", "example.com/fpga", "1", "smarter-devices/fuse", "1"), nil)}),
		cfg:  Config{IgnoredResources: []string{"smarter-devices/fuse"}},
		base: base(0, 0),
		want: func(r *Requirements) {
			r.GPUCount, r.GPUResource, r.Extended = 2, "amd.com/gpu", map[string]int64{"example.com/fpga": 1}
		},
	}, {
		name: "hugepages and ephemeral storage are not extended resources",
		pod:  mkPod([]corev1.Container{ctr("app", rl("hugepages-2Mi", "64Mi", "ephemeral-storage", "10Gi"), nil)}),
		base: base(0, 0),
	}, {
		name: "arch and zone",
		pod:  simple("1", "1Gi", withSel(corev1.LabelArchStable, "arm64", corev1.LabelTopologyZone, zA)),
		base: base(1000, gib),
		want: func(r *Requirements) {
			r.Arch, r.ArchSource = arm, "nodeSelector "+corev1.LabelArchStable
			r.Zones, r.ZoneSource = []string{zA}, "nodeSelector "+corev1.LabelTopologyZone
		},
	}, {
		name: "default arch when the pod names none",
		pod:  simple("1", "1Gi"),
		cfg:  Config{DefaultArch: pluginapi.ArchAMD64},
		base: base(1000, gib),
		want: func(r *Requirements) { r.Arch, r.ArchSource = pluginapi.ArchAMD64, "the default architecture" },
	}, {
		name: "the pod's arch wins over the default",
		pod:  simple("1", "1Gi", withSel(corev1.LabelArchStable, "arm64")),
		cfg:  Config{DefaultArch: pluginapi.ArchAMD64},
		base: base(1000, gib),
		want: func(r *Requirements) { r.Arch, r.ArchSource = arm, "nodeSelector "+corev1.LabelArchStable },
	}, {
		name: "spot by annotation, no fallback by default",
		pod:  simple("1", "1Gi", withAnn(AnnotationCapacityType, "spot")),
		base: base(1000, gib),
		want: func(r *Requirements) {
			r.CapacityTypes, r.CapacityTypeSource = []pluginapi.CapacityType{pluginapi.CapacitySpot}, "annotation "+AnnotationCapacityType
		},
	}, {
		name: "spot by node selector with fallback annotation",
		pod:  simple("1", "1Gi", withSel(LabelCapacityType, "spot"), withAnn(AnnotationSpotFallback, "true")),
		base: base(1000, gib),
		want: func(r *Requirements) {
			r.CapacityTypes = []pluginapi.CapacityType{pluginapi.CapacitySpot, pluginapi.CapacityOnDemand}
			r.CapacityTypeSource = "nodeSelector " + LabelCapacityType
		},
	}, {
		name: "default spot with fallback from config, annotation refuses it",
		pod:  simple("1", "1Gi", withAnn(AnnotationSpotFallback, "false")),
		cfg:  Config{DefaultCapacityType: pluginapi.CapacitySpot, SpotFallback: true},
		base: base(1000, gib),
		want: func(r *Requirements) {
			r.CapacityTypes = []pluginapi.CapacityType{pluginapi.CapacitySpot}
		},
	}, {
		name: "Karpenter capacity-type label",
		pod:  simple("1", "1Gi", withSel(LabelKarpenterCapacityType, "on-demand")),
		base: base(1000, gib),
		want: func(r *Requirements) { r.CapacityTypeSource = "nodeSelector " + LabelKarpenterCapacityType },
	}, {
		name: "Elotl launch type and instance type",
		pod:  simple("1", "1Gi", withAnn(AnnotationElotlLaunchType, "spot", AnnotationElotlInstanceType, "c5.*")),
		base: base(1000, gib),
		want: func(r *Requirements) {
			r.CapacityTypes, r.CapacityTypeSource = []pluginapi.CapacityType{pluginapi.CapacitySpot}, "annotation "+AnnotationElotlLaunchType
			r.InstanceTypes = []NamePattern{{"c5.*", "annotation " + AnnotationElotlInstanceType}}
		},
	}, {
		name: "instance type annotation and node selector both kept",
		pod:  simple("1", "1Gi", withAnn(AnnotationInstanceType, "m5.*"), withSel(corev1.LabelInstanceTypeStable, "m5.large")),
		base: base(1000, gib),
		want: func(r *Requirements) {
			r.InstanceTypes = []NamePattern{{"m5.*", "annotation " + AnnotationInstanceType}, {"m5.large", "nodeSelector " + corev1.LabelInstanceTypeStable}}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.base
			if tt.want != nil {
				tt.want(&want)
			}
			got, err := PodRequirements(tt.pod, tt.cfg)
			if err != nil {
				t.Fatalf("PodRequirements: %v", err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Requirements (-want +got):\n%s", d)
			}
		})
	}
}

func TestPodRequirementsRefused(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		cfg  Config
		want string
	}{{
		name: "bad capacity-type annotation",
		pod:  simple("1", "1Gi", withAnn(AnnotationCapacityType, "preemptible")),
		want: `annotation kipcell.io/capacity-type: "preemptible" is not a capacity type: want "spot" or "on-demand"`,
	}, {
		name: "conflicting capacity types",
		pod:  simple("1", "1Gi", withAnn(AnnotationCapacityType, "spot"), withSel(LabelCapacityType, "on-demand")),
		want: `conflicting capacity type: annotation kipcell.io/capacity-type says "spot", nodeSelector kipcell.io/capacity-type says "on-demand"`,
	}, {
		name: "Elotl dedicated launch type",
		pod:  simple("1", "1Gi", withAnn(AnnotationElotlLaunchType, "dedicated")),
		want: "annotation pod.elotl.co/launch-type: dedicated tenancy is not supported",
	}, {
		name: "bad spot-fallback",
		pod:  simple("1", "1Gi", withAnn(AnnotationCapacityType, "spot", AnnotationSpotFallback, "maybe")),
		want: `annotation kipcell.io/spot-fallback: "maybe" is not true or false`,
	}, {
		name: "bad glob",
		pod:  simple("1", "1Gi", withAnn(AnnotationInstanceType, "c5.[")),
		want: `annotation kipcell.io/instance-type: "c5.[" is not an instance type or a valid glob: syntax error in pattern`,
	}, {
		name: "conflicting GPU kinds",
		pod:  simple("1", "1Gi", withAnn(AnnotationGPUKind, "t4"), withSel(LabelGPUKind, "a100")),
		want: `conflicting GPU kind: annotation kipcell.io/gpu-kind says "t4", nodeSelector kipcell.io/gpu-kind says "a100"`,
	}, {
		name: "conflicting zones",
		pod:  simple("1", "1Gi", withSel(corev1.LabelTopologyZone, zA, corev1.LabelFailureDomainBetaZone, zB)),
		want: `conflicting zone: nodeSelector topology.kubernetes.io/zone says "us-east-1a", nodeSelector failure-domain.beta.kubernetes.io/zone says "us-east-1b"`,
	}, {
		name: "two GPU vendors",
		pod:  mkPod([]corev1.Container{ctr("a", rl("nvidia.com/gpu", "1"), nil), ctr("b", rl("amd.com/gpu", "1"), nil)}),
		want: "the pod asks for both amd.com/gpu and nvidia.com/gpu; an instance has one kind of GPU",
	}, {
		name: "negative request",
		pod:  simple("-1", "1Gi"),
		want: `container "app" asks for cpu -1: a negative quantity`,
	}, {
		name: "absurd request",
		pod:  simple("1", "1e30"),
		want: `container "app" asks for memory 1e30, more than any instance offers`,
	}, {
		name: "nil pod",
		want: "no pod",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PodRequirements(tt.pod, tt.cfg)
			if !IsUnsatisfiable(err) {
				t.Fatalf("err = %v, want an UnsatisfiableError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("err = %q\nwant  %q", err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	for _, c := range []Config{
		{BurstablePolicy: "sometimes"}, {UnknownPrice: "guess"}, {DefaultCapacityType: "reserved"},
		{AgentReserveMilliCPU: -1}, {SurplusCreditPricePerVCPUHour: -0.1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
		if _, err := PodRequirements(simple("1", "1Gi"), c); err == nil || IsUnsatisfiable(err) {
			t.Errorf("PodRequirements with %+v: err = %v, want a config error", c, err)
		}
	}
}

// A further zone constraint narrows the pod's zones, and one that leaves
// none says both sources.
func TestConstrainZones(t *testing.T) {
	tests := []struct {
		name       string
		pod        []string
		zones      []string
		want       []string
		wantSource string
		wantErr    string
	}{
		{name: "no constraint", pod: []string{"a"}, want: []string{"a"}, wantSource: "nodeSelector"},
		{name: "the pod asks none", zones: []string{"b", "c"}, want: []string{"b", "c"}, wantSource: "PV x"},
		{name: "both", pod: []string{"a", "b"}, zones: []string{"b", "c"}, want: []string{"b"}, wantSource: "nodeSelector and PV x"},
		{name: "disjoint", pod: []string{"a"}, zones: []string{"c"}, wantErr: "no zone satisfies both nodeSelector (a) and PV x (c)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Requirements{Zones: tt.pod}
			if len(tt.pod) > 0 {
				req.ZoneSource = "nodeSelector"
			}
			got, err := req.ConstrainZones(tt.zones, "PV x")
			if tt.wantErr != "" {
				if !IsUnsatisfiable(err) || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want unsatisfiable %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got.Zones, tt.want) || got.ZoneSource != tt.wantSource {
				t.Errorf("got %v (%q), %v; want %v (%q)", got.Zones, got.ZoneSource, err, tt.want, tt.wantSource)
			}
		})
	}
}
