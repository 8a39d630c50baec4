package pluginapi

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
)

// InvalidAnswerError: a plugin answered a call with data the host cannot
// trust (negative memory, duplicate type names, an instance without an ID).
// The client rejects such an answer whole rather than pass it on.
type InvalidAnswerError struct {
	Call    string
	Problem string
	// Err is the validation error behind Problem, for errors.Is (for
	// example ErrNoCompatibleAPIVersion).
	Err error
}

func (e *InvalidAnswerError) Error() string {
	return fmt.Sprintf("plugin gave an invalid answer to %s: %s", e.Call, e.Problem)
}

// Unwrap returns the validation error.
func (e *InvalidAnswerError) Unwrap() error { return e.Err }

// IsInvalidAnswer reports whether err is or wraps an InvalidAnswerError.
func IsInvalidAnswer(err error) bool { return isKind[*InvalidAnswerError](err) }

func invalidAnswer(call string, err error) error {
	if err == nil {
		return nil
	}
	return &InvalidAnswerError{Call: call, Problem: err.Error(), Err: err}
}

// ErrNoCompatibleAPIVersion: a plugin's GetInfo lists no API version of
// this protocol's major; host and plugin cannot work together.
var ErrNoCompatibleAPIVersion = errors.New("no compatible API version")

// ValidateInfo checks a GetInfo answer: a name, a version, at least one
// API version of this protocol's major, and volume drivers exactly with
// CapabilityVolumes, each named once.
func ValidateInfo(info *GetInfoResponse) error {
	var errs []error
	if info.Name == "" {
		errs = append(errs, errors.New("name is empty"))
	}
	if info.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	if _, ok := CompatibleAPIVersion(info.APIVersions); !ok {
		errs = append(errs, fmt.Errorf("%w: API versions %q include none of major %d", ErrNoCompatibleAPIVersion, info.APIVersions, ProtocolVersion))
	}
	switch volumes := info.Has(CapabilityVolumes); {
	case volumes && len(info.VolumeDrivers) == 0:
		errs = append(errs, fmt.Errorf("capability %q without volume drivers", CapabilityVolumes))
	case !volumes && len(info.VolumeDrivers) > 0:
		errs = append(errs, fmt.Errorf("volume drivers %q without capability %q", info.VolumeDrivers, CapabilityVolumes))
	}
	seen := make(map[string]bool, len(info.VolumeDrivers))
	for _, d := range info.VolumeDrivers {
		switch {
		case strings.TrimSpace(d) == "":
			errs = append(errs, errors.New("a volume driver is empty"))
		case seen[d]:
			errs = append(errs, fmt.Errorf("volume driver %q is listed twice", d))
		}
		seen[d] = true
	}
	return errors.Join(errs...)
}

// CompatibleAPIVersion returns the highest version in versions whose major
// is ProtocolVersion.
func CompatibleAPIVersion(versions []string) (string, bool) {
	best, bestMinor := "", -1
	for _, v := range versions {
		var major, minor int
		if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || major != ProtocolVersion {
			continue
		}
		if minor > bestMinor {
			best, bestMinor = v, minor
		}
	}
	return best, bestMinor >= 0
}

// ValidateInstanceTypes checks a catalog: unique non-empty names, positive
// CPU and memory, non-negative GPUs, disk and baseline, a baseline no larger
// than the CPU, and offerings with a known capacity type, a finite
// non-negative price and no duplicate (zone, capacity type).
func ValidateInstanceTypes(types []InstanceType) error {
	seen := make(map[string]bool, len(types))
	var errs []error
	for i := range types {
		t := &types[i]
		where := fmt.Sprintf("instance type %d (%q)", i, t.Name)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
		}
		switch {
		case t.Name == "":
			bad("name is empty")
		case seen[t.Name]:
			bad("duplicate name")
		}
		seen[t.Name] = true
		if t.MilliCPU <= 0 {
			bad("milli-CPU %d is not positive", t.MilliCPU)
		}
		if t.MemoryBytes <= 0 {
			bad("memory %d is not positive", t.MemoryBytes)
		}
		if t.GPU.Count < 0 || t.GPU.MemoryBytes < 0 {
			bad("GPU count %d or memory %d is negative", t.GPU.Count, t.GPU.MemoryBytes)
		}
		if t.LocalDiskBytes < 0 {
			bad("local disk %d is negative", t.LocalDiskBytes)
		}
		if t.BurstableBaselineMilliCPU < 0 || t.BurstableBaselineMilliCPU > t.MilliCPU {
			bad("burstable baseline %d is outside 0..%d", t.BurstableBaselineMilliCPU, t.MilliCPU)
		}
		if t.Arch == "" {
			bad("arch is empty")
		}
		offers := make(map[string]bool, len(t.Offerings))
		for _, o := range t.Offerings {
			if o.CapacityType != CapacityOnDemand && o.CapacityType != CapacitySpot {
				bad("offering in zone %q has capacity type %q, want on-demand or spot", o.Zone, o.CapacityType)
			}
			if o.PriceKnown && (o.HourlyPrice < 0 || math.IsNaN(o.HourlyPrice) || math.IsInf(o.HourlyPrice, 0)) {
				bad("offering in zone %q has price %v", o.Zone, o.HourlyPrice)
			}
			key := o.Zone + "/" + string(o.CapacityType)
			if offers[key] {
				bad("duplicate offering %s", key)
			}
			offers[key] = true
		}
	}
	return errors.Join(errs...)
}

