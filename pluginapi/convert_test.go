package pluginapi

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// overWire marshals and unmarshals m, as the gRPC wire does.
func overWire[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("marshalling %T: %v", m, err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(data, out); err != nil {
		t.Fatalf("unmarshalling %T: %v", m, err)
	}
	return out
}

// roundTrip checks that from(wire(to(in))) equals in, both with and without
// the protobuf encoding in between.
func roundTrip[G any, M proto.Message](t *testing.T, in G, to func(G) M, from func(M) G) {
	t.Helper()
	if got := from(to(in)); !reflect.DeepEqual(got, in) {
		t.Errorf("Go → proto → Go changed the value:\n got  %#v\n want %#v", got, in)
	}
	if got := from(overWire(t, to(in))); !reflect.DeepEqual(got, in) {
		t.Errorf("Go → proto → wire → Go changed the value:\n got  %#v\n want %#v", got, in)
	}
}

// at is a fixed UTC time; protobuf timestamps come back in UTC without a
// monotonic reading, so the originals use such times.
var at = time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)

func TestGetInfoRoundTrip(t *testing.T) {
	tests := map[string]GetInfoResponse{
		"zero": {},
		"full": {
			Name: "aws", Version: "1.2.3", APIVersions: []string{"1.0", "1.1"},
			Capabilities: []Capability{CapabilitySpot, "future-thing"},
			ConfigSchema: `{"type":"object"}`,
			Catalog:      CatalogInfo{Source: "pricing API", GeneratedAt: at},
		},
		"volumes": {
			Name: "aws", Version: "1.3.0", APIVersions: []string{"1.2"},
			Capabilities:  []Capability{CapabilityVolumes},
			VolumeDrivers: []string{"ebs.csi.aws.com", "efs.csi.aws.com"},
		},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, getInfoToProto, getInfoFromProto)
		})
	}
}

func TestConfigureRoundTrip(t *testing.T) {
	tests := map[string]ConfigureRequest{
		"zero": {},
		"full": {ClusterID: "c", NodeName: "n", Config: []byte(`{"region":"eu-west-1"}`)},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, configureToProto, configureFromProto)
		})
	}
}

func TestInstanceTypeRoundTrip(t *testing.T) {
	tests := map[string]InstanceType{
		"zero":                 {},
		"no GPU, no offerings": {Name: "m5.large", MilliCPU: 2000, MemoryBytes: 8 << 30, Arch: ArchAMD64},
		"full": {
			Name: "g5.xlarge", MilliCPU: 4000, MemoryBytes: 16 << 30, Arch: ArchARM64,
			GPU:                       GPU{Count: 1, Kind: "a10g", MemoryBytes: 24 << 30},
			BurstableBaselineMilliCPU: 800, LocalDiskBytes: 250 << 30,
			Offerings: []Offering{
				{Zone: "a", CapacityType: CapacityOnDemand, HourlyPrice: 1.006, PriceKnown: true, Available: true},
				{Zone: "b", CapacityType: CapacitySpot, PriceKnown: false, Available: true},
				{Zone: "c", CapacityType: CapacitySpot, HourlyPrice: 0, PriceKnown: true, Available: false},
			},
		},
		"GPU with only a kind": {Name: "x", GPU: GPU{Kind: "t4"}},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, instanceTypeToProto, func(m *pb.InstanceType) *InstanceType {
				out := instanceTypeFromProto(m)
				return &out
			})
		})
	}
}

// A known price of zero (free tier) and an unknown price must stay apart.
func TestUnknownPriceIsNotZeroPrice(t *testing.T) {
	in := InstanceType{Name: "t", Offerings: []Offering{
		{Zone: "a", CapacityType: CapacityOnDemand, HourlyPrice: 0, PriceKnown: true},
		{Zone: "b", CapacityType: CapacityOnDemand, PriceKnown: false},
	}}
	m := overWire(t, instanceTypeToProto(&in))
	if m.GetOfferings()[0].HourlyPrice == nil {
		t.Error("a known zero price went over the wire as no price")
	}
	if m.GetOfferings()[1].HourlyPrice != nil {
		t.Errorf("an unknown price went over the wire as %v", *m.GetOfferings()[1].HourlyPrice)
	}
	out := instanceTypeFromProto(m)
	if !out.Offerings[0].PriceKnown || out.Offerings[1].PriceKnown {
		t.Errorf("PriceKnown after the wire = %v, %v; want true, false", out.Offerings[0].PriceKnown, out.Offerings[1].PriceKnown)
	}
}

func TestLaunchRoundTrip(t *testing.T) {
	tests := map[string]LaunchRequest{
		"zero": {},
		"full": {
			CellID: "c-1", NodeName: "n", PodUID: "uid", PodNamespace: "ns", PodName: "p",
			InstanceType: "m5.large", CapacityType: CapacitySpot, Zones: []string{"a", "b"},
			Image: "ami-1", Bootstrap: []byte("#cloud-config\n"), Tags: map[string]string{"k": "v"},
			SecurityGroups: []string{"sg-1"}, InstanceProfile: "prof", VolumeSizeGiB: 40, UnlimitedCPUCredits: true,
		},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, launchToProto, launchFromProto)
		})
	}
}

