package api

import (
	"context"
	"io"
	"time"
)

// The cell protocol as Go: what the host asks of a cell's agent and what
// the agent answers, in the types both ends use. The wire is gRPC
// (proto/kip/cell/v1/cell.proto, generated into the internal package
// cellv1 that neither end imports): RegisterCell and RegisterJoin put an
// agent's implementation on a gRPC server, NewClient and NewJoinClient
// give the host the same calls over a connection. The proto file says
// what each field means on the wire; the rules below are the ones a
// caller or an implementation must keep.
//
// Errors are gRPC status errors both ways: an implementation returns
// status.Error(codes.X, …) where the code matters to the host (each
// method says which), and the client returns the status the agent sent,
// so callers test them with status.Code.

// Cell is the agent's side of the Cell service.
type Cell interface {
	// ApplyPod converges the cell to req (level-triggered and idempotent:
	// the agent works towards the highest generation it has seen and
	// ignores older ones) and returns the generation it now works
	// towards. FailedPrecondition: the pod was deleted, or the cell runs
	// another pod; Unimplemented: the agent cannot give the pod the
	// address in req.PodAddress (send it again without); InvalidArgument:
	// anything else about req.
	ApplyPod(ctx context.Context, req *PodRequest) (generation int64, err error)
	// WatchStatus sends the current status, then every change, until ctx
	// ends (nil) or send fails (its error). Changes faster than the host
	// reads may be coalesced into the latest.
	WatchStatus(ctx context.Context, send func(*StatusUpdate) error) error
	// Logs writes a container's log to w as the kubelet's API serves it.
	// Each Write reaches the host as it is made, in pieces of at most
	// MaxChunk. NotFound: no such container or attempt.
	Logs(ctx context.Context, opts LogsOptions, w io.Writer) error
	// Exec runs a command in a container: the stream's first input carries
	// Start (with a command), later ones stdin, resizes and the end of
	// stdin; the outputs carry stdout, stderr and, last, the exit status.
	// The call is committed to the agent before Exec is called (the host
	// does not retry it). InvalidArgument: no start; NotFound: no such
	// container; FailedPrecondition: it does not run.
	Exec(ctx context.Context, stream ExecStream) error
	// Attach attaches to a container's main process, as Exec does with a
	// Start without a command.
	Attach(ctx context.Context, stream ExecStream) error
	// PortForward connects to a port of the pod: the first frame names the
	// port (and may carry data), later ones carry data and Close (the
	// host's end of writing); the agent's frames carry the port's data and
	// Close at its end. Committed as Exec is. InvalidArgument: port out of
	// range; Unavailable: nothing listens.
	PortForward(ctx context.Context, stream PortForwardStream) error
	// Stats samples the pod's containers, and unless onlyCPUAndMemory its
	// network, volumes and disk.
	Stats(ctx context.Context, onlyCPUAndMemory bool) (*Stats, error)
	// DeletePod stops the pod's containers, each within grace (negative:
	// the pod's own terminationGracePeriodSeconds), and returns once they
	// are gone and the pod's disks (PodRequest.Disks) unmounted and free,
	// so that the host may detach them; an error (Internal) when a disk
	// stayed busy, and a repeated call tries again. The deletion goes on
	// if ctx ends first, and a repeated call waits for the same one.
	DeletePod(ctx context.Context, grace time.Duration) error
	// ApplyServices programs the cell's ClusterIP services (see
	// ServicesUpdate). Unimplemented: the cell cannot program them;
	// FailedPrecondition: a delta against a table or revision the agent
	// does not have (send the whole table).
	ApplyServices(ctx context.Context, u *ServicesUpdate) (ServicesApplied, error)
}

// ExecStream is the agent's end of an Exec or Attach: inputs from the host,
// outputs to it. Send is not safe for concurrent use.
type ExecStream interface {
	Recv() (*ExecInput, error)
	Send(*ExecOutput) error
}

