package api

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kipcell/kip/cell/api/internal/cellv1"
)

// Conversions between the protocol's Go types (cell.go) and its wire
// messages (cellv1). A zero time is an unset timestamp both ways.

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

// convertAll converts each element of in with f; nil for none.
func convertAll[T, U any](in []T, f func(T) U) []U {
	if len(in) == 0 {
		return nil
	}
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

func podRequestToProto(r *PodRequest) *cellv1.ApplyPodRequest {
	if r == nil {
		return &cellv1.ApplyPodRequest{}
	}
	m := &cellv1.ApplyPodRequest{
		PodJson: r.PodJSON, Generation: r.Generation, PodAddress: r.PodAddress, SeccompDefault: r.SeccompDefault,
		RegistryCredentials: convertAll(r.RegistryCredentials, func(c RegistryCredential) *cellv1.RegistryCredential {
			return &cellv1.RegistryCredential{Server: c.Server, Username: c.Username, Password: c.Password, IdentityToken: c.IdentityToken}
		}),
	}
	if r.Env != nil {
		m.Env = make(map[string]*cellv1.EnvList, len(r.Env))
		for name, vars := range r.Env {
			m.Env[name] = &cellv1.EnvList{Vars: convertAll(vars, func(v EnvVar) *cellv1.EnvVar { return &cellv1.EnvVar{Name: v.Name, Value: v.Value} })}
		}
	}
	if r.Volumes != nil {
		m.Volumes = make(map[string]*cellv1.VolumeFiles, len(r.Volumes))
		for name, vf := range r.Volumes {
			m.Volumes[name] = &cellv1.VolumeFiles{Files: vf.Files, Modes: vf.Modes}
		}
	}
	if d := r.ClusterDNS; d != nil {
		m.ClusterDns = &cellv1.ClusterDNS{Servers: d.Servers, Domain: d.Domain}
	}
	if lr := r.LogRotation; lr != nil {
		m.ContainerLogRotation = &cellv1.ContainerLogRotation{MaxSizeBytes: lr.MaxSizeBytes, MaxFiles: lr.MaxFiles}
	}
	if r.Disks != nil {
		m.Disks = make(map[string]*cellv1.Disk, len(r.Disks))
		for name, d := range r.Disks {
			m.Disks[name] = &cellv1.Disk{
				Serial: d.Serial, Path: d.Path, FsType: d.FSType, ReadOnly: d.ReadOnly, Block: d.Block, MountOptions: d.MountOptions,
			}
		}
	}
	if r.Shares != nil {
		m.Shares = make(map[string]*cellv1.Share, len(r.Shares))
		for name, s := range r.Shares {
			m.Shares[name] = &cellv1.Share{Server: s.Server, Path: s.Path, ReadOnly: s.ReadOnly, MountOptions: s.MountOptions}
		}
	}
	return m
}

func podRequestFromProto(m *cellv1.ApplyPodRequest) *PodRequest {
	r := &PodRequest{
		PodJSON: m.GetPodJson(), Generation: m.GetGeneration(), PodAddress: m.GetPodAddress(), SeccompDefault: m.GetSeccompDefault(),
		RegistryCredentials: convertAll(m.GetRegistryCredentials(), func(c *cellv1.RegistryCredential) RegistryCredential {
			return RegistryCredential{Server: c.GetServer(), Username: c.GetUsername(), Password: c.GetPassword(), IdentityToken: c.GetIdentityToken()}
		}),
	}
	if len(m.GetEnv()) > 0 {
		r.Env = make(map[string][]EnvVar, len(m.GetEnv()))
		for name, list := range m.GetEnv() {
			vars := make([]EnvVar, 0, len(list.GetVars()))
			for _, v := range list.GetVars() {
				vars = append(vars, EnvVar{Name: v.GetName(), Value: v.GetValue()})
			}
			r.Env[name] = vars
		}
	}
	if len(m.GetVolumes()) > 0 {
		r.Volumes = make(map[string]VolumeFiles, len(m.GetVolumes()))
		for name, vf := range m.GetVolumes() {
			r.Volumes[name] = VolumeFiles{Files: vf.GetFiles(), Modes: vf.GetModes()}
		}
	}
	if d := m.GetClusterDns(); d != nil {
		r.ClusterDNS = &ClusterDNS{Servers: d.GetServers(), Domain: d.GetDomain()}
	}
	if lr := m.GetContainerLogRotation(); lr != nil {
		r.LogRotation = &LogRotation{MaxSizeBytes: lr.GetMaxSizeBytes(), MaxFiles: lr.GetMaxFiles()}
	}
	if len(m.GetDisks()) > 0 {
		r.Disks = make(map[string]Disk, len(m.GetDisks()))
		for name, d := range m.GetDisks() {
			r.Disks[name] = Disk{
				Serial: d.GetSerial(), Path: d.GetPath(), FSType: d.GetFsType(), ReadOnly: d.GetReadOnly(), Block: d.GetBlock(),
				MountOptions: d.GetMountOptions(),
			}
		}
	}
	if len(m.GetShares()) > 0 {
		r.Shares = make(map[string]Share, len(m.GetShares()))
		for name, s := range m.GetShares() {
			r.Shares[name] = Share{Server: s.GetServer(), Path: s.GetPath(), ReadOnly: s.GetReadOnly(), MountOptions: s.GetMountOptions()}
		}
	}
	return r
}

// Equal reports whether r and o ask for the same pod, as the wire tells
// them apart (an empty map or list is none).
func (r *PodRequest) Equal(o *PodRequest) bool {
	if r == nil || o == nil {
		return r == o
	}
	return proto.Equal(podRequestToProto(r), podRequestToProto(o))
}

func statusUpdateToProto(u *StatusUpdate) *cellv1.PodStatusUpdate {
	return &cellv1.PodStatusUpdate{
		StatusJson: u.StatusJSON, Generation: u.Generation, Seq: u.Seq, PodUid: u.PodUID,
		Events: convertAll(u.Events, func(e PodEvent) *cellv1.PodEvent {
			return &cellv1.PodEvent{Type: e.Type, Reason: e.Reason, Message: e.Message, Container: e.Container, Time: toTimestamp(e.Time)}
		}),
		Notices: convertAll(u.Notices, func(n InstanceNotice) *cellv1.InstanceNotice {
			return &cellv1.InstanceNotice{Kind: n.Kind, Action: n.Action, Time: toTimestamp(n.Time)}
		}),
	}
}

func statusUpdateFromProto(m *cellv1.PodStatusUpdate) *StatusUpdate {
	return &StatusUpdate{
		StatusJSON: m.GetStatusJson(), Generation: m.GetGeneration(), Seq: m.GetSeq(), PodUID: m.GetPodUid(),
		Events: convertAll(m.GetEvents(), func(e *cellv1.PodEvent) PodEvent {
			return PodEvent{Type: e.GetType(), Reason: e.GetReason(), Message: e.GetMessage(), Container: e.GetContainer(), Time: fromTimestamp(e.GetTime())}
		}),
		Notices: convertAll(m.GetNotices(), func(n *cellv1.InstanceNotice) InstanceNotice {
			return InstanceNotice{Kind: n.GetKind(), Action: n.GetAction(), Time: fromTimestamp(n.GetTime())}
		}),
	}
}

func logsOptionsToProto(o LogsOptions) *cellv1.LogsRequest {
	return &cellv1.LogsRequest{
		Container: o.Container, Follow: o.Follow, Previous: o.Previous, TailLines: o.TailLines,
		SinceSeconds: o.SinceSeconds, SinceTime: toTimestamp(o.SinceTime), Timestamps: o.Timestamps, LimitBytes: o.LimitBytes,
	}
}

func logsOptionsFromProto(m *cellv1.LogsRequest) LogsOptions {
	return LogsOptions{
		Container: m.GetContainer(), Follow: m.GetFollow(), Previous: m.GetPrevious(), TailLines: m.GetTailLines(),
		SinceSeconds: m.GetSinceSeconds(), SinceTime: fromTimestamp(m.GetSinceTime()), Timestamps: m.GetTimestamps(), LimitBytes: m.GetLimitBytes(),
	}
}

func execInputToProto(in *ExecInput) *cellv1.ExecInput {
	m := &cellv1.ExecInput{Stdin: in.Stdin, CloseStdin: in.CloseStdin}
	if s := in.Start; s != nil {
		m.Start = &cellv1.ExecStart{Container: s.Container, Command: s.Command, Tty: s.TTY, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr}
	}
	if r := in.Resize; r != nil {
		m.Resize = &cellv1.TerminalSize{Width: r.Width, Height: r.Height}
	}
	return m
}

func execInputFromProto(m *cellv1.ExecInput) *ExecInput {
	in := &ExecInput{Stdin: m.GetStdin(), CloseStdin: m.GetCloseStdin()}
	if s := m.GetStart(); s != nil {
		in.Start = &ExecStart{Container: s.GetContainer(), Command: s.GetCommand(), TTY: s.GetTty(), Stdin: s.GetStdin(), Stdout: s.GetStdout(), Stderr: s.GetStderr()}
	}
	if r := m.GetResize(); r != nil {
		in.Resize = &TerminalSize{Width: r.GetWidth(), Height: r.GetHeight()}
	}
	return in
}

func execOutputToProto(out *ExecOutput) *cellv1.ExecOutput {
	m := &cellv1.ExecOutput{Stdout: out.Stdout, Stderr: out.Stderr}
	if out.Exit != nil {
		m.Exit = &cellv1.ExitStatus{Code: out.Exit.Code}
	}
	return m
}

func execOutputFromProto(m *cellv1.ExecOutput) *ExecOutput {
	out := &ExecOutput{Stdout: m.GetStdout(), Stderr: m.GetStderr()}
	if e := m.GetExit(); e != nil {
		out.Exit = &ExitStatus{Code: e.GetCode()}
	}
	return out
}

func frameToProto(f *PortForwardFrame) *cellv1.PortForwardFrame {
	return &cellv1.PortForwardFrame{Port: f.Port, Data: f.Data, Close: f.Close}
}

func frameFromProto(m *cellv1.PortForwardFrame) *PortForwardFrame {
	return &PortForwardFrame{Port: m.GetPort(), Data: m.GetData(), Close: m.GetClose()}
}

func fsStatsToProto(f *FsStats) *cellv1.FsStats {
	if f == nil {
		return nil
	}
	return &cellv1.FsStats{
		CapacityBytes: f.CapacityBytes, AvailableBytes: f.AvailableBytes, UsedBytes: f.UsedBytes,
		Inodes: f.Inodes, InodesFree: f.InodesFree, InodesUsed: f.InodesUsed,
		HasFilesystem: f.HasFilesystem, HasUsage: f.HasUsage,
	}
}

func fsStatsFromProto(m *cellv1.FsStats) *FsStats {
	if m == nil {
		return nil
	}
	return &FsStats{
		CapacityBytes: m.GetCapacityBytes(), AvailableBytes: m.GetAvailableBytes(), UsedBytes: m.GetUsedBytes(),
		Inodes: m.GetInodes(), InodesFree: m.GetInodesFree(), InodesUsed: m.GetInodesUsed(),
		HasFilesystem: m.GetHasFilesystem(), HasUsage: m.GetHasUsage(),
	}
}

func statsToProto(s *Stats) *cellv1.StatsResponse {
	return &cellv1.StatsResponse{
		Time: toTimestamp(s.Time), Disk: fsStatsToProto(s.Disk), EtcFiles: fsStatsToProto(s.EtcFiles),
		Containers: convertAll(s.Containers, func(c ContainerStats) *cellv1.ContainerStats {
			return &cellv1.ContainerStats{
				Name: c.Name, CpuUsageNanoCores: c.CPUUsageNanoCores, CpuUsageCoreNanoSeconds: c.CPUUsageCoreNanoSeconds,
				MemoryWorkingSetBytes: c.MemoryWorkingSetBytes, MemoryUsageBytes: c.MemoryUsageBytes,
				StartTime: toTimestamp(c.StartTime), CpuRateKnown: c.CPURateKnown, MemoryRssBytes: c.MemoryRSSBytes,
				MemoryPageFaults: c.MemoryPageFaults, MemoryMajorPageFaults: c.MemoryMajorPageFaults,
				Rootfs: fsStatsToProto(c.Rootfs), Logs: fsStatsToProto(c.Logs),
			}
		}),
		Interfaces: convertAll(s.Interfaces, func(i InterfaceStats) *cellv1.InterfaceStats {
			return &cellv1.InterfaceStats{Name: i.Name, RxBytes: i.RxBytes, RxErrors: i.RxErrors, TxBytes: i.TxBytes, TxErrors: i.TxErrors}
		}),
		Volumes: convertAll(s.Volumes, func(v VolumeStats) *cellv1.VolumeStats {
			return &cellv1.VolumeStats{Name: v.Name, Fs: fsStatsToProto(v.Fs)}
		}),
	}
}

func statsFromProto(m *cellv1.StatsResponse) *Stats {
	return &Stats{
		Time: fromTimestamp(m.GetTime()), Disk: fsStatsFromProto(m.GetDisk()), EtcFiles: fsStatsFromProto(m.GetEtcFiles()),
		Containers: convertAll(m.GetContainers(), func(c *cellv1.ContainerStats) ContainerStats {
			return ContainerStats{
				Name: c.GetName(), CPUUsageNanoCores: c.GetCpuUsageNanoCores(), CPUUsageCoreNanoSeconds: c.GetCpuUsageCoreNanoSeconds(),
				MemoryWorkingSetBytes: c.GetMemoryWorkingSetBytes(), MemoryUsageBytes: c.GetMemoryUsageBytes(),
				StartTime: fromTimestamp(c.GetStartTime()), CPURateKnown: c.GetCpuRateKnown(), MemoryRSSBytes: c.GetMemoryRssBytes(),
				MemoryPageFaults: c.GetMemoryPageFaults(), MemoryMajorPageFaults: c.GetMemoryMajorPageFaults(),
				Rootfs: fsStatsFromProto(c.GetRootfs()), Logs: fsStatsFromProto(c.GetLogs()),
			}
		}),
		Interfaces: convertAll(m.GetInterfaces(), func(i *cellv1.InterfaceStats) InterfaceStats {
			return InterfaceStats{Name: i.GetName(), RxBytes: i.GetRxBytes(), RxErrors: i.GetRxErrors(), TxBytes: i.GetTxBytes(), TxErrors: i.GetTxErrors()}
		}),
		Volumes: convertAll(m.GetVolumes(), func(v *cellv1.VolumeStats) VolumeStats {
			return VolumeStats{Name: v.GetName(), Fs: fsStatsFromProto(v.GetFs())}
		}),
	}
}

func serviceToProto(s Service) *cellv1.Service {
	return &cellv1.Service{
		Namespace: s.Namespace, Name: s.Name, ClusterIps: s.ClusterIPs, AffinitySeconds: s.AffinitySeconds,
		Ports: convertAll(s.Ports, func(p ServicePort) *cellv1.ServicePort {
			return &cellv1.ServicePort{
				Name: p.Name, Protocol: p.Protocol, Port: p.Port,
				Endpoints: convertAll(p.Endpoints, func(e ServiceEndpoint) *cellv1.ServiceEndpoint {
					return &cellv1.ServiceEndpoint{Ip: e.IP, Port: e.Port}
				}),
			}
		}),
	}
}

func serviceFromProto(m *cellv1.Service) Service {
	return Service{
		Namespace: m.GetNamespace(), Name: m.GetName(), ClusterIPs: m.GetClusterIps(), AffinitySeconds: m.GetAffinitySeconds(),
		Ports: convertAll(m.GetPorts(), func(p *cellv1.ServicePort) ServicePort {
			return ServicePort{
				Name: p.GetName(), Protocol: p.GetProtocol(), Port: p.GetPort(),
				Endpoints: convertAll(p.GetEndpoints(), func(e *cellv1.ServiceEndpoint) ServiceEndpoint {
					return ServiceEndpoint{IP: e.GetIp(), Port: e.GetPort()}
				}),
			}
		}),
	}
}

// Equal reports whether s and o program the same, as the wire tells them
// apart (an empty list is none).
func (s *Service) Equal(o *Service) bool {
	if s == nil || o == nil {
		return s == o
	}
	return proto.Equal(serviceToProto(*s), serviceToProto(*o))
}

func servicesUpdateToProto(u *ServicesUpdate) *cellv1.ApplyServicesRequest {
	return &cellv1.ApplyServicesRequest{
		Table: u.Table, Revision: u.Revision, BaseRevision: u.BaseRevision, Removed: u.Removed,
		Services: convertAll(u.Services, serviceToProto),
	}
}

func servicesUpdateFromProto(m *cellv1.ApplyServicesRequest) *ServicesUpdate {
	return &ServicesUpdate{
		Table: m.GetTable(), Revision: m.GetRevision(), BaseRevision: m.GetBaseRevision(), Removed: m.GetRemoved(),
		Services: convertAll(m.GetServices(), serviceFromProto),
	}
}