func TestInstanceRoundTrip(t *testing.T) {
	tests := map[string]Instance{
		"zero": {},
		"full": {
			ID: "i-1", CellID: "c-1", InstanceType: "m5.large", CapacityType: CapacityOnDemand,
			Zone: "a", State: StateRunning, StateReason: "ok",
			Addresses: []Address{{Type: AddressPrivate, Address: "10.0.0.1"}, {Type: AddressPublic, Address: "1.2.3.4"}},
			Tags:      map[string]string{TagCell: "c-1"}, LaunchedAt: at,
		},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, instanceToProto, func(m *pb.Instance) *Instance {
				out := instanceFromProto(m)
				return &out
			})
		})
	}
}

func TestInstancesRoundTrip(t *testing.T) {
	tests := map[string][]Instance{
		"nil": nil,
		"two": {{ID: "i-1", State: StatePending}, {ID: "i-2", State: StateTerminated, LaunchedAt: at}},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			got := instancesFromProto(instancesToProto(in))
			if !reflect.DeepEqual(got, in) {
				t.Errorf("instances round trip = %#v, want %#v", got, in)
			}
		})
	}
}

func TestEventRoundTrip(t *testing.T) {
	tests := map[string]Event{
		"zero": {},
		"full": {
			Type: EventInterruption, InstanceID: "i-1", CellID: "c-1", State: StateRunning,
			Reason: "spot", Time: at, Deadline: at.Add(2 * time.Minute),
		},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, eventToProto, eventFromProto)
		})
	}
}

func TestRegistryAuthRoundTrip(t *testing.T) {
	tests := map[string]RegistryAuthResponse{
		"zero": {},
		"full": {Server: "r.example", Username: "AWS", Password: "tok", ExpiresAt: at},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, registryAuthToProto, registryAuthFromProto)
		})
	}
}

func TestAttachVolumeRoundTrip(t *testing.T) {
	tests := map[string]AttachVolumeRequest{
		"zero":       {},
		"full":       {InstanceID: "i-1", Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", ReadOnly: true},
		"read-write": {InstanceID: "i-1", Driver: "pd.csi.storage.gke.io", VolumeHandle: "projects/p/zones/z/disks/d"},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, attachVolumeToProto, attachVolumeFromProto)
		})
	}
}

func TestDetachVolumeRoundTrip(t *testing.T) {
	tests := map[string]DetachVolumeRequest{
		"zero": {},
		"full": {InstanceID: "i-1", Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc"},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, detachVolumeToProto, detachVolumeFromProto)
		})
	}
}

func TestVolumeAttachmentRoundTrip(t *testing.T) {
	tests := map[string]VolumeAttachment{
		"zero":                     {},
		"attaching, no device yet": {InstanceID: "i-1", Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", State: AttachmentAttaching},
		"attached by serial": {
			InstanceID: "i-1", Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", State: AttachmentAttached,
			Device: VolumeDevice{Serial: "vol0abc"},
		},
		"full": {
			InstanceID: "vm-1", Driver: "disk.csi.azure.com", VolumeHandle: "/subscriptions/s/disks/d", State: AttachmentDetaching,
			ReadOnly: true, Device: VolumeDevice{Serial: "60022480", Path: "/dev/disk/azure/scsi1/lun3"},
		},
		"only a path": {State: AttachmentAttached, Device: VolumeDevice{Path: "/dev/xvdf"}},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			roundTrip(t, &in, volumeAttachmentToProto, func(m *pb.VolumeAttachment) *VolumeAttachment {
				out := volumeAttachmentFromProto(m)
				return &out
			})
		})
	}
}

func TestVolumeAttachmentsRoundTrip(t *testing.T) {
	tests := map[string][]VolumeAttachment{
		"nil": nil,
		"two": {
			{InstanceID: "i-1", Driver: "d", VolumeHandle: "v-1", State: AttachmentAttaching},
			{InstanceID: "i-2", Driver: "d", VolumeHandle: "v-2", State: AttachmentAttached, Device: VolumeDevice{Serial: "v2"}},
		},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			got := volumeAttachmentsFromProto(overWire(t, &pb.DescribeVolumeAttachmentsResponse{Attachments: volumeAttachmentsToProto(in)}).GetAttachments())
			if !reflect.DeepEqual(got, in) {
				t.Errorf("attachments round trip = %#v, want %#v", got, in)
			}
		})
	}
}

// Nil messages (a plugin answering with missing sub-messages) convert to
// zero values rather than panicking.
func TestNilMessagesConvertToZero(t *testing.T) {
	if got := getInfoFromProto(&pb.GetInfoResponse{}); !reflect.DeepEqual(got, &GetInfoResponse{}) {
		t.Errorf("empty GetInfoResponse = %#v, want zero", got)
	}
	if got := instanceFromProto(nil); !reflect.DeepEqual(got, Instance{}) {
		t.Errorf("nil Instance = %#v, want zero", got)
	}
	if got := instanceTypeFromProto(nil); !reflect.DeepEqual(got, InstanceType{}) {
		t.Errorf("nil InstanceType = %#v, want zero", got)
	}
	if got := volumeAttachmentFromProto(nil); !reflect.DeepEqual(got, VolumeAttachment{}) {
		t.Errorf("nil VolumeAttachment = %#v, want zero", got)
	}
	if got := eventFromProto(nil); !reflect.DeepEqual(got, &Event{}) {
		t.Errorf("nil Event = %#v, want zero", got)
	}
	if got := fromTimestamp(nil); !got.IsZero() {
		t.Errorf("nil timestamp = %v, want zero time", got)
	}
	if toTimestamp(time.Time{}) != nil {
		t.Error("zero time became a timestamp, want nil")
	}
}