// PortForwardStream is the agent's end of a PortForward. Send is not safe
// for concurrent use.
type PortForwardStream interface {
	Recv() (*PortForwardFrame, error)
	Send(*PortForwardFrame) error
}

// MaxChunk is the most output (of logs, exec, attach, port-forwards) the
// agent puts in one message: the host takes messages of a few MiB at most.
const MaxChunk = 64 << 10

// PodRequest is the desired pod (ApplyPod).
type PodRequest struct {
	// PodJSON is the pod, Kubernetes JSON (core/v1 Pod): the protocol does
	// not change when the Kubernetes API grows.
	PodJSON []byte
	// Generation increases with every change the host makes to the pod.
	Generation int64
	// Env is the environment the host resolved, per container name, in
	// order.
	Env map[string][]EnvVar
	// Volumes are the files of configMap, secret, projected and
	// downwardAPI volumes, by volume name.
	Volumes map[string]VolumeFiles
	// RegistryCredentials pull the pod's images.
	RegistryCredentials []RegistryCredential
	// ClusterDNS is the node's DNS settings for the pod's /etc files; nil:
	// a host that sends none.
	ClusterDNS *ClusterDNS
	// PodAddress is the address the pod gets in the cluster network; empty:
	// the cell's own.
	PodAddress string
	// SeccompDefault runs containers without a seccomp profile under the
	// runtime's default one (the kubelet's seccompDefault).
	SeccompDefault bool
	// LogRotation is the containers' log rotation; nil: the agent's
	// default.
	LogRotation *LogRotation
	// Disks are the pod's disks the host attached to the instance, by
	// the pod's volume name (its persistentVolumeClaim volumes, and the
	// claims of its ephemeral volumes). The host sends the pod once each
	// is attached; the agent finds, formats when blank, mounts and gives
	// each to the containers, and unmounts it before DeletePod returns,
	// after which the host detaches it. A claim volume without one keeps
	// the containers Waiting CreateContainerConfigError.
	Disks map[string]Disk
	// Shares are the pod's NFS shares the host resolved from its claims
	// (a PV of spec.nfs or of an NFS CSI driver), by the pod's volume
	// name; the pod's inline nfs volumes are read from the pod. The agent
	// mounts each before any container starts and unmounts it when the
	// pod is deleted.
	Shares map[string]Share
}

// Share is an NFS export a pod mounts.
type Share struct {
	// Server is a host name or an address, resolved in the instance's
	// network.
	Server string
	// Path is the exported path.
	Path string
	// ReadOnly mounts it read-only.
	ReadOnly bool
	// MountOptions are the PV's mountOptions, as nfs(5) spells them.
	MountOptions []string
}

// Disk is an attached disk of the pod: how the agent finds its device
// (Serial, else Path, as pluginapi.VolumeDevice gives them) and how the
// pod uses it.
type Disk struct {
	// Serial is the device's serial as the instance's kernel reports it
	// (EC2's NVMe serial "vol0123…", the volume ID without its dash): the
	// agent takes the first block device whose serial matches. Empty:
	// none known.
	Serial string
	// Path is the device's path (/dev/xvdf, a /dev/disk/by-id link),
	// used when no device's serial matches; the agent waits for it to
	// exist and follows symlinks.
	Path string
	// FSType is the PV's filesystem (ext4 when empty, as the CSI drivers
	// default): a blank device is formatted with it, a device holding
	// another filesystem refused, never reformatted.
	FSType string
	// ReadOnly mounts it read-only (the PV's or the pod volume's
	// readOnly).
	ReadOnly bool
	// Block is volumeMode Block: the containers get the device itself
	// (volumeDevices), neither formatted nor mounted.
	Block bool
	// MountOptions are the PV's mountOptions, passed to mount.
	MountOptions []string
}

// LogRotation is the kubelet's containerLogMaxSize and
// containerLogMaxFiles.
type LogRotation struct {
	MaxSizeBytes int64
	MaxFiles     int32
}

// ClusterDNS is the cluster's DNS servers (IP addresses) and domain
// ("cluster.local"); either may be empty.
type ClusterDNS struct {
	Servers []string
	Domain  string
}

