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
		{name: "volumes with drivers", info: GetInfoResponse{
			Name: "x", Version: "1", APIVersions: []string{"1.2"},
			Capabilities: []Capability{CapabilityVolumes}, VolumeDrivers: []string{"ebs.csi.aws.com"},
		}},
		{name: "volumes without drivers", want: `capability "volumes" without volume drivers`, info: GetInfoResponse{
			Name: "x", Version: "1", APIVersions: []string{"1.2"}, Capabilities: []Capability{CapabilityVolumes},
		}},
		{name: "drivers without volumes", want: `volume drivers ["ebs.csi.aws.com"] without capability "volumes"`, info: GetInfoResponse{
			Name: "x", Version: "1", APIVersions: []string{"1.2"}, VolumeDrivers: []string{"ebs.csi.aws.com"},
		}},
		{name: "an empty driver", want: "a volume driver is empty", info: GetInfoResponse{
			Name: "x", Version: "1", APIVersions: []string{"1.2"},
			Capabilities: []Capability{CapabilityVolumes}, VolumeDrivers: []string{"ebs.csi.aws.com", ""},
		}},
		{name: "a driver twice", want: `volume driver "ebs.csi.aws.com" is listed twice`, info: GetInfoResponse{
			Name: "x", Version: "1", APIVersions: []string{"1.2"},
			Capabilities: []Capability{CapabilityVolumes}, VolumeDrivers: []string{"ebs.csi.aws.com", "ebs.csi.aws.com"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblem(t, "ValidateInfo", ValidateInfo(&tt.info), tt.want)
		})
	}
}

func TestValidateAttachAnswer(t *testing.T) {
	req := &AttachVolumeRequest{InstanceID: "i-1", Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}
	valid := func() VolumeAttachment {
		return VolumeAttachment{InstanceID: "i-1", Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1", State: AttachmentAttaching}
	}
	tests := []struct {
		name   string
		change func(*VolumeAttachment)
		want   string // substring of the error; "" means valid
	}{
		{name: "attaching", change: func(*VolumeAttachment) {}},
		{name: "attaching with a device", change: func(a *VolumeAttachment) { a.Device.Path = "/dev/xvdf" }},
		{name: "attached with a serial", change: func(a *VolumeAttachment) {
			a.State, a.Device.Serial = AttachmentAttached, "vol1"
		}},
		{name: "attached with a path", change: func(a *VolumeAttachment) {
			a.State, a.Device.Path = AttachmentAttached, "/dev/disk/by-id/google-d"
		}},
		{name: "attached without a device", want: `volume "vol-1" is attached to instance "i-1" without a device serial or path`, change: func(a *VolumeAttachment) {
			a.State = AttachmentAttached
		}},
		{name: "detaching", want: "is detaching after AttachVolume; want attaching or attached", change: func(a *VolumeAttachment) {
			a.State = AttachmentDetaching
		}},
		{name: "unknown state", want: `unknown state "mounted"`, change: func(a *VolumeAttachment) { a.State = "mounted" }},
		{name: "no state", want: `unknown state ""`, change: func(a *VolumeAttachment) { a.State = "" }},
		{name: "empty answer", want: "has no instance ID", change: func(a *VolumeAttachment) { *a = VolumeAttachment{} }},
		{name: "no driver", want: "has no driver", change: func(a *VolumeAttachment) { a.Driver = "" }},
		{name: "no handle", want: `attachment to instance "i-1" has no volume handle`, change: func(a *VolumeAttachment) { a.VolumeHandle = "" }},
		{name: "another instance", want: `to instance "i-2", not the requested ebs.csi.aws.com volume "vol-1" to "i-1"`, change: func(a *VolumeAttachment) {
			a.InstanceID = "i-2"
		}},
		{name: "another volume", want: `volume "vol-2" to instance "i-1", not the requested`, change: func(a *VolumeAttachment) {
			a.VolumeHandle = "vol-2"
		}},
		{name: "another driver", want: `answered the attachment of other.csi volume "vol-1"`, change: func(a *VolumeAttachment) {
			a.Driver = "other.csi"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := valid()
			tt.change(&a)
			checkProblem(t, "validateAttachAnswer", validateAttachAnswer(req, &a), tt.want)
		})
	}
}

func TestValidateAttachments(t *testing.T) {
	att := func(instance, handle string, state AttachmentState) VolumeAttachment {
		a := VolumeAttachment{InstanceID: instance, Driver: "d", VolumeHandle: handle, State: state}
		if state == AttachmentAttached {
			a.Device.Serial = handle
		}
		return a
	}
	asked := []string{"i-1", "i-2"}
	tests := []struct {
		name string
		as   []VolumeAttachment
		want string
	}{
		{name: "none"},
		{name: "every state", as: []VolumeAttachment{
			att("i-1", "v-1", AttachmentAttaching), att("i-1", "v-2", AttachmentAttached), att("i-2", "v-3", AttachmentDetaching),
		}},
		{name: "an instance not asked for", want: `instance "i-3" of volume "v-1" was not asked for`, as: []VolumeAttachment{
			att("i-3", "v-1", AttachmentAttached),
		}},
		{name: "a volume twice on one instance", want: `volume "v-1" appears twice on instance "i-1"`, as: []VolumeAttachment{
			att("i-1", "v-1", AttachmentAttached), att("i-1", "v-1", AttachmentDetaching),
		}},
		{name: "unknown state", want: `unknown state "gone"`, as: []VolumeAttachment{att("i-1", "v-1", "gone")}},
		{name: "attached without a device", want: "without a device serial or path", as: []VolumeAttachment{
			{InstanceID: "i-1", Driver: "d", VolumeHandle: "v-1", State: AttachmentAttached},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblem(t, "validateAttachments", validateAttachments(asked, tt.as), tt.want)
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
