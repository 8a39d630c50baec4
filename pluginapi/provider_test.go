package pluginapi

import (
	"errors"
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

func TestCheckVolumeDriver(t *testing.T) {
	withVolumes := GetInfoResponse{Name: "aws", Capabilities: []Capability{CapabilityVolumes}, VolumeDrivers: []string{"ebs.csi.aws.com"}}
	tests := []struct {
		name      string
		info      GetInfoResponse
		driver    string
		wantErr   bool
		wantField string
	}{
		{name: "a listed driver", info: withVolumes, driver: "ebs.csi.aws.com"},
		{name: "another driver", info: withVolumes, driver: "efs.csi.aws.com", wantErr: true, wantField: FieldVolumeDriver},
		{name: "no driver", info: withVolumes, driver: "", wantErr: true, wantField: FieldVolumeDriver},
		{name: "no capability", info: GetInfoResponse{Name: "toy"}, driver: "ebs.csi.aws.com", wantErr: true},
		{name: "drivers without the capability", driver: "ebs.csi.aws.com", wantErr: true,
			info: GetInfoResponse{Name: "odd", VolumeDrivers: []string{"ebs.csi.aws.com"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.info.CheckVolumeDriver(tt.driver)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("CheckVolumeDriver(%q) = %v, want nil", tt.driver, err)
				}
				return
			}
			var u *UnsupportedError
			if !errors.As(err, &u) || u.Field != tt.wantField {
				t.Fatalf("CheckVolumeDriver(%q) = %v, want Unsupported with field %q", tt.driver, err, tt.wantField)
			}
		})
	}
}
