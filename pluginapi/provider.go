package pluginapi

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// ProtocolVersion is the go-plugin handshake version and the major version
// of the wire protocol (proto package kip.plugin.v1). It changes only when
// the wire breaks.
const ProtocolVersion = 1

// APIVersion is the version of this contract, MAJOR.MINOR. The major equals
// ProtocolVersion; minors add fields, calls and capabilities compatibly.
// A plugin lists the versions it implements in GetInfoResponse.APIVersions;
// the host accepts a plugin that lists any version of its major
// (CompatibleAPIVersion), so a 1.0 plugin works with every 1.x host.
//
// The minor changes when a host needs to know whether a plugin offers
// something before using it: a new call, or a request or answer field the
// host would fill in or read. Clarified rules and additions an older peer
// sees as what it already knows do not change it. That is why the rules
// written down in 1.0 since (NotConfigured before Configure, an empty
// Config meaning {}, UnsupportedError.Field, how long a terminated
// instance stays visible, Launch of a terminated cell) left it at 1.0:
// the host never calls before Configure, always sends a Config, reads
// Field only for its messages, and treats a terminated instance as gone;
// an older host sees a NotConfigured error as an unclassified
// FailedPrecondition and an Unsupported without its Field. (No pluginapi
// had been released without them: the first tag, pluginapi/v1.0.0,
// carries them.)
//
// 1.1 added the optional ConsoleOutput call (CapabilityConsoleOutput),
// the scope of a QuotaExceededError (its InstanceTypes and CapacityType):
// a 1.0 host sees a scoped quota as an unscoped one, and the optional
// VerifyInstanceIdentity call (CapabilityInstanceIdentity).
//
// 1.2 added the optional volume calls (VolumeAttacher: AttachVolume,
// DetachVolume, DescribeVolumeAttachments; CapabilityVolumes),
// GetInfoResponse.VolumeDrivers, and the VolumeConflictError kind, which
// only those calls return. Its reason ConflictWrongType (and the
// error's DiskType) came later within 1.2 and left it there: a host
// decides nothing before it sees the reason (no capability announces
// it), and one that does not know the reason treats the conflict as a
// plain refusal, as it treats every reason it does not know.
const APIVersion = "1.2"

