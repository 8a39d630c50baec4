package pluginapi

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The error kinds of the contract. A plugin returns them (wrapped or not)
// from Provider methods; they cross the process boundary as gRPC statuses
// with an ErrorDetail and arrive at the host as the same Go types, so the
// host decides with errors.As or the Is helpers, never by message text.
//
// Each kind has a New constructor and an Is test; NotFound also has
// IgnoreNotFound for idempotent callers.
//
// A kind this version does not know arrives as a PluginError with the
// gRPC code it was sent with; kinds are added within a major version only
// when an older peer may see them as that (NotConfigured was added so).

// NotFoundError: the named instance does not exist (any more).
type NotFoundError struct {
	Message string
}

func (e *NotFoundError) Error() string { return "not found: " + e.Message }

// NewNotFound returns a NotFoundError with a formatted message.
func NewNotFound(format string, args ...any) error {
	return &NotFoundError{Message: fmt.Sprintf(format, args...)}
}

// IsNotFound reports whether err is or wraps a NotFoundError.
func IsNotFound(err error) bool { return isKind[*NotFoundError](err) }

// IgnoreNotFound returns nil for a NotFoundError and err otherwise.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// InsufficientCapacityError: the cloud has no capacity for this instance
// type in this zone with this capacity type right now. The host marks the
// offering unavailable for a while and tries its next candidate.
type InsufficientCapacityError struct {
	InstanceType string
	Zone         string
	CapacityType CapacityType
	Message      string
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity for %s (zone %q, %s): %s",
		e.InstanceType, e.Zone, e.CapacityType, e.Message)
}

// NewInsufficientCapacity returns an InsufficientCapacityError.
func NewInsufficientCapacity(instanceType, zone string, capacity CapacityType, message string) error {
	return &InsufficientCapacityError{InstanceType: instanceType, Zone: zone, CapacityType: capacity, Message: message}
}

// IsInsufficientCapacity reports whether err is or wraps an
// InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool { return isKind[*InsufficientCapacityError](err) }

// QuotaExceededError: an account limit (vCPUs, instances) stops the launch.
// Retrying the same request will not help until the quota changes.
//
// A quota may say what it covers (since 1.1): InstanceTypes lists the
// instance types it counts (EC2's vCPU limit covers a group of families,
// "Standard (A, C, D, H, I, M, R, T, Z)"), empty for every type;
// CapacityType is the capacity type it counts, empty for every one. The
// host then marks those offerings unavailable, as after
// InsufficientCapacity, and tries its next candidate (a spot pod that may
// fall back gets on-demand). A quota with neither is unscoped: the host
// reports it on the pod and ranks again slowly.
type QuotaExceededError struct {
	InstanceTypes []string
	CapacityType  CapacityType
	Message       string
}

func (e *QuotaExceededError) Error() string { return "quota exceeded: " + e.Message }

// Scoped reports whether the quota says which offerings it covers.
func (e *QuotaExceededError) Scoped() bool { return len(e.InstanceTypes) > 0 || e.CapacityType != "" }

// Covers reports whether the quota counts instances of typ with capacity
// type ct.
func (e *QuotaExceededError) Covers(typ string, ct CapacityType) bool {
	if e.CapacityType != "" && e.CapacityType != ct {
		return false
	}
	return len(e.InstanceTypes) == 0 || slices.Contains(e.InstanceTypes, typ)
}

// NewQuotaExceededFor returns a QuotaExceededError scoped to instanceTypes
// (nil: every type) with capacity type ct (empty: every one).
func NewQuotaExceededFor(instanceTypes []string, ct CapacityType, message string) error {
	return &QuotaExceededError{InstanceTypes: instanceTypes, CapacityType: ct, Message: message}
}

// NewQuotaExceeded returns a QuotaExceededError with a formatted message.
func NewQuotaExceeded(format string, args ...any) error {
	return &QuotaExceededError{Message: fmt.Sprintf(format, args...)}
}

// IsQuotaExceeded reports whether err is or wraps a QuotaExceededError.
func IsQuotaExceeded(err error) bool { return isKind[*QuotaExceededError](err) }

// ThrottledError: the cloud rate-limited the call. The caller waits
// RetryAfter (if set) and retries.
type ThrottledError struct {
	RetryAfter time.Duration
	Message    string
}

func (e *ThrottledError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("throttled (retry after %s): %s", e.RetryAfter, e.Message)
	}
	return "throttled: " + e.Message
}