var knownStates = map[InstanceState]bool{
	StatePending: true, StateRunning: true, StateTerminating: true, StateTerminated: true, StateUnknown: true,
}

// ValidateInstance checks one instance: an ID, a cell ID, a known state and
// non-empty addresses.
func ValidateInstance(inst *Instance) error {
	var errs []error
	if inst.ID == "" {
		errs = append(errs, errors.New("instance has no ID"))
	}
	if inst.CellID == "" {
		errs = append(errs, fmt.Errorf("instance %q has no cell ID", inst.ID))
	}
	if !knownStates[inst.State] {
		errs = append(errs, fmt.Errorf("instance %q has unknown state %q", inst.ID, inst.State))
	}
	for _, a := range inst.Addresses {
		if strings.TrimSpace(a.Address) == "" {
			errs = append(errs, fmt.Errorf("instance %q has an empty %s address", inst.ID, a.Type))
		}
	}
	if pod := inst.PodAddress(); pod != "" {
		switch ip, err := netip.ParseAddr(pod); {
		case err != nil || !ip.Is4():
			errs = append(errs, fmt.Errorf("instance %q has pod address %q, want an IPv4 address", inst.ID, pod))
		case pod == inst.PrivateAddress():
			errs = append(errs, fmt.Errorf("instance %q has its private address %s as its pod address: a pod address is the pod's own", inst.ID, pod))
		}
	}
	return errors.Join(errs...)
}

func validateInstances(insts []Instance) error {
	seen := make(map[string]bool, len(insts))
	var errs []error
	for i := range insts {
		if err := ValidateInstance(&insts[i]); err != nil {
			errs = append(errs, err)
		}
		if id := insts[i].ID; id != "" && seen[id] {
			errs = append(errs, fmt.Errorf("instance %q appears twice", id))
		} else {
			seen[id] = true
		}
	}
	return errors.Join(errs...)
}

var knownAttachmentStates = map[AttachmentState]bool{
	AttachmentAttaching: true, AttachmentAttached: true, AttachmentDetaching: true,
}

// validateVolumeAttachment checks one attachment: an instance, a driver, a
// volume handle, a known state, and a device once it is attached.
func validateVolumeAttachment(a *VolumeAttachment) error {
	var errs []error
	if a.InstanceID == "" {
		errs = append(errs, fmt.Errorf("attachment of volume %q has no instance ID", a.VolumeHandle))
	}
	if a.Driver == "" {
		errs = append(errs, fmt.Errorf("attachment of volume %q to instance %q has no driver", a.VolumeHandle, a.InstanceID))
	}
	if a.VolumeHandle == "" {
		errs = append(errs, fmt.Errorf("attachment to instance %q has no volume handle", a.InstanceID))
	}
	if !knownAttachmentStates[a.State] {
		errs = append(errs, fmt.Errorf("attachment of volume %q to instance %q has unknown state %q", a.VolumeHandle, a.InstanceID, a.State))
	}
	if a.State == AttachmentAttached && a.Device.Serial == "" && a.Device.Path == "" {
		errs = append(errs, fmt.Errorf("volume %q is attached to instance %q without a device serial or path", a.VolumeHandle, a.InstanceID))
	}
	return errors.Join(errs...)
}

// validateAttachAnswer checks AttachVolume's answer to req: a valid
// attachment of the disk and instance asked about, attaching or attached.
func validateAttachAnswer(req *AttachVolumeRequest, a *VolumeAttachment) error {
	if err := validateVolumeAttachment(a); err != nil {
		return err
	}
	if a.InstanceID != req.InstanceID || a.Driver != req.Driver || a.VolumeHandle != req.VolumeHandle {
		return fmt.Errorf("answered the attachment of %s volume %q to instance %q, not the requested %s volume %q to %q",
			a.Driver, a.VolumeHandle, a.InstanceID, req.Driver, req.VolumeHandle, req.InstanceID)
	}
	if a.State == AttachmentDetaching {
		return fmt.Errorf("volume %q on instance %q is %s after AttachVolume; want attaching or attached", a.VolumeHandle, a.InstanceID, a.State)
	}
	return nil
}

// validateAttachments checks DescribeVolumeAttachments' answer: valid
// attachments, each of an instance asked about, none twice.
func validateAttachments(instanceIDs []string, as []VolumeAttachment) error {
	asked := make(map[string]bool, len(instanceIDs))
	for _, id := range instanceIDs {
		asked[id] = true
	}
	type key struct{ instance, driver, handle string }
	seen := make(map[key]bool, len(as))
	var errs []error
	for i := range as {
		a := &as[i]
		if err := validateVolumeAttachment(a); err != nil {
			errs = append(errs, err)
			continue
		}
		if !asked[a.InstanceID] {
			errs = append(errs, fmt.Errorf("instance %q of volume %q was not asked for", a.InstanceID, a.VolumeHandle))
		}
		k := key{a.InstanceID, a.Driver, a.VolumeHandle}
		if seen[k] {
			errs = append(errs, fmt.Errorf("volume %q appears twice on instance %q", a.VolumeHandle, a.InstanceID))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}