// Provider is the contract between the kip host and one cloud: it knows
// compute instances, not Kubernetes. A cloud plugin implements it and calls
// Serve; the host drives it over gRPC from another process.
//
// Rules that hold for every method:
//   - ctx carries the caller's deadline. Once ctx is done a method returns
//     promptly (the conformance suite allows 200 ms) with ctx.Err(),
//     wrapped or not: it never holds the call past its deadline to finish
//     its work. What must still be undone after that (a half-made launch)
//     is short and bounded, or left to the retry, which finds it.
//   - Until a Configure has succeeded, every method but GetInfo and
//     Configure fails with NotConfigured. The SDK's gRPC server (Serve and
//     plugintest) answers so without calling the provider; a provider
//     called directly should do the same. The host never calls before
//     Configure: it configures every plugin process first.
//   - Errors use the kinds in errors.go (NotFound, InsufficientCapacity,
//     QuotaExceeded, Throttled, InvalidConfig, Unsupported, NotConfigured,
//     Transient, and VolumeConflict from the volume calls); any other
//     error reaches the host as an unclassified failure.
//   - Every method may be called concurrently with any other.
//   - Every method is safe to retry: the host retries a call whose outcome it
//     did not see (a timeout, a plugin crash, a restart) with the same
//     request, and a retried call must not create a second resource.
//   - The plugin keeps no state only in memory that it cannot rebuild from
//     its cloud: it may be killed and restarted at any time, and the
//     restarted process must find the instances the old one launched.
type Provider interface {
	// GetInfo reports who the plugin is and what it can do. It must work
	// before Configure and must not contact the cloud. Its answer does not
	// change during the life of the process: the host and the SDK read the
	// capabilities once. Always safe to retry.
	GetInfo(ctx context.Context, req *GetInfoRequest) (*GetInfoResponse, error)

	// Configure validates and applies the plugin's configuration and the
	// cluster identity. The host calls it once after every start of the
	// plugin process, before any other call but GetInfo, and again with the
	// same values after a restart. Idempotent.
	//
	// An invalid configuration returns InvalidConfig naming the offending
	// key, never an empty one: "clusterID" for an empty ClusterID,
	// ConfigKey ("plugin.config") for a Config that is not a JSON object,
	// otherwise the plugin's own key as kip.yaml spells it under
	// plugin.config ("subnets[0]", "rateLimit.burst"). An empty Config
	// (nil, zero-length or blank, which is what kip sends when kip.yaml has
	// no plugin.config) and JSON null mean {}: no settings, every default.
	// The SDK's gRPC server answers the first two itself and hands the
	// provider "{}" for an empty Config; DecodeConfig does the rest.
	// A failed Configure leaves an earlier successful configuration in
	// force.
	Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error)

	// ListInstanceTypes returns the catalog: every instance type the plugin
	// can launch, with its offerings (zone × capacity type) and their prices
	// and availability. Read-only; safe to retry. Names are unique.
	ListInstanceTypes(ctx context.Context, req *ListInstanceTypesRequest) (*ListInstanceTypesResponse, error)

	// Launch starts one instance for one cell and returns once the cloud has
	// accepted the request, not once the instance has booted.
	//
	// Launch is idempotent on CellID: a second Launch with the same CellID
	// (after a timeout, a crash, a restart of either side) returns the
	// instance the first one created, never a second instance. Before it
	// returns, every resource it created carries the tags of StandardTags
	// plus req.Tags, so that List finds it even if the host never saw the
	// answer.
	//
	// A CellID names one instance for good. Launch of a CellID whose
	// instance has ended (by Terminate, or by the cloud) starts nothing: it
	// returns that instance, same ID, in state terminating or terminated,
	// as EC2 answers a reused ClientToken, for at least 24 hours after it
	// ended (EC2 keeps a ClientToken at least that long), even once
	// Describe and List no longer show it. (A repeated Launch with other
	// parameters, which EC2 refuses for a reused ClientToken, may fail
	// instead once the plugin cannot find the instance; it still starts
	// nothing.) The host never reuses a cell
	// ID (it is derived from the pod UID); it launches one again only after
	// a restart, for a pod it found without a live instance, and the
	// terminated answer then fails that pod with CellLost, as a lost
	// instance does, instead of running it a second time.
	//
	// Errors: InsufficientCapacity when the cloud has no capacity for this
	// type, zone and capacity type (the host tries its next candidate);
	// QuotaExceeded; Throttled (the host waits RetryAfter and retries);
	// InvalidConfig for a request the plugin cannot satisfy as configured;
	// Unsupported naming the field (UnsupportedError.Field, one of the
	// Field constants) for a feature whose capability the plugin does not
	// report, which the SDK's gRPC server answers itself
	// (GetInfoResponse.CheckLaunch). A refused Launch creates nothing.
	Launch(ctx context.Context, req *LaunchRequest) (*LaunchResponse, error)

	// Describe returns the instances with the given IDs that still exist.
	// IDs that do not exist (never did, or are gone) are absent from the
	// answer; Describe does not fail with NotFound. Read-only; safe to retry.
	//
	// An instance that has ended (by Terminate, or by the cloud: a crash, a
	// spot reclaim) may stay in Describe's and List's answers, in state
	// terminated, for a bounded time, then it is absent: EC2 shows it for
	// about an hour, the local plugin an hour for a cell whose agent kept
	// exiting, the fake not at all.
	// A terminated instance never changes state again and never comes
	// back. The host treats terminated exactly as absent: a cell whose
	// instance Describe shows terminating or terminated, or no longer
	// shows, is lost (its pod fails with CellLost); an instance List shows
	// terminated is neither adopted nor terminated again, and one it shows
	// terminating is not terminated again.
	Describe(ctx context.Context, req *DescribeRequest) (*DescribeResponse, error)

	// List returns every instance of the configured cluster that still
	// exists, in any state, and nothing of any other cluster or of no
	// cluster: the host terminates instances it finds in List that it does
	// not know. Ended instances follow Describe's rule. Read-only; safe to
	// retry.
	List(ctx context.Context, req *ListRequest) (*ListResponse, error)

	// Terminate ends an instance and everything Launch created for it.
	// Idempotent: terminating an instance that is already terminating or
	// terminated succeeds; once the instance is gone, or for an ID that
	// never existed, it returns NotFound, which the host treats as done.
	Terminate(ctx context.Context, req *TerminateRequest) (*TerminateResponse, error)
}

// EventWatcher is implemented by plugins that report CapabilityWatchEvents.
type EventWatcher interface {
	// WatchEvents streams instance state changes and interruption notices
	// of this cluster's instances until ctx ends or send fails. It returns
	// nil or ctx.Err() when ctx ends. Events are hints: the host still
	// confirms state with Describe, so a lost event costs latency, not
	// correctness. The host re-subscribes after any error or restart.
	WatchEvents(ctx context.Context, req *WatchEventsRequest, send func(*Event) error) error
}

