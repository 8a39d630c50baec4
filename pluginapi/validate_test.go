package pluginapi

import (
	"math"
	"strings"
	"testing"
)

func validType() InstanceType {
	return InstanceType{
		Name: "m5.large", MilliCPU: 2000, MemoryBytes: 8 << 30, Arch: ArchAMD64,
		Offerings: []Offering{
			{Zone: "a", CapacityType: CapacityOnDemand, HourlyPrice: 0.096, PriceKnown: true, Available: true},
			{Zone: "a", CapacityType: CapacitySpot, Available: true},
		},
	}
}

func TestValidateInstanceTypes(t *testing.T) {
	tests := []struct {
		name   string
		change func([]InstanceType) []InstanceType
		want   string // substring of the error; "" means valid
	}{
		{name: "valid", change: func(ts []InstanceType) []InstanceType { return ts }},
		{name: "empty catalog", change: func([]InstanceType) []InstanceType { return nil }},
		{name: "unknown price may be negative garbage", change: func(ts []InstanceType) []InstanceType {
			ts[0].Offerings[1].HourlyPrice = -1
			return ts
		}},
		{name: "negative memory", want: "memory -1 is not positive", change: func(ts []InstanceType) []InstanceType {
			ts[0].MemoryBytes = -1
			return ts
		}},
		{name: "percent in the name", want: `instance type 0 ("weird%dname"): memory -1 is not positive`, change: func(ts []InstanceType) []InstanceType {
			ts[0].Name = "weird%dname"
			ts[0].MemoryBytes = -1
			return ts
		}},
		{name: "zero CPU", want: "milli-CPU 0 is not positive", change: func(ts []InstanceType) []InstanceType {
			ts[0].MilliCPU = 0
			return ts
		}},
		{name: "duplicate names", want: `instance type 1 ("m5.large"): duplicate name`, change: func(ts []InstanceType) []InstanceType {
			return append(ts, validType())
		}},
		{name: "empty name", want: "name is empty", change: func(ts []InstanceType) []InstanceType {
			ts[0].Name = ""
			return ts
		}},
		{name: "negative GPU", want: "GPU count -1", change: func(ts []InstanceType) []InstanceType {
			ts[0].GPU.Count = -1
			return ts
		}},
		{name: "negative disk", want: "local disk -5 is negative", change: func(ts []InstanceType) []InstanceType {
			ts[0].LocalDiskBytes = -5
			return ts
		}},
		{name: "baseline above CPU", want: "burstable baseline 3000 is outside 0..2000", change: func(ts []InstanceType) []InstanceType {
			ts[0].BurstableBaselineMilliCPU = 3000
			return ts
		}},
		{name: "no arch", want: "arch is empty", change: func(ts []InstanceType) []InstanceType {
			ts[0].Arch = ""
			return ts
		}},
		{name: "unknown capacity type", want: `capacity type "reserved"`, change: func(ts []InstanceType) []InstanceType {
			ts[0].Offerings[0].CapacityType = "reserved"
			return ts
		}},
		{name: "negative price", want: "price -0.5", change: func(ts []InstanceType) []InstanceType {
			ts[0].Offerings[0].HourlyPrice = -0.5
			return ts
		}},
		{name: "NaN price", want: "price NaN", change: func(ts []InstanceType) []InstanceType {
			ts[0].Offerings[0].HourlyPrice = math.NaN()
			return ts
		}},
		{name: "infinite price", want: "price +Inf", change: func(ts []InstanceType) []InstanceType {
			ts[0].Offerings[0].HourlyPrice = math.Inf(1)
			return ts
		}},
		{name: "duplicate offering", want: "duplicate offering a/on-demand", change: func(ts []InstanceType) []InstanceType {
			ts[0].Offerings = append(ts[0].Offerings, ts[0].Offerings[0])
			return ts
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			types := tt.change([]InstanceType{validType()})
			err := ValidateInstanceTypes(types)
			checkProblem(t, "ValidateInstanceTypes", err, tt.want)
		})
	}
}

