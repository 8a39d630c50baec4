package pluginapi

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// Pure converters between the public Go types and the generated protobuf
// messages. Each pair is the other's inverse; nil proto messages convert to
// zero values.

func toTimestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func fromTimestamp(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func capabilitiesToProto(cs []Capability) []string {
	if cs == nil {
		return nil
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

func capabilitiesFromProto(cs []string) []Capability {
	if cs == nil {
		return nil
	}
	out := make([]Capability, len(cs))
	for i, c := range cs {
		out[i] = Capability(c)
	}
	return out
}

func getInfoToProto(r *GetInfoResponse) *pb.GetInfoResponse {
	return &pb.GetInfoResponse{
		Name:          r.Name,
		Version:       r.Version,
		ApiVersions:   r.APIVersions,
		Capabilities:  capabilitiesToProto(r.Capabilities),
		ConfigSchema:  r.ConfigSchema,
		Catalog:       &pb.CatalogInfo{Source: r.Catalog.Source, GeneratedAt: toTimestamp(r.Catalog.GeneratedAt)},
		VolumeDrivers: r.VolumeDrivers,
	}
}

func getInfoFromProto(r *pb.GetInfoResponse) *GetInfoResponse {
	return &GetInfoResponse{
		Name:         r.GetName(),
		Version:      r.GetVersion(),
		APIVersions:  r.GetApiVersions(),
		Capabilities: capabilitiesFromProto(r.GetCapabilities()),
		ConfigSchema: r.GetConfigSchema(),
		Catalog: CatalogInfo{
			Source:      r.GetCatalog().GetSource(),
			GeneratedAt: fromTimestamp(r.GetCatalog().GetGeneratedAt()),
		},
		VolumeDrivers: r.GetVolumeDrivers(),
	}
}

func configureToProto(r *ConfigureRequest) *pb.ConfigureRequest {
	return &pb.ConfigureRequest{ClusterId: r.ClusterID, NodeName: r.NodeName, ConfigJson: r.Config}
}

func configureFromProto(r *pb.ConfigureRequest) *ConfigureRequest {
	return &ConfigureRequest{ClusterID: r.GetClusterId(), NodeName: r.GetNodeName(), Config: r.GetConfigJson()}
}

func instanceTypeToProto(t *InstanceType) *pb.InstanceType {
	out := &pb.InstanceType{
		Name:                      t.Name,
		MilliCpu:                  t.MilliCPU,
		MemoryBytes:               t.MemoryBytes,
		Arch:                      string(t.Arch),
		BurstableBaselineMilliCpu: t.BurstableBaselineMilliCPU,
		LocalDiskBytes:            t.LocalDiskBytes,
		Offerings:                 make([]*pb.Offering, len(t.Offerings)),
	}
	if t.GPU != (GPU{}) {
		out.Gpu = &pb.GPU{Count: t.GPU.Count, Kind: t.GPU.Kind, MemoryBytes: t.GPU.MemoryBytes}
	}
	for i, o := range t.Offerings {
		po := &pb.Offering{Zone: o.Zone, CapacityType: string(o.CapacityType), Available: o.Available}
		if o.PriceKnown {
			price := o.HourlyPrice
			po.HourlyPrice = &price
		}
		out.Offerings[i] = po
	}
	return out
}

func instanceTypeFromProto(t *pb.InstanceType) InstanceType {
	out := InstanceType{
		Name:                      t.GetName(),
		MilliCPU:                  t.GetMilliCpu(),
		MemoryBytes:               t.GetMemoryBytes(),
		Arch:                      Arch(t.GetArch()),
		BurstableBaselineMilliCPU: t.GetBurstableBaselineMilliCpu(),
		LocalDiskBytes:            t.GetLocalDiskBytes(),
		GPU: GPU{
			Count:       t.GetGpu().GetCount(),
			Kind:        t.GetGpu().GetKind(),
			MemoryBytes: t.GetGpu().GetMemoryBytes(),
		},
	}
	if len(t.GetOfferings()) > 0 {
		out.Offerings = make([]Offering, len(t.GetOfferings()))
	}
	for i, o := range t.GetOfferings() {
		out.Offerings[i] = Offering{
			Zone:         o.GetZone(),
			CapacityType: CapacityType(o.GetCapacityType()),
			HourlyPrice:  o.GetHourlyPrice(),
			PriceKnown:   o.HourlyPrice != nil,
			Available:    o.GetAvailable(),
		}
	}
	return out
}

func launchToProto(r *LaunchRequest) *pb.LaunchRequest {
	return &pb.LaunchRequest{
		CellId:              r.CellID,
		NodeName:            r.NodeName,
		PodUid:              r.PodUID,
		PodNamespace:        r.PodNamespace,
		PodName:             r.PodName,
		InstanceType:        r.InstanceType,
		CapacityType:        string(r.CapacityType),
		Zones:               r.Zones,
		Image:               r.Image,
		Bootstrap:           r.Bootstrap,
		Tags:                r.Tags,
		SecurityGroups:      r.SecurityGroups,
		InstanceProfile:     r.InstanceProfile,
		VolumeSizeGib:       r.VolumeSizeGiB,
		UnlimitedCpuCredits: r.UnlimitedCPUCredits,
	}
}

func launchFromProto(r *pb.LaunchRequest) *LaunchRequest {
	return &LaunchRequest{
		CellID:              r.GetCellId(),
		NodeName:            r.GetNodeName(),
		PodUID:              r.GetPodUid(),
		PodNamespace:        r.GetPodNamespace(),
		PodName:             r.GetPodName(),
		InstanceType:        r.GetInstanceType(),
		CapacityType:        CapacityType(r.GetCapacityType()),
		Zones:               r.GetZones(),
		Image:               r.GetImage(),
		Bootstrap:           r.GetBootstrap(),
		Tags:                r.GetTags(),
		SecurityGroups:      r.GetSecurityGroups(),
		InstanceProfile:     r.GetInstanceProfile(),
		VolumeSizeGiB:       r.GetVolumeSizeGib(),
		UnlimitedCPUCredits: r.GetUnlimitedCpuCredits(),
	}
}

func instanceToProto(i *Instance) *pb.Instance {
	out := &pb.Instance{
		Id:           i.ID,
		CellId:       i.CellID,
		InstanceType: i.InstanceType,
		CapacityType: string(i.CapacityType),
		Zone:         i.Zone,
		State:        string(i.State),
		StateReason:  i.StateReason,
		Tags:         i.Tags,
		LaunchedAt:   toTimestamp(i.LaunchedAt),
	}
	if i.Addresses != nil {
		out.Addresses = make([]*pb.Address, len(i.Addresses))
		for j, a := range i.Addresses {
			out.Addresses[j] = &pb.Address{Type: string(a.Type), Address: a.Address}
		}
	}
	return out
}

func instanceFromProto(i *pb.Instance) Instance {
	out := Instance{
		ID:           i.GetId(),
		CellID:       i.GetCellId(),
		InstanceType: i.GetInstanceType(),
		CapacityType: CapacityType(i.GetCapacityType()),
		Zone:         i.GetZone(),
		State:        InstanceState(i.GetState()),
		StateReason:  i.GetStateReason(),
		Tags:         i.GetTags(),
		LaunchedAt:   fromTimestamp(i.GetLaunchedAt()),
	}
	if i.GetAddresses() != nil {
		out.Addresses = make([]Address, len(i.GetAddresses()))
		for j, a := range i.GetAddresses() {
			out.Addresses[j] = Address{Type: AddressType(a.GetType()), Address: a.GetAddress()}
		}
	}
	return out
}

func instancesToProto(is []Instance) []*pb.Instance {
	out := make([]*pb.Instance, len(is))
	for i := range is {
		out[i] = instanceToProto(&is[i])
	}
	return out
}

func instancesFromProto(is []*pb.Instance) []Instance {
	if len(is) == 0 {
		return nil
	}
	out := make([]Instance, len(is))
	for i, inst := range is {
		out[i] = instanceFromProto(inst)
	}
	return out
}

func eventToProto(e *Event) *pb.Event {
	return &pb.Event{
		Type:       string(e.Type),
		InstanceId: e.InstanceID,
		CellId:     e.CellID,
		State:      string(e.State),
		Reason:     e.Reason,
		Time:       toTimestamp(e.Time),
		Deadline:   toTimestamp(e.Deadline),
	}
}

func eventFromProto(e *pb.Event) *Event {
	return &Event{
		Type:       EventType(e.GetType()),
		InstanceID: e.GetInstanceId(),
		CellID:     e.GetCellId(),
		State:      InstanceState(e.GetState()),
		Reason:     e.GetReason(),
		Time:       fromTimestamp(e.GetTime()),
		Deadline:   fromTimestamp(e.GetDeadline()),
	}
}

func registryAuthToProto(r *RegistryAuthResponse) *pb.RegistryAuthResponse {
	return &pb.RegistryAuthResponse{
		Server:    r.Server,
		Username:  r.Username,
		Password:  r.Password,
		ExpiresAt: toTimestamp(r.ExpiresAt),
	}
}

func registryAuthFromProto(r *pb.RegistryAuthResponse) *RegistryAuthResponse {
	return &RegistryAuthResponse{
		Server:    r.GetServer(),
		Username:  r.GetUsername(),
		Password:  r.GetPassword(),
		ExpiresAt: fromTimestamp(r.GetExpiresAt()),
	}
}

func attachVolumeToProto(r *AttachVolumeRequest) *pb.AttachVolumeRequest {
	return &pb.AttachVolumeRequest{InstanceId: r.InstanceID, Driver: r.Driver, VolumeHandle: r.VolumeHandle, ReadOnly: r.ReadOnly}
}

func attachVolumeFromProto(r *pb.AttachVolumeRequest) *AttachVolumeRequest {
	return &AttachVolumeRequest{
		InstanceID:   r.GetInstanceId(),
		Driver:       r.GetDriver(),
		VolumeHandle: r.GetVolumeHandle(),
		ReadOnly:     r.GetReadOnly(),
	}
}

func detachVolumeToProto(r *DetachVolumeRequest) *pb.DetachVolumeRequest {
	return &pb.DetachVolumeRequest{InstanceId: r.InstanceID, Driver: r.Driver, VolumeHandle: r.VolumeHandle}
}

func detachVolumeFromProto(r *pb.DetachVolumeRequest) *DetachVolumeRequest {
	return &DetachVolumeRequest{InstanceID: r.GetInstanceId(), Driver: r.GetDriver(), VolumeHandle: r.GetVolumeHandle()}
}

func volumeAttachmentToProto(a *VolumeAttachment) *pb.VolumeAttachment {
	out := &pb.VolumeAttachment{
		InstanceId:   a.InstanceID,
		Driver:       a.Driver,
		VolumeHandle: a.VolumeHandle,
		State:        string(a.State),
		ReadOnly:     a.ReadOnly,
	}
	if a.Device != (VolumeDevice{}) {
		out.Device = &pb.VolumeDevice{Serial: a.Device.Serial, Path: a.Device.Path}
	}
	return out
}

func volumeAttachmentFromProto(a *pb.VolumeAttachment) VolumeAttachment {
	return VolumeAttachment{
		InstanceID:   a.GetInstanceId(),
		Driver:       a.GetDriver(),
		VolumeHandle: a.GetVolumeHandle(),
		State:        AttachmentState(a.GetState()),
		ReadOnly:     a.GetReadOnly(),
		Device:       VolumeDevice{Serial: a.GetDevice().GetSerial(), Path: a.GetDevice().GetPath()},
	}
}

func volumeAttachmentsToProto(as []VolumeAttachment) []*pb.VolumeAttachment {
	out := make([]*pb.VolumeAttachment, len(as))
	for i := range as {
		out[i] = volumeAttachmentToProto(&as[i])
	}
	return out
}

func volumeAttachmentsFromProto(as []*pb.VolumeAttachment) []VolumeAttachment {
	if len(as) == 0 {
		return nil
	}
	out := make([]VolumeAttachment, len(as))
	for i, a := range as {
		out[i] = volumeAttachmentFromProto(a)
	}
	return out
}