// RegistryAuthenticator is implemented by plugins that report
// CapabilityRegistryAuth.
type RegistryAuthenticator interface {
	// RegistryAuth returns credentials for pulling image from the cloud's
	// own registry, or NotFound when the image is not in a registry the
	// plugin knows. Read-only; safe to retry.
	RegistryAuth(ctx context.Context, req *RegistryAuthRequest) (*RegistryAuthResponse, error)
}

// ConsoleOutputReader is implemented by plugins that report
// CapabilityConsoleOutput.
type ConsoleOutputReader interface {
	// ConsoleOutput returns the instance's serial console output as the
	// cloud keeps it (EC2 GetConsoleOutput: the last 64 KiB), decoded
	// text, for an operator to see why an instance never came up; the host
	// puts its last lines into the pod's CellBootFailed event. NotFound for
	// an instance that does not exist; an empty Output when the cloud has
	// none yet. Read-only; safe to retry.
	ConsoleOutput(ctx context.Context, req *ConsoleOutputRequest) (*ConsoleOutputResponse, error)
}

// InstanceIdentityVerifier is implemented by plugins that report
// CapabilityInstanceIdentity (since API 1.1).
type InstanceIdentityVerifier interface {
	// VerifyInstanceIdentity checks the cloud's signed identity of an
	// instance, as a cell's agent read it from the instance's metadata
	// and sent when the host joined it (EC2: the instance identity
	// document and its signature), before the host signs the cell's
	// certificate. It answers nil when the document is the cloud's and
	// names req.InstanceID; an error refuses the join: a plain error (the
	// identity is missing, forged, or another instance's: the message says
	// which), InvalidConfig when the plugin's own identity settings are
	// wrong, Transient when the plugin could not check now. A plugin that
	// cannot check (it was not given what it needs) answers a response
	// whose NotChecked says why: the host joins the cell and logs that.
	// Read-only; safe to retry.
	VerifyInstanceIdentity(ctx context.Context, req *VerifyInstanceIdentityRequest) (*VerifyInstanceIdentityResponse, error)
}

// VolumeAttacher is implemented by plugins that report CapabilityVolumes
// (since API 1.2): they attach the cloud's disks to the instances they
// launched, so that a pod's persistent volume reaches its cell. The host
// takes the place of the kubelet and of the attach-detach controller for
// its node: it attaches a pod's disks once the pod's instance runs, hands
// the agent what it needs to find each device (VolumeDevice), and detaches
// them after the pod's containers have stopped and before it terminates
// the instance (docs/volumes.md).
//
// A volume is named by the driver and handle of its PersistentVolume
// (spec.csi.driver and spec.csi.volumeHandle: the cloud's disk ID); the
// plugin lists the drivers it attaches in GetInfoResponse.VolumeDrivers,
// and a request for another driver is Unsupported with Field
// FieldVolumeDriver.
type VolumeAttacher interface {
	// AttachVolume attaches a disk to an instance and returns once the
	// cloud has accepted the request, not once the disk is attached: the
	// attachment it answers may be attaching, and the host polls
	// DescribeVolumeAttachments until it is attached.
	//
	// Idempotent on (InstanceID, Driver, VolumeHandle): attaching a disk
	// that is attaching or attached to the same instance answers that
	// attachment, with the same device; it never attaches twice.
	//
	// Errors: NotFound when the instance or the disk does not exist;
	// VolumeConflict when the disk is attached to another instance
	// (ConflictInUse: the host waits for the other pod's cell to detach
	// it, as the kubelet waits out a Multi-Attach error), lies in another
	// zone than the instance (ConflictWrongZone), the instance has no
	// free attachment slot (ConflictAttachmentLimit), or the instance's
	// type cannot take a disk of this type (ConflictWrongType, with the
	// disk's type where the plugin knows it: it never clears for this
	// instance type, and the host launches the pod's cell again on
	// another); Unsupported with
	// Field FieldVolumeDriver for a driver the plugin does not attach, or
	// FieldReadOnly for a read-only attachment the cloud does not offer;
	// Throttled, Transient. A refused AttachVolume attaches nothing.
	AttachVolume(ctx context.Context, req *AttachVolumeRequest) (*AttachVolumeResponse, error)

	// DetachVolume detaches a disk from an instance and returns once the
	// cloud has accepted the request: the attachment may be detaching,
	// and the host polls DescribeVolumeAttachments until it is gone.
	// Idempotent: detaching a disk that is detaching succeeds; once the
	// disk is not attached to that instance (or for a disk or instance
	// that never existed) it returns NotFound, which the host treats as
	// done. The host detaches only after the agent has unmounted the disk
	// (or the instance is lost); the plugin forces nothing.
	DetachVolume(ctx context.Context, req *DetachVolumeRequest) (*DetachVolumeResponse, error)

	// DescribeVolumeAttachments returns the disks of the plugin's drivers
	// attached, attaching or detaching to each of the given instances, so
	// that a host restarted after a kill finds what it attached. An
	// instance that does not exist has none (no NotFound). Like Describe,
	// the answer may lag the cloud by its eventual consistency: a disk
	// AttachVolume answered stays in the answer, attaching, until the
	// cloud shows it. Read-only; safe to retry.
	DescribeVolumeAttachments(ctx context.Context, req *DescribeVolumeAttachmentsRequest) (*DescribeVolumeAttachmentsResponse, error)
}

