package pluginapi

import (
	"strings"
	"testing"
)

func TestLaunchRequestCapacity(t *testing.T) {
	tests := []struct {
		name    string
		req     LaunchRequest
		want    CapacityType
		wantErr string
	}{
		{"none named is on-demand", LaunchRequest{CellID: "c-1", InstanceType: "m5.large"}, CapacityOnDemand, ""},
		{"on-demand", LaunchRequest{CellID: "c-1", InstanceType: "m5.large", CapacityType: CapacityOnDemand}, CapacityOnDemand, ""},
		{"spot", LaunchRequest{CellID: "c-1", InstanceType: "m5.large", CapacityType: CapacitySpot}, CapacitySpot, ""},
		{"no cell ID", LaunchRequest{InstanceType: "m5.large"}, "", "no cell ID"},
		{"no instance type", LaunchRequest{CellID: "c-1"}, "", "no instance type"},
		{"unknown capacity", LaunchRequest{CellID: "c-1", InstanceType: "m5.large", CapacityType: "reserved"}, "", `capacity type "reserved" is neither on-demand nor spot`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.req.Capacity()
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Capacity() = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Capacity() = %q, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
}