// NewThrottled returns a ThrottledError.
func NewThrottled(retryAfter time.Duration, message string) error {
	return &ThrottledError{RetryAfter: retryAfter, Message: message}
}

// IsThrottled reports whether err is or wraps a ThrottledError.
func IsThrottled(err error) bool { return isKind[*ThrottledError](err) }

// InvalidConfigError: the plugin's configuration, or a request field that
// depends on it, is invalid. Key names the offending configuration key in
// dotted form, relative to plugin.config as kip.yaml spells it
// ("subnets[0]", "region", "rateLimit.burst"), and is never empty:
// "clusterID" for a missing cluster ID, "plugin.config" when the
// configuration as a whole is wrong (not a JSON object), the object's own
// key ("rateLimit") when a nested object is. The host prints it as
// "invalid config: <key>: <message>".
type InvalidConfigError struct {
	Key     string
	Message string
}

func (e *InvalidConfigError) Error() string {
	if e.Key == "" {
		return "invalid config: " + e.Message
	}
	return fmt.Sprintf("invalid config: %s: %s", e.Key, e.Message)
}

// NewInvalidConfig returns an InvalidConfigError for key.
func NewInvalidConfig(key, format string, args ...any) error {
	return &InvalidConfigError{Key: key, Message: fmt.Sprintf(format, args...)}
}

// IsInvalidConfig reports whether err is or wraps an InvalidConfigError.
func IsInvalidConfig(err error) bool { return isKind[*InvalidConfigError](err) }

// UnsupportedError: the plugin does not implement the call or a feature the
// request asks for. Field names the request field that asks for it, as the
// wire protocol (plugin.proto) names it: one of the Field constants, such
// as FieldSecurityGroups ("security_groups"); it is empty when the whole
// call is unsupported (WatchEvents of a plugin without the capability).
type UnsupportedError struct {
	Field   string
	Message string
}

func (e *UnsupportedError) Error() string {
	if e.Field == "" {
		return "unsupported: " + e.Message
	}
	return fmt.Sprintf("unsupported: %s: %s", e.Field, e.Message)
}

// NewUnsupported returns an UnsupportedError with a formatted message, for
// a call the plugin does not implement. For a request field it does not
// support, use NewUnsupportedField.
func NewUnsupported(format string, args ...any) error {
	return &UnsupportedError{Message: fmt.Sprintf(format, args...)}
}