// Client is the host's view of a plugin: every call of the contract,
// including the optional ones, which answer Unsupported when the plugin
// lacks the capability.
type Client interface {
	Provider
	EventWatcher
	RegistryAuthenticator
	ConsoleOutputReader
	InstanceIdentityVerifier
	VolumeAttacher
}

// Capability names an optional feature of a plugin. New capabilities are
// added as new strings; a host ignores names it does not know.
type Capability string

// Capabilities a plugin may report in GetInfoResponse.Capabilities.
const (
	// CapabilitySpot: Launch accepts CapacitySpot.
	CapabilitySpot Capability = "spot"
	// CapabilityGPU: the catalog holds GPU instance types.
	CapabilityGPU Capability = "gpu"
	// CapabilitySecurityGroups: Launch honours SecurityGroups.
	CapabilitySecurityGroups Capability = "security-groups"
	// CapabilityInstanceProfiles: Launch honours InstanceProfile.
	CapabilityInstanceProfiles Capability = "instance-profiles"
	// CapabilityVolumeSize: Launch honours VolumeSizeGiB.
	CapabilityVolumeSize Capability = "volume-size"
	// CapabilityWatchEvents: the plugin implements EventWatcher.
	CapabilityWatchEvents Capability = "watch-events"
	// CapabilityInterruptionEvents: WatchEvents reports spot interruptions
	// and maintenance before they happen.
	CapabilityInterruptionEvents Capability = "interruption-events"
	// CapabilityRegistryAuth: the plugin implements RegistryAuthenticator.
	CapabilityRegistryAuth Capability = "registry-auth"
	// CapabilityConsoleOutput: the plugin implements ConsoleOutputReader
	// (since 1.1).
	CapabilityConsoleOutput Capability = "console-output"
	// CapabilityInstanceIdentity: the plugin implements
	// InstanceIdentityVerifier (since API 1.1).
	CapabilityInstanceIdentity Capability = "instance-identity"
	// CapabilityVolumes: the plugin implements VolumeAttacher for the
	// drivers in GetInfoResponse.VolumeDrivers (since API 1.2).
	CapabilityVolumes Capability = "volumes"
)

// GetInfoRequest asks a plugin for its identity.
type GetInfoRequest struct{}

// GetInfoResponse is a plugin's identity and abilities.
type GetInfoResponse struct {
	// Name is the plugin's short name, the <name> of kip-plugin-<name>.
	Name string `json:"name"`
	// Version is the plugin's own release version (semver).
	Version string `json:"version"`
	// APIVersions lists the contract versions (APIVersion) it implements.
	APIVersions []string `json:"apiVersions"`
	// Capabilities lists the optional features it offers.
	Capabilities []Capability `json:"capabilities,omitempty"`
	// ConfigSchema is a JSON Schema of the plugin's configuration, for
	// documentation and tooling; Configure remains the authority.
	ConfigSchema string `json:"configSchema,omitempty"`
	// Catalog says where the instance-type catalog came from and when.
	Catalog CatalogInfo `json:"catalog"`
	// VolumeDrivers are the CSI drivers whose volumes AttachVolume takes
	// (spec.csi.driver of a PersistentVolume: "ebs.csi.aws.com"), with
	// CapabilityVolumes (since API 1.2).
	VolumeDrivers []string `json:"volumeDrivers,omitempty"`
}