// EnvVar is one resolved environment variable.
type EnvVar struct {
	Name, Value string
}

// VolumeFiles are a volume's files: relative path → content, and → mode
// (0644 where missing).
type VolumeFiles struct {
	Files map[string][]byte
	Modes map[string]uint32
}

// RegistryCredential is a credential for one registry host.
type RegistryCredential struct {
	Server, Username, Password, IdentityToken string
}

// StatusUpdate is one update of a WatchStatus.
type StatusUpdate struct {
	// StatusJSON is the pod's status, Kubernetes JSON (core/v1 PodStatus).
	StatusJSON []byte
	// Generation is the generation of the desired pod the status reflects.
	Generation int64
	// Seq increases with every update.
	Seq uint64
	// Events happened since the previous update (the host records them on
	// the pod as a kubelet would).
	Events []PodEvent
	// Notices are the cloud's notices about the instance in force now,
	// all of them in every update.
	Notices []InstanceNotice
	// PodUID is the UID of the pod the agent runs (its first ApplyPod's);
	// empty while it runs none (a standby cell).
	PodUID string
}

// PodEvent is an event about the pod as a kubelet records it.
type PodEvent struct {
	// Type is "Normal" or "Warning"; Reason the kubelet's (Pulling,
	// Started, BackOff, …).
	Type, Reason, Message string
	// Container is the container the event is about, if any.
	Container string
	Time      time.Time
}

// InstanceNotice is a cloud's notice about the cell's instance.
type InstanceNotice struct {
	// Kind is NoticeInterruption or NoticeRebalance.
	Kind string
	// Action is what the cloud will do for an interruption (terminate,
	// stop, hibernate).
	Action string
	// Time is when the cloud acts (an interruption) or said so (a
	// rebalance).
	Time time.Time
}

// LogsOptions are a Logs call's, as `kubectl logs` gives them.
type LogsOptions struct {
	// Container is the container's name; empty: the pod's default one.
	Container string
	Follow    bool
	// Previous reads the container's previous attempt.
	Previous bool
	// TailLines is the number of lines from the end; negative: all.
	TailLines    int64
	SinceSeconds int64
	// SinceTime, when not zero, starts the log there.
	SinceTime  time.Time
	Timestamps bool
	LimitBytes int64
}

// ExecInput is one message from the host on an Exec or Attach.
type ExecInput struct {
	// Start is set on the first message only.
	Start *ExecStart
	Stdin []byte
	// Resize is a new terminal size.
	Resize *TerminalSize
	// CloseStdin ends the process's stdin.
	CloseStdin bool
}

// ExecStart is what to run (Exec) or attach to (Attach).
type ExecStart struct {
	// Container is the container's name; empty: the pod's default one.
	Container string
	// Command is the command to run; empty for Attach.
	Command                    []string
	TTY, Stdin, Stdout, Stderr bool
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint32
}

// ExecOutput is one message from the agent on an Exec or Attach.
type ExecOutput struct {
	Stdout, Stderr []byte
	// Exit is set once, on the last message, when the process has exited.
	Exit *ExitStatus
}

// ExitStatus is a process's exit.
type ExitStatus struct {
	Code int32
}

// PortForwardFrame is one message of a PortForward, either way.
type PortForwardFrame struct {
	Port int32
	Data []byte
	// Close: the sender writes no more.
	Close bool
}

// Stats is a sample of the pod's resource use.
type Stats struct {
	// Time is when the agent sampled the containers.
	Time       time.Time
	Containers []ContainerStats
	// Interfaces are the pod's network interfaces (loopback left out), in
	// the kernel's order; Volumes the volumes the agent made, by name.
	Interfaces []InterfaceStats
	Volumes    []VolumeStats
	// Disk is the cell's disk: capacity and free space, no usage (the
	// pod's share is the sum of its parts). EtcFiles is the pod's /etc
	// files. Either may be nil.
	Disk, EtcFiles *FsStats
}