func TestValidateInstance(t *testing.T) {
	valid := func() Instance {
		return Instance{ID: "i-1", CellID: "c-1", State: StateRunning,
			Addresses: []Address{{Type: AddressPrivate, Address: "10.0.0.1"}}}
	}
	tests := []struct {
		name   string
		change func(*Instance)
		want   string
	}{
		{name: "valid", change: func(*Instance) {}},
		{name: "without ID", want: "instance has no ID", change: func(i *Instance) { i.ID = "" }},
		{name: "without cell ID", want: `instance "i-1" has no cell ID`, change: func(i *Instance) { i.CellID = "" }},
		{name: "unknown state", want: `unknown state "booting"`, change: func(i *Instance) { i.State = "booting" }},
		{name: "empty state", want: `unknown state ""`, change: func(i *Instance) { i.State = "" }},
		{name: "blank address", want: "empty private address", change: func(i *Instance) { i.Addresses[0].Address = " " }},
		{name: "pod address", change: func(i *Instance) { i.Addresses = append(i.Addresses, Address{Type: AddressPod, Address: "10.0.0.2"}) }},
		{name: "pod address not IPv4", want: `pod address "fd00::2", want an IPv4 address`, change: func(i *Instance) {
			i.Addresses = append(i.Addresses, Address{Type: AddressPod, Address: "fd00::2"})
		}},
		{name: "pod address is the instance's", want: "its private address 10.0.0.1 as its pod address", change: func(i *Instance) {
			i.Addresses = append(i.Addresses, Address{Type: AddressPod, Address: "10.0.0.1"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := valid()
			tt.change(&inst)
			checkProblem(t, "ValidateInstance", ValidateInstance(&inst), tt.want)
		})
	}
}

func TestValidateInstancesRejectsDuplicates(t *testing.T) {
	inst := Instance{ID: "i-1", CellID: "c-1", State: StatePending}
	checkProblem(t, "validateInstances", validateInstances([]Instance{inst, inst}), `instance "i-1" appears twice`)
	checkProblem(t, "validateInstances", validateInstances([]Instance{inst}), "")
}

func TestValidateInfo(t *testing.T) {
	tests := []struct {
		name string
		info GetInfoResponse
		want string
	}{
		{name: "valid", info: GetInfoResponse{Name: "aws", Version: "1.0.0", APIVersions: []string{"1.0"}}},
		{name: "no name", want: "name is empty", info: GetInfoResponse{Version: "1", APIVersions: []string{"1.0"}}},
		{name: "no version", want: "version is empty", info: GetInfoResponse{Name: "x", APIVersions: []string{"1.0"}}},
		{name: "only a future major", want: `API versions ["2.0"] include none of major 1`, info: GetInfoResponse{Name: "x", Version: "1", APIVersions: []string{"2.0"}}},
		{name: "no API versions", want: "include none of major 1", info: GetInfoResponse{Name: "x", Version: "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblem(t, "ValidateInfo", ValidateInfo(&tt.info), tt.want)
		})
	}
}

func TestCompatibleAPIVersion(t *testing.T) {
	tests := []struct {
		versions []string
		want     string
		ok       bool
	}{
		{versions: []string{"1.0"}, want: "1.0", ok: true},
		{versions: []string{"1.9", "1.10", "2.0"}, want: "1.10", ok: true},
		{versions: []string{"2.0", "0.9", "v1", "1"}, ok: false},
		{versions: nil, ok: false},
	}
	for _, tt := range tests {
		got, ok := CompatibleAPIVersion(tt.versions)
		if got != tt.want || ok != tt.ok {
			t.Errorf("CompatibleAPIVersion(%q) = %q, %v; want %q, %v", tt.versions, got, ok, tt.want, tt.ok)
		}
	}
}

func TestInvalidAnswerNamesTheCall(t *testing.T) {
	err := invalidAnswer("Launch", ValidateInstance(&Instance{CellID: "c", State: StatePending}))
	if !IsInvalidAnswer(err) || !strings.Contains(err.Error(), "invalid answer to Launch: instance has no ID") {
		t.Errorf("invalidAnswer = %v, want an InvalidAnswerError naming Launch and the problem", err)
	}
	if invalidAnswer("Launch", nil) != nil {
		t.Error("invalidAnswer of nil is not nil")
	}
}

// checkProblem checks that err is nil when want is "", and otherwise names
// the problem want.
func checkProblem(t *testing.T, call string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s = %v, want valid", call, err)
	case want != "" && err == nil:
		t.Errorf("%s accepted the answer, want an error containing %q", call, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s = %q, want it to contain %q", call, err, want)
	}
}