// Has reports whether the plugin offers capability c.
func (r *GetInfoResponse) Has(c Capability) bool {
	for _, have := range r.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// CheckLaunch returns an UnsupportedError naming the first field of req
// that asks for a capability r does not report (spot capacity, security
// groups, an instance profile, a volume size), or nil. The SDK's gRPC
// server applies it to every Launch; a provider may call it to answer a
// direct call the same way.
func (r *GetInfoResponse) CheckLaunch(req *LaunchRequest) error {
	switch {
	case req.CapacityType == CapacitySpot && !r.Has(CapabilitySpot):
		return NewUnsupportedField(FieldCapacityType, "plugin %s does not offer spot capacity (capability %q)", r.Name, CapabilitySpot)
	case len(req.SecurityGroups) > 0 && !r.Has(CapabilitySecurityGroups):
		return NewUnsupportedField(FieldSecurityGroups, "plugin %s does not support security groups (capability %q)", r.Name, CapabilitySecurityGroups)
	case req.InstanceProfile != "" && !r.Has(CapabilityInstanceProfiles):
		return NewUnsupportedField(FieldInstanceProfile, "plugin %s does not support instance profiles (capability %q)", r.Name, CapabilityInstanceProfiles)
	case req.VolumeSizeGiB != 0 && !r.Has(CapabilityVolumeSize):
		return NewUnsupportedField(FieldVolumeSizeGiB, "plugin %s does not support a root volume size (capability %q)", r.Name, CapabilityVolumeSize)
	}
	return nil
}

// CheckVolumeDriver returns the UnsupportedError an AttachVolume or
// DetachVolume for driver answers when r does not report CapabilityVolumes
// (the whole call, no Field) or does not list driver among its
// VolumeDrivers (Field FieldVolumeDriver), or nil. The SDK's gRPC server
// applies it to every AttachVolume and DetachVolume; a provider may call it
// to answer a direct call the same way.
func (r *GetInfoResponse) CheckVolumeDriver(driver string) error {
	switch {
	case !r.Has(CapabilityVolumes):
		return NewUnsupported("plugin %s does not attach volumes (capability %q)", r.Name, CapabilityVolumes)
	case !slices.Contains(r.VolumeDrivers, driver):
		return NewUnsupportedField(FieldVolumeDriver, "plugin %s does not attach volumes of driver %q, only of %q", r.Name, driver, r.VolumeDrivers)
	}
	return nil
}

// Capacity is the first check of every Launch: it returns the capacity
// req asks for (on-demand when it names none), or an error for a request
// without a cell ID or instance type, or with a capacity type that is
// neither on-demand nor spot.
func (req *LaunchRequest) Capacity() (CapacityType, error) {
	switch {
	case req.CellID == "":
		return "", fmt.Errorf("the request has no cell ID")
	case req.InstanceType == "":
		return "", fmt.Errorf("the request has no instance type")
	}
	switch req.CapacityType {
	case "":
		return CapacityOnDemand, nil
	case CapacityOnDemand, CapacitySpot:
		return req.CapacityType, nil
	}
	return "", fmt.Errorf("capacity type %q is neither %s nor %s", req.CapacityType, CapacityOnDemand, CapacitySpot)
}

// CatalogInfo describes the provenance of a plugin's catalog.
type CatalogInfo struct {
	// Source names where prices and sizes came from.
	Source string `json:"source,omitempty"`
	// GeneratedAt is when the catalog was built; zero when unknown.
	GeneratedAt time.Time `json:"generatedAt,omitzero"`
}

// ConfigureRequest carries the plugin's configuration.
type ConfigureRequest struct {
	// ClusterID identifies the Kubernetes cluster; every instance is tagged
	// with it and List returns only instances carrying it. Never empty:
	// Configure refuses an empty one with InvalidConfig key "clusterID".
	ClusterID string
	// NodeName is the name of the virtual node this plugin serves.
	NodeName string
	// Config is the plugin's own configuration as a JSON object (the
	// plugin.config section of kip's configuration). Empty (nil,
	// zero-length or blank) and null mean {}.
	Config []byte
}

// ConfigureResponse acknowledges a configuration.
type ConfigureResponse struct {
	// Warnings are shown to the operator; they do not fail Configure.
	Warnings []string
}

// ListInstanceTypesRequest asks for the catalog.
type ListInstanceTypesRequest struct{}

// ListInstanceTypesResponse is the catalog.
type ListInstanceTypesResponse struct {
	InstanceTypes []InstanceType
}

// Arch is a CPU architecture, in GOARCH spelling as in kubernetes.io/arch.
type Arch string

// Architectures.
const (
	ArchAMD64 Arch = "amd64"
	ArchARM64 Arch = "arm64"
)

// CapacityType is how an instance is bought.
type CapacityType string

// Capacity types.
const (
	CapacityOnDemand CapacityType = "on-demand"
	CapacitySpot     CapacityType = "spot"
)

// InstanceType is one launchable machine shape.
type InstanceType struct {
	// Name is the cloud's name for the type, unique in a catalog.
	Name string
	// MilliCPU is the number of vCPUs × 1000.
	MilliCPU int64
	// MemoryBytes is the instance's memory.
	MemoryBytes int64
	// GPU describes attached accelerators; zero Count means none.
	GPU GPU
	// Arch is the CPU architecture.
	Arch Arch
	// BurstableBaselineMilliCPU is the sustained CPU of a burstable type
	// (credits-based); zero for a type that is not burstable.
	BurstableBaselineMilliCPU int64
	// LocalDiskBytes is instance-store disk; zero when none.
	LocalDiskBytes int64
	// Offerings are the zones and capacity types the type is sold in.
	Offerings []Offering
}

// GPU describes the accelerators of an instance type.
type GPU struct {
	Count int32
	// Kind is the accelerator model in lower case, such as "t4" or "a100".
	Kind string
	// MemoryBytes is the memory of one accelerator.
	MemoryBytes int64
}

// Offering is an instance type sold in one zone with one capacity type.
type Offering struct {
	Zone         string
	CapacityType CapacityType
	// HourlyPrice is the price in US dollars per hour; meaningful only
	// when PriceKnown. A price without a source is left unknown, never
	// guessed.
	HourlyPrice float64
	PriceKnown  bool
	// Available is false when the cloud reports the offering cannot be
	// launched now.
	Available bool
}

// LaunchRequest asks for one instance for one cell.
type LaunchRequest struct {
	// CellID is the idempotency key, unique per cell, at most 63
	// characters of [a-z0-9-].
	CellID string
	// NodeName, PodUID, PodNamespace and PodName identify the pod the cell
	// is for; PodUID and NodeName are among the tags. PodUID, PodNamespace
	// and PodName are empty for a standby cell of the host's warm pool,
	// launched before any pod is: its tags carry TagWarmPool instead, and
	// the first pod the host gives it binds it (its agent keeps that pod,
	// and its tags stay as launched). A plugin launches such a request as
	// any other, with an empty pod-uid tag.
	NodeName     string
	PodUID       string
	PodNamespace string
	PodName      string
	// InstanceType names a type from ListInstanceTypes.
	InstanceType string
	// CapacityType is on-demand or spot.
	CapacityType CapacityType
	// Zones are acceptable zones in preference order; empty means any.
	Zones []string
	// Image is the cell image in the cloud's terms (an AMI ID, an image
	// URL); empty means the plugin's configured default.
	Image string
	// Bootstrap is the cell's bootstrap document, delivered to the instance
	// as user data (or, for local cells, as a file).
	Bootstrap []byte
	// Tags are extra tags to put on every resource, beside StandardTags.
	Tags map[string]string
	// SecurityGroups and InstanceProfile apply where the plugin has the
	// capability; a plugin without it returns Unsupported naming the field
	// (FieldSecurityGroups, FieldInstanceProfile) if they are set. They
	// come from the pod's annotations, and a pod author is not trusted
	// with the account: a plugin with the capability accepts only values
	// its operator allowed in its configuration (its defaults, and an
	// allow-list that refuses everything while empty), and refuses others
	// with InvalidConfig naming the allow-list key, its message naming the
	// annotation and the value, which the host shows on the pod.
	SecurityGroups  []string
	InstanceProfile string
	// VolumeSizeGiB is the root volume size; zero means the default. A
	// plugin without CapabilityVolumeSize returns Unsupported naming
	// FieldVolumeSizeGiB if it is set.
	VolumeSizeGiB int32
	// UnlimitedCPUCredits launches a burstable type with unlimited CPU
	// credits (AWS CreditSpecification "unlimited"): the host chose the
	// type under the unlimited burstable policy, its baseline is below the
	// pod's CPU, and the surplus credits are priced into the choice. A
	// cloud without CPU credits ignores it.
	UnlimitedCPUCredits bool
}

// LaunchResponse is the accepted instance.
type LaunchResponse struct {
	Instance Instance
}

// InstanceState is the lifecycle state of an instance.
type InstanceState string

// Instance states.
const (
	StatePending     InstanceState = "pending"
	StateRunning     InstanceState = "running"
	StateTerminating InstanceState = "terminating"
	StateTerminated  InstanceState = "terminated"
	StateUnknown     InstanceState = "unknown"
)

// AddressType classifies an instance address.
type AddressType string

// Address types.
const (
	AddressPrivate AddressType = "private"
	AddressPublic  AddressType = "public"
	// AddressPod is the pod's own IPv4 address, not the instance's: one
	// the cloud routes to the instance (a secondary private address of its
	// interface, an alias IP, a second IP configuration; the local plugin:
	// a second address on its bridge), which the instance does not
	// configure on itself. The host gives it to the cell's agent, which
	// puts the pod in a network namespace of its own with it, apart from
	// the instance's, and the pod reports it as its podIP; the agent stays
	// at the private address. An instance without one runs its pod in the
	// instance's network namespace at the private address, where the pod
	// reaches whatever the instance does.
	AddressPod AddressType = "pod"
)

// Address is one network address of an instance.
type Address struct {
	Type    AddressType
	Address string
}

// Instance is one cloud instance launched for a cell.
type Instance struct {
	// ID is the cloud's instance ID; never empty.
	ID     string
	CellID string
	// InstanceType, CapacityType and Zone are what the cloud actually
	// launched.
	InstanceType string
	CapacityType CapacityType
	Zone         string
	State        InstanceState
	// StateReason explains the state when the cloud gives a reason
	// ("spot interruption", "exit status 1").
	StateReason string
	// Addresses are where the cell agent can be reached once running.
	Addresses []Address
	// Tags are the instance's tags, including StandardTags.
	Tags       map[string]string
	LaunchedAt time.Time
}

// PrivateAddress returns the first private address, or "".
func (i *Instance) PrivateAddress() string {
	for _, a := range i.Addresses {
		if a.Type == AddressPrivate {
			return a.Address
		}
	}
	return ""
}

// PodAddress returns the pod's own address (AddressPod), or "".
func (i *Instance) PodAddress() string {
	for _, a := range i.Addresses {
		if a.Type == AddressPod {
			return a.Address
		}
	}
	return ""
}

// DescribeRequest names instances by ID.
type DescribeRequest struct {
	IDs []string
}

// DescribeResponse holds the named instances that exist.
type DescribeResponse struct {
	Instances []Instance
}

// ListRequest asks for the cluster's instances.
type ListRequest struct{}

// ListResponse holds the cluster's instances.
type ListResponse struct {
	Instances []Instance
}

// TerminateRequest names the instance to end.
type TerminateRequest struct {
	ID string
}

// TerminateResponse is the instance as the cloud reports it after the
// request, usually terminating or terminated.
type TerminateResponse struct {
	Instance Instance
}

// WatchEventsRequest subscribes to instance events.
type WatchEventsRequest struct{}

// EventType classifies an Event.
type EventType string

// Event types.
const (
	// EventStateChange: the instance moved to Event.State.
	EventStateChange EventType = "state-change"
	// EventInterruption: the cloud will reclaim the instance (spot) by
	// Event.Deadline.
	EventInterruption EventType = "interruption"
	// EventRebalance: the cloud recommends replacing the instance soon.
	EventRebalance EventType = "rebalance"
	// EventMaintenance: the cloud will stop or move the instance for
	// maintenance by Event.Deadline.
	EventMaintenance EventType = "maintenance"
)

// Event is a change to one instance.
type Event struct {
	Type       EventType
	InstanceID string
	CellID     string
	State      InstanceState
	Reason     string
	Time       time.Time
	Deadline   time.Time
}

// RegistryAuthRequest names an image to pull.
type RegistryAuthRequest struct {
	Image string
}

// RegistryAuthResponse holds pull credentials.
type RegistryAuthResponse struct {
	Server    string
	Username  string
	Password  string
	ExpiresAt time.Time
}

// ConsoleOutputRequest names the instance whose console output is read.
type ConsoleOutputRequest struct {
	InstanceID string
}

// ConsoleOutputResponse is an instance's console output.
type ConsoleOutputResponse struct {
	// Output is the console text, empty when the cloud has none yet.
	Output string
	// Timestamp is when the cloud captured it; zero when unknown.
	Timestamp time.Time
}

// Standard tag keys. Launch puts these on every resource it creates.
const (
	TagCluster = "kipcell.io/cluster"
	TagNode    = "kipcell.io/node"
	TagCell    = "kipcell.io/cell"
	TagPodUID  = "kipcell.io/pod-uid"
)

// TagWarmPool is the extra tag (LaunchRequest.Tags) of a standby cell of
// the host's warm pool: the pool's name. Such a launch has no pod.
const TagWarmPool = "kipcell.io/warm-pool"

// StandardTags returns req.Tags plus the four standard tags (cluster, node,
// cell, pod UID). The standard tags win over same-named extra tags.
func StandardTags(clusterID string, req *LaunchRequest) map[string]string {
	tags := make(map[string]string, len(req.Tags)+4)
	for k, v := range req.Tags {
		tags[k] = v
	}
	tags[TagCluster] = clusterID
	tags[TagNode] = req.NodeName
	tags[TagCell] = req.CellID
	tags[TagPodUID] = req.PodUID
	return tags
}

// VerifyInstanceIdentityRequest is a cell's signed instance identity.
type VerifyInstanceIdentityRequest struct {
	// InstanceID is the instance the host launched the cell on: the
	// identity must name it.
	InstanceID string
	// Document and Signature are what the agent read from the instance's
	// metadata, verbatim (EC2: /latest/dynamic/instance-identity/document
	// and .../signature); empty when the agent had none.
	Document  []byte
	Signature []byte
}

// VerifyInstanceIdentityResponse is a verifier's answer when it has not
// refused.
type VerifyInstanceIdentityResponse struct {
	// NotChecked, when not empty, says why the plugin did not check the
	// identity (it is not configured to); empty: the identity checked out.
	NotChecked string
}

// AttachVolumeRequest asks for a disk to be attached to an instance.
type AttachVolumeRequest struct {
	// InstanceID is the instance, as Launch answered it.
	InstanceID string
	// Driver and VolumeHandle name the disk as its PersistentVolume does
	// (spec.csi.driver, spec.csi.volumeHandle).
	Driver       string
	VolumeHandle string
	// ReadOnly attaches the disk read-only where the cloud offers that
	// (Compute Engine's READ_ONLY mode); a plugin whose cloud does not
	// answers Unsupported with Field FieldReadOnly, and the host then
	// attaches read-write and mounts read-only.
	ReadOnly bool
}

// AttachVolumeResponse is the attachment AttachVolume made or found.
type AttachVolumeResponse struct {
	Attachment VolumeAttachment
}

// DetachVolumeRequest asks for a disk to be detached from an instance.
type DetachVolumeRequest struct {
	InstanceID   string
	Driver       string
	VolumeHandle string
}

// DetachVolumeResponse acknowledges a detach.
type DetachVolumeResponse struct{}

// DescribeVolumeAttachmentsRequest names the instances whose attachments
// to list.
type DescribeVolumeAttachmentsRequest struct {
	InstanceIDs []string
}

// DescribeVolumeAttachmentsResponse lists attachments, in no order.
type DescribeVolumeAttachmentsResponse struct {
	Attachments []VolumeAttachment
}

// AttachmentState is where an attachment stands.
type AttachmentState string

// Attachment states. An attachment that is gone is absent from answers.
const (
	AttachmentAttaching AttachmentState = "attaching"
	AttachmentAttached  AttachmentState = "attached"
	AttachmentDetaching AttachmentState = "detaching"
)

// VolumeAttachment is one disk attached (or on its way) to one instance.
type VolumeAttachment struct {
	InstanceID   string
	Driver       string
	VolumeHandle string
	State        AttachmentState
	ReadOnly     bool
	// Device tells the instance's agent which of its block devices the
	// disk is; set at least once the attachment is attached.
	Device VolumeDevice
}

// VolumeDevice identifies an attached disk on its instance, the way the
// clouds' CSI node plugins find it. The agent takes the first block device
// that Serial matches, else Path once it exists; a plugin sets what its
// cloud guarantees.
type VolumeDevice struct {
	// Serial is the disk's serial number as the instance's kernel reports
	// it (/sys/block/<device>/serial, or device/serial; EC2's NVMe disks:
	// the volume ID without its dash, "vol0123456789abcdef0").
	Serial string
	// Path is the device's stable path on the instance
	// ("/dev/disk/by-id/google-<device name>",
	// "/dev/disk/azure/scsi1/lun3"), or its name where the cloud keeps the
	// one it was given ("/dev/xvdf").
	Path string
}