// ContainerStats is a container's resource use.
type ContainerStats struct {
	Name                    string
	CPUUsageNanoCores       uint64
	CPUUsageCoreNanoSeconds uint64
	MemoryWorkingSetBytes   uint64
	MemoryUsageBytes        uint64
	// StartTime is when the container's current attempt started.
	StartTime time.Time
	// CPURateKnown: CPUUsageNanoCores is a rate (false on the first
	// sample).
	CPURateKnown          bool
	MemoryRSSBytes        uint64
	MemoryPageFaults      uint64
	MemoryMajorPageFaults uint64
	// Rootfs is the writable layer, Logs the log files of every attempt
	// kept; nil when not measured.
	Rootfs, Logs *FsStats
}

// InterfaceStats is a network interface's counters.
type InterfaceStats struct {
	Name                                 string
	RxBytes, RxErrors, TxBytes, TxErrors uint64
}

// VolumeStats is a volume's use.
type VolumeStats struct {
	Name string
	Fs   *FsStats
}

// FsStats is a filesystem's figures (HasFilesystem: capacity, available,
// inodes, inodes free are set) and a usage on it (HasUsage: used bytes and
// inodes used are).
type FsStats struct {
	CapacityBytes, AvailableBytes, UsedBytes uint64
	Inodes, InodesFree, InodesUsed           uint64
	HasFilesystem, HasUsage                  bool
}

// ServicesUpdate is the cluster's ClusterIP services as the cell should
// program them: the whole table (BaseRevision zero), which replaces what
// the agent has, or a delta against BaseRevision of the same table.
type ServicesUpdate struct {
	// Table is the host's table: a new value each time a host starts.
	Table string
	// Revision is the revision the cell has once the update is applied.
	Revision, BaseRevision uint64
	// Services are replaced or added; Removed (namespace/name) dropped.
	Services []Service
	Removed  []string
}

// ServicesApplied is the table and revision the cell's network reflects.
type ServicesApplied struct {
	Table    string
	Revision uint64
}

// Service is one Service with something to program.
type Service struct {
	Namespace, Name string
	ClusterIPs      []string
	Ports           []ServicePort
	// AffinitySeconds is sessionAffinity ClientIP's timeout; zero: None.
	AffinitySeconds int32
}

// ServicePort is one port of a Service and its ready endpoints (none:
// connections are refused).
type ServicePort struct {
	// Name is the Service port's name (empty for a single unnamed port);
	// Protocol "TCP" or "UDP".
	Name, Protocol string
	Port           int32
	Endpoints      []ServiceEndpoint
}

// ServiceEndpoint is a ready endpoint's address.
type ServiceEndpoint struct {
	IP   string
	Port int32
}

// JoinService is the agent's side of the Join service (see join.go).
type JoinService interface {
	// Join returns the agent's join offer. Idempotent: the key stays the
	// same until the agent holds a certificate. FailedPrecondition once
	// joined.
	Join(ctx context.Context) (*JoinOffer, error)
	// CompleteJoin installs the certificate (PEM) the host signed for the
	// agent's key. InvalidArgument when it is not for this cell and key or
	// not signed by the cluster CA. Idempotent.
	CompleteJoin(ctx context.Context, certPEM []byte) error
	// Renew makes a new key and returns the offer for it (the agent serves
	// its current key until CompleteRenew). FailedPrecondition while not
	// joined.
	Renew(ctx context.Context) (*JoinOffer, error)
	// CompleteRenew installs the certificate the host signed for the key
	// of the last Renew. InvalidArgument as CompleteJoin;
	// FailedPrecondition when no renewal is pending. Idempotent.
	CompleteRenew(ctx context.Context, certPEM []byte) error
}

// JoinOffer is what an agent offers to join or renew: the bootstrap's
// join token (Join only), a certificate request (DER) for its key naming
// the cell ID only, and the cloud's signed instance identity where it has
// one.
type JoinOffer struct {
	Token                               string
	CSR                                 []byte
	IdentityDocument, IdentitySignature []byte
}