// NewUnsupportedField returns an UnsupportedError naming the request field
// (a Field constant) the plugin does not support.
func NewUnsupportedField(field, format string, args ...any) error {
	return &UnsupportedError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Names of the LaunchRequest fields a plugin may not support, as
// plugin.proto names them: UnsupportedError.Field is one of these.
const (
	// FieldCapacityType: CapacityType spot without CapabilitySpot.
	FieldCapacityType = "capacity_type"
	// FieldSecurityGroups: SecurityGroups without CapabilitySecurityGroups.
	FieldSecurityGroups = "security_groups"
	// FieldInstanceProfile: InstanceProfile without
	// CapabilityInstanceProfiles.
	FieldInstanceProfile = "instance_profile"
	// FieldVolumeSizeGiB: VolumeSizeGiB without CapabilityVolumeSize.
	FieldVolumeSizeGiB = "volume_size_gib"
	// FieldUnlimitedCPUCredits: UnlimitedCPUCredits for a type the cloud
	// gives no CPU credits.
	FieldUnlimitedCPUCredits = "unlimited_cpu_credits" //nolint:gosec // a field name, not a credential
	// FieldVolumeDriver: AttachVolumeRequest.Driver not among the
	// plugin's VolumeDrivers (since API 1.2).
	FieldVolumeDriver = "driver"
	// FieldReadOnly: AttachVolumeRequest.ReadOnly where the cloud has no
	// read-only attachment (since API 1.2).
	FieldReadOnly = "read_only"
)

// IsUnsupported reports whether err is or wraps an UnsupportedError.
func IsUnsupported(err error) bool { return isKind[*UnsupportedError](err) }

// VolumeConflictError: a disk cannot be attached to the instance now, for
// the Reason given (since API 1.2; only the volume calls return it).
type VolumeConflictError struct {
	Reason       VolumeConflictReason
	VolumeHandle string
	// InstanceID is the other instance the disk is attached to, for
	// ConflictInUse, where the cloud says.
	InstanceID string
	// DiskType is the disk's type as the cloud names it ("pd-standard",
	// "Premium_LRS"), for ConflictWrongType, where the plugin knows it
	// (since API 1.2; the host only says it on the pod).
	DiskType string
	Message  string
}

// VolumeConflictReason says why a disk cannot be attached.
type VolumeConflictReason string

// Volume conflict reasons.
const (
	// ConflictInUse: the disk is attached to another instance (EC2's
	// VolumeInUse; Compute Engine's RESOURCE_IN_USE_BY_ANOTHER_RESOURCE;
	// Azure's AttachDiskWhileBeingDetached or a disk owned by another
	// VM). It clears once the other instance detaches it.
	ConflictInUse VolumeConflictReason = "in-use"
	// ConflictWrongZone: the disk lies in another zone than the instance;
	// it never clears for this instance.
	ConflictWrongZone VolumeConflictReason = "wrong-zone"
	// ConflictAttachmentLimit: the instance has no free slot for another
	// disk (EC2's AttachmentLimitExceeded); it never clears for this
	// instance.
	ConflictAttachmentLimit VolumeConflictReason = "attachment-limit"
	// ConflictWrongType: the instance's type cannot take a disk of this
	// type (Compute Engine's UNSUPPORTED_OPERATION "[pd-standard] features
	// are not compatible" on an N4 or C3 machine; Azure's
	// BadRequest for a Premium_LRS disk on a size without premium
	// storage). It never clears for this instance type: the host places
	// the pod's cell again on another type. A host that does not know the
	// reason sees a plain refusal, as any reason it does not know.
	ConflictWrongType VolumeConflictReason = "wrong-type"
)

func (e *VolumeConflictError) Error() string {
	return fmt.Sprintf("volume %s %s: %s", e.VolumeHandle, e.Reason, e.Message)
}

// NewVolumeConflict returns a VolumeConflictError.
func NewVolumeConflict(reason VolumeConflictReason, volumeHandle, otherInstance, message string) error {
	return &VolumeConflictError{Reason: reason, VolumeHandle: volumeHandle, InstanceID: otherInstance, Message: message}
}

// NewVolumeWrongType returns a VolumeConflictError with ConflictWrongType
// for a disk of diskType ("" when the plugin does not know it) that the
// instance's type cannot take.
func NewVolumeWrongType(volumeHandle, diskType, message string) error {
	return &VolumeConflictError{Reason: ConflictWrongType, VolumeHandle: volumeHandle, DiskType: diskType, Message: message}
}

// IsVolumeConflict reports whether err is or wraps a VolumeConflictError.
func IsVolumeConflict(err error) bool { return isKind[*VolumeConflictError](err) }

// NotConfiguredError: a call that needs the plugin's configuration came
// before a Configure succeeded. The SDK's gRPC server (Serve, plugintest)
// answers it for every call but GetInfo and Configure until then, so a Go
// plugin gets it for free; the host never makes such a call (it configures
// every plugin process first), so seeing it is a bug in the caller.
type NotConfiguredError struct {
	Message string
}

func (e *NotConfiguredError) Error() string { return "not configured: " + e.Message }

// NewNotConfigured returns a NotConfiguredError with a formatted message.
func NewNotConfigured(format string, args ...any) error {
	return &NotConfiguredError{Message: fmt.Sprintf(format, args...)}
}

// IsNotConfigured reports whether err is or wraps a NotConfiguredError.
func IsNotConfigured(err error) bool { return isKind[*NotConfiguredError](err) }

// TransientError: a temporary failure (a 5xx from the cloud, a dropped
// connection); the same call may succeed if retried.
type TransientError struct {
	Message string
	// unreachable marks a failure to reach the plugin process itself, as
	// opposed to a transient failure the plugin reported.
	unreachable bool
}

func (e *TransientError) Error() string { return "transient: " + e.Message }

// NewTransient returns a TransientError with a formatted message.
func NewTransient(format string, args ...any) error {
	return &TransientError{Message: fmt.Sprintf(format, args...)}
}

// IsTransient reports whether err is or wraps a TransientError, which
// includes failures to reach the plugin (see IsUnreachable).
func IsTransient(err error) bool { return isKind[*TransientError](err) }

// IsUnreachable reports whether err says the plugin process could not be
// reached (it exited, or its connection broke) rather than that the plugin
// answered with an error. Such a call may or may not have taken effect.
func IsUnreachable(err error) bool {
	var t *TransientError
	return errors.As(err, &t) && t.unreachable
}

func isKind[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
