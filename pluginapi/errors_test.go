package pluginapi

import "testing"

func TestQuotaCovers(t *testing.T) {
	tests := []struct {
		name   string
		quota  *QuotaExceededError
		typ    string
		ct     CapacityType
		want   bool
		scoped bool
	}{
		{"unscoped covers all", &QuotaExceededError{}, "c5.large", CapacitySpot, true, false},
		{"spot quota, spot offering", &QuotaExceededError{CapacityType: CapacitySpot}, "c5.large", CapacitySpot, true, true},
		{"spot quota, on-demand offering", &QuotaExceededError{CapacityType: CapacitySpot}, "c5.large", CapacityOnDemand, false, true},
		{"types listed, type in", &QuotaExceededError{InstanceTypes: []string{"c5.large"}, CapacityType: CapacityOnDemand}, "c5.large", CapacityOnDemand, true, true},
		{"types listed, type out", &QuotaExceededError{InstanceTypes: []string{"c5.large"}, CapacityType: CapacityOnDemand}, "p3.2xlarge", CapacityOnDemand, false, true},
		{"types listed, other capacity", &QuotaExceededError{InstanceTypes: []string{"c5.large"}, CapacityType: CapacityOnDemand}, "c5.large", CapacitySpot, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.quota.Covers(tt.typ, tt.ct); got != tt.want {
				t.Errorf("Covers(%s, %s) = %v, want %v", tt.typ, tt.ct, got, tt.want)
			}
			if got := tt.quota.Scoped(); got != tt.scoped {
				t.Errorf("Scoped() = %v, want %v", got, tt.scoped)
			}
		})
	}
}
