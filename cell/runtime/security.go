package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cap"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Security is a container's security settings as the kubelet hands them to
// a CRI runtime (its LinuxContainerSecurityContext), already resolved from
// the pod's and the container's securityContext. The zero Security is the
// runtime's defaults: the image's USER, containerd's default capability
// set, masked and read-only /proc paths, no seccomp profile.
type Security struct {
	// User is who the process runs as, in the forms of an image's USER:
	// "uid", "uid:gid", "name" or "name:group"; a name is resolved in the
	// image's /etc/passwd (/etc/group), and a user without a group gets
	// the primary group /etc/passwd gives it (0 if none). Empty: the
	// image's USER.
	User string
	// SupplementalGroups are added to the process's groups.
	SupplementalGroups []int64
	// StrictGroups leaves out the groups /etc/group lists the user in
	// (supplementalGroupsPolicy Strict); otherwise they are merged in.
	StrictGroups bool
	// Privileged gives every capability, the host's devices, writable
	// /sys and cgroup file systems, no masked paths and no seccomp, as
	// containerd's CRI does.
	Privileged bool
	// CapAdd and CapDrop change the default capability set; names are
	// without the "CAP_" prefix, and "ALL" adds or drops all of them
	// (adding before dropping, so add ALL, drop CHOWN is all but CHOWN).
	CapAdd, CapDrop []string
	// NoNewPrivs sets no_new_privs (allowPrivilegeEscalation: false).
	NoNewPrivs bool
	// ReadOnlyRootfs mounts the image's root file system read-only.
	ReadOnlyRootfs bool
	// Seccomp is the profile: SeccompUnconfined (empty) or
	// SeccompRuntimeDefault.
	Seccomp string
	// MaskedPaths and ReadonlyPaths replace the runtime's masked and
	// read-only /proc and /sys paths; nil keeps the runtime's.
	MaskedPaths, ReadonlyPaths []string
	// Sysctls are set in the container's namespaces (the pod's network
	// namespace for net.*).
	Sysctls map[string]string
}

// Seccomp profiles.
const (
	SeccompUnconfined     = ""
	SeccompRuntimeDefault = "RuntimeDefault"
)

// securityOpts are the spec options of sec, in the order containerd's CRI
// applies them (internal/cri/server: buildLinuxSpec, then the user, the
// groups and seccomp), to follow the image's config and mounts.
func securityOpts(sec Security) []oci.SpecOpts {
	opts := []oci.SpecOpts{oci.WithNewPrivileges}
	if sec.MaskedPaths != nil {
		opts = append(opts, oci.WithMaskedPaths(sec.MaskedPaths))
	}
	if sec.ReadonlyPaths != nil {
		opts = append(opts, oci.WithReadonlyPaths(sec.ReadonlyPaths))
	}
	opts = append(opts, withCapabilities(sec.CapAdd, sec.CapDrop))
	if sec.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	}
	opts = append(opts, withoutAmbientCaps)
	if sec.NoNewPrivs {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	if sec.ReadOnlyRootfs {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if len(sec.Sysctls) > 0 {
		opts = append(opts, withSysctls(sec.Sysctls))
	}
	if sec.User != "" {
		opts = append(opts, oci.WithUser(sec.User))
		if !sec.StrictGroups {
			name, _, _ := strings.Cut(sec.User, ":")
			opts = append(opts, withAdditionalGIDs(name))
		}
	}
	if len(sec.SupplementalGroups) > 0 {
		opts = append(opts, withSupplementalGroups(sec.SupplementalGroups))
	}
	// A privileged container runs without seccomp, whatever the profile.
	if sec.Seccomp == SeccompRuntimeDefault && !sec.Privileged {
		opts = append(opts, seccomp.WithDefaultProfile())
	}
	return opts
}

// withCapabilities adds and drops capabilities as containerd's CRI does
// (customopts.WithCapabilities): "ALL" first, then the named ones.
func withCapabilities(add, drop []string) oci.SpecOpts {
	if add == nil && drop == nil {
		return nullOpt
	}
	var opts []oci.SpecOpts
	if slices.Contains(add, "ALL") {
		opts = append(opts, func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
			all, err := cap.Current()
			if err != nil {
				return fmt.Errorf("reading the current capabilities: %w", err)
			}
			return oci.WithCapabilities(all)(ctx, cl, c, s)
		})
	}
	if slices.Contains(drop, "ALL") {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	opts = append(opts, oci.WithAddedCapabilities(capNames(add)), oci.WithDroppedCapabilities(capNames(drop)))
	return oci.Compose(opts...)
}

// capNames prefixes CAP_ to every name but ALL.
func capNames(names []string) []string {
	out := []string{}
	for _, n := range names {
		if strings.ToUpper(n) == "ALL" {
			continue
		}
		out = append(out, "CAP_"+strings.ToUpper(n))
	}
	return out
}

func nullOpt(context.Context, oci.Client, *containers.Container, *specs.Spec) error { return nil }

// withoutAmbientCaps clears the ambient set, as the CRI does.
func withoutAmbientCaps(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
	if s.Process != nil && s.Process.Capabilities != nil {
		s.Process.Capabilities.Ambient = nil
	}
	return nil
}

// withAdditionalGIDs adds the groups /etc/group lists user in to those
// already set (the CRI's customopts.WithAdditionalGIDs).
func withAdditionalGIDs(user string) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		have := s.Process.User.AdditionalGids
		if err := oci.WithAdditionalGIDs(user)(ctx, cl, c, s); err != nil {
			return err
		}
		s.Process.User.AdditionalGids = mergeGIDs(s.Process.User.AdditionalGids, have)
		return nil
	}
}

func withSupplementalGroups(groups []int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		gids := make([]uint32, 0, len(groups))
		for _, g := range groups {
			gids = append(gids, uint32(g)) //nolint:gosec // G115: group IDs are validated by the API server (0 to 2^31-1)
		}
		s.Process.User.AdditionalGids = mergeGIDs(s.Process.User.AdditionalGids, gids)
		return nil
	}
}

// mergeGIDs is the sorted union of a and b.
func mergeGIDs(a, b []uint32) []uint32 {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func withSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for k, v := range sysctls {
			s.Linux.Sysctl[k] = v
		}
		return nil
	}
}
