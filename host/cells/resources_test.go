package cells

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

func TestExtendedResources(t *testing.T) {
	cpuOnly := []pluginapi.InstanceType{{Name: "c", MilliCPU: 2000, MemoryBytes: 4 << 30, Arch: pluginapi.ArchAMD64,
		Offerings: []pluginapi.Offering{{Zone: "z", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.1, PriceKnown: true, Available: true}}}}
	withGPU := append(append([]pluginapi.InstanceType(nil), cpuOnly...), pluginapi.InstanceType{Name: "g", MilliCPU: 4000, MemoryBytes: 16 << 30,
		Arch: pluginapi.ArchAMD64, GPU: pluginapi.GPU{Count: 1, Kind: "t4"},
		Offerings: []pluginapi.Offering{{Zone: "z", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.5, PriceKnown: true, Available: true}}})
	tests := []struct {
		name  string
		types []pluginapi.InstanceType
		want  []corev1.ResourceName
	}{
		{"no GPU type", cpuOnly, nil},
		{"a GPU type", withGPU, []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, pluginfake.WithInstanceTypes(tt.types))
			got, err := h.m.ExtendedResources(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExtendedResources (-want +got):\n%s", diff)
			}
		})
	}
}
