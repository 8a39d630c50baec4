package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// acrossWire sends a plugin's error the way the server and client do:
// toStatus, the status encoded as protobuf, decoded, then fromStatus.
func acrossWire(t *testing.T, err error) error {
	t.Helper()
	serr := toStatus(err)
	if serr == nil {
		return fromStatus(nil)
	}
	st, ok := status.FromError(serr)
	if !ok {
		t.Fatalf("toStatus(%v) = %v, not a gRPC status", err, serr)
	}
	return fromStatus(status.FromProto(overWire(t, st.Proto())).Err())
}

func TestErrorKindsRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		code     codes.Code
		is       func(error) bool
		wantKind error // the kind errors.As must find, fields included
	}{
		{
			name: "not found", err: NewNotFound("instance %s", "i-1"), code: codes.NotFound,
			is: IsNotFound, wantKind: &NotFoundError{Message: "instance i-1"},
		},
		{
			name: "insufficient capacity", code: codes.ResourceExhausted, is: IsInsufficientCapacity,
			err:      NewInsufficientCapacity("m5.large", "eu-west-1a", CapacitySpot, "no spot capacity"),
			wantKind: &InsufficientCapacityError{InstanceType: "m5.large", Zone: "eu-west-1a", CapacityType: CapacitySpot, Message: "no spot capacity"},
		},
		{
			name: "quota exceeded", err: NewQuotaExceeded("vCPU limit %d", 64), code: codes.ResourceExhausted,
			is: IsQuotaExceeded, wantKind: &QuotaExceededError{Message: "vCPU limit 64"},
		},
		{
			name: "scoped quota exceeded", err: NewQuotaExceededFor([]string{"c5.large", "m5.large"}, CapacityOnDemand, "vCPU limit"),
			code: codes.ResourceExhausted, is: IsQuotaExceeded,
			wantKind: &QuotaExceededError{InstanceTypes: []string{"c5.large", "m5.large"}, CapacityType: CapacityOnDemand, Message: "vCPU limit"},
		},
		{
			name: "throttled with retry after", err: NewThrottled(1500*time.Millisecond, "rate exceeded"), code: codes.Unavailable,
			is: IsThrottled, wantKind: &ThrottledError{RetryAfter: 1500 * time.Millisecond, Message: "rate exceeded"},
		},
		{
			name: "throttled without retry after", err: NewThrottled(0, "rate exceeded"), code: codes.Unavailable,
			is: IsThrottled, wantKind: &ThrottledError{Message: "rate exceeded"},
		},
		{
			name: "invalid config with key", err: NewInvalidConfig("subnets[0]", "subnet %q not found", "s-1"), code: codes.InvalidArgument,
			is: IsInvalidConfig, wantKind: &InvalidConfigError{Key: "subnets[0]", Message: `subnet "s-1" not found`},
		},
		{
			name: "invalid config without key", err: NewInvalidConfig("", "not JSON"), code: codes.InvalidArgument,
			is: IsInvalidConfig, wantKind: &InvalidConfigError{Message: "not JSON"},
		},
		{
			name: "unsupported", err: NewUnsupported("spot"), code: codes.Unimplemented,
			is: IsUnsupported, wantKind: &UnsupportedError{Message: "spot"},
		},
		{
			name: "unsupported field", err: NewUnsupportedField(FieldSecurityGroups, "local cells have none"), code: codes.Unimplemented,
			is: IsUnsupported, wantKind: &UnsupportedError{Field: "security_groups", Message: "local cells have none"},
		},
		{
			name: "not configured", err: NewNotConfigured("%s before Configure", "List"), code: codes.FailedPrecondition,
			is: IsNotConfigured, wantKind: &NotConfiguredError{Message: "List before Configure"},
		},
		{
			name: "transient", err: NewTransient("HTTP %d", 503), code: codes.Unavailable,
			is: IsTransient, wantKind: &TransientError{Message: "HTTP 503"},
		},
		{
			name: "volume in use", code: codes.FailedPrecondition, is: IsVolumeConflict,
			err:      NewVolumeConflict(ConflictInUse, "vol-0abc", "i-0other", "attached to i-0other"),
			wantKind: &VolumeConflictError{Reason: ConflictInUse, VolumeHandle: "vol-0abc", InstanceID: "i-0other", Message: "attached to i-0other"},
		},
		{
			name: "volume in another zone", code: codes.FailedPrecondition, is: IsVolumeConflict,
			err:      NewVolumeConflict(ConflictWrongZone, "vol-0abc", "", "disk in eu-west-1b"),
			wantKind: &VolumeConflictError{Reason: ConflictWrongZone, VolumeHandle: "vol-0abc", Message: "disk in eu-west-1b"},
		},
		{
			name: "attachment limit", code: codes.FailedPrecondition, is: IsVolumeConflict,
			err:      NewVolumeConflict(ConflictAttachmentLimit, "vol-0abc", "", "27 of 27 slots used"),
			wantKind: &VolumeConflictError{Reason: ConflictAttachmentLimit, VolumeHandle: "vol-0abc", Message: "27 of 27 slots used"},
		},
		{
			name: "wrong disk type", code: codes.FailedPrecondition, is: IsVolumeConflict,
			err:      NewVolumeWrongType("projects/p/zones/z/disks/d", "pd-standard", "[pd-standard] features are not compatible"),
			wantKind: &VolumeConflictError{Reason: ConflictWrongType, VolumeHandle: "projects/p/zones/z/disks/d", DiskType: "pd-standard", Message: "[pd-standard] features are not compatible"},
		},
		{
			// A reason this version does not know arrives as it was sent:
			// the host takes it for a plain refusal.
			name: "volume conflict of a later reason", code: codes.FailedPrecondition, is: IsVolumeConflict,
			err:      NewVolumeConflict("some-later-reason", "vol-0abc", "", "refused"),
			wantKind: &VolumeConflictError{Reason: "some-later-reason", VolumeHandle: "vol-0abc", Message: "refused"},
		},
	}
	for _, tt := range tests {
		for _, wrapped := range []bool{false, true} {
			name := tt.name
			err := tt.err
			if wrapped {
				name += " wrapped"
				err = fmt.Errorf("launching cell c-1: %w", fmt.Errorf("calling the cloud: %w", tt.err))
			}
			t.Run(name, func(t *testing.T) {
				if got := status.Code(toStatus(err)); got != tt.code {
					t.Errorf("toStatus(%v) has code %s, want %s", err, got, tt.code)
				}
				got := acrossWire(t, err)
				if !tt.is(got) {
					t.Fatalf("after the wire %v (%T) is not the kind of %T", got, got, tt.wantKind)
				}
				// errors.As into a fresh target of the kind's type, then compare fields.
				target := reflect.New(reflect.TypeOf(tt.wantKind))
				if !errors.As(got, target.Interface()) {
					t.Fatalf("errors.As(%v, %T) found nothing", got, tt.wantKind)
				}
				if kind := target.Elem().Interface(); !reflect.DeepEqual(kind, tt.wantKind) {
					t.Errorf("kind after the wire = %#v, want %#v", kind, tt.wantKind)
				}
				if got.Error() != err.Error() {
					t.Errorf("text after the wire = %q, want the plugin's %q", got.Error(), err.Error())
				}
				if IsUnreachable(got) {
					t.Errorf("%v reported as an unreachable plugin; the plugin answered", got)
				}
			})
		}
	}
}

func TestContextErrorsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
		code codes.Code
	}{
		{"canceled", context.Canceled, context.Canceled, codes.Canceled},
		{"canceled wrapped", fmt.Errorf("launching cell c-1: %w", context.Canceled), context.Canceled, codes.Canceled},
		{"deadline", context.DeadlineExceeded, context.DeadlineExceeded, codes.DeadlineExceeded},
		{"deadline wrapped", fmt.Errorf("listing instances: %w", context.DeadlineExceeded), context.DeadlineExceeded, codes.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(toStatus(tt.err)); got != tt.code {
				t.Errorf("toStatus(%v) has code %s, want %s", tt.err, got, tt.code)
			}
			if got := acrossWire(t, tt.err); !errors.Is(got, tt.want) {
				t.Errorf("after the wire %v is not %v", got, tt.want)
			}
		})
	}
}

func TestStatusesWithoutDetail(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		check func(error) bool
		want  string
	}{
		{
			name: "unavailable is an unreachable plugin", err: status.Error(codes.Unavailable, "connection refused"),
			check: func(err error) bool { return IsUnreachable(err) && IsTransient(err) },
			want:  "IsUnreachable and IsTransient",
		},
		{
			name: "unimplemented is unsupported", err: status.Error(codes.Unimplemented, "unknown method RegistryAuth"),
			check: IsUnsupported, want: "IsUnsupported",
		},
		{
			name: "canceled", err: status.Error(codes.Canceled, "x"),
			check: func(err error) bool { return errors.Is(err, context.Canceled) }, want: "context.Canceled",
		},
		{
			name: "other codes are plugin errors", err: status.Error(codes.PermissionDenied, "access denied"),
			check: func(err error) bool {
				var pe *PluginError
				return errors.As(err, &pe) && pe.Code == codes.PermissionDenied && pe.Message == "access denied"
			},
			want: "PluginError{PermissionDenied, access denied}",
		},
		{
			name: "not a status", err: errors.New("plain"),
			check: func(err error) bool { return err.Error() == "plain" }, want: "the error unchanged",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromStatus(tt.err); !tt.check(got) {
				t.Errorf("fromStatus(%v) = %v (%T), want %s", tt.err, got, got, tt.want)
			}
		})
	}
	if fromStatus(nil) != nil || toStatus(nil) != nil {
		t.Error("nil error did not stay nil")
	}
}

func TestUnclassifiedPluginErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		code      codes.Code
		transient bool
	}{
		{"plain error", fmt.Errorf("launching cell c-1: %w", errors.New("disk on fire")), codes.Unknown, false},
		// A gRPC call the plugin made itself failed: its code survives.
		{"nested permission denied", fmt.Errorf("calling compute: %w", status.Error(codes.PermissionDenied, "no")), codes.PermissionDenied, false},
		// ... but a nested Unavailable is the plugin's transient failure, not
		// an unreachable plugin.
		{"nested unavailable", status.Error(codes.Unavailable, "cloud API down"), codes.Unavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := acrossWire(t, tt.err)
			if got.Error() != tt.err.Error() {
				t.Errorf("text after the wire = %q, want %q", got.Error(), tt.err.Error())
			}
			if IsUnreachable(got) {
				t.Errorf("%v reported as an unreachable plugin", got)
			}
			if IsTransient(got) != tt.transient {
				t.Errorf("IsTransient(%v) = %v, want %v", got, IsTransient(got), tt.transient)
			}
			if !tt.transient {
				var pe *PluginError
				if !errors.As(got, &pe) || pe.Code != tt.code {
					t.Errorf("after the wire %v (%T), want a PluginError with code %s", got, got, tt.code)
				}
			}
		})
	}
}

func TestIgnoreNotFound(t *testing.T) {
	other := errors.New("other")
	if IgnoreNotFound(fmt.Errorf("terminating: %w", NewNotFound("i-1"))) != nil {
		t.Error("IgnoreNotFound kept a wrapped NotFound")
	}
	if !errors.Is(IgnoreNotFound(other), other) {
		t.Error("IgnoreNotFound dropped an error that is not NotFound")
	}
}

// A VolumeConflict is no other kind: a host must not take an in-use disk
// for a missing one, nor an attachment limit for a quota.
func TestVolumeConflictIsNoOtherKind(t *testing.T) {
	got := acrossWire(t, fmt.Errorf("attaching vol-1: %w", NewVolumeConflict(ConflictInUse, "vol-1", "i-2", "in use")))
	for name, is := range map[string]func(error) bool{
		"NotFound": IsNotFound, "QuotaExceeded": IsQuotaExceeded, "InsufficientCapacity": IsInsufficientCapacity,
		"Unsupported": IsUnsupported, "NotConfigured": IsNotConfigured, "Transient": IsTransient,
	} {
		if is(got) {
			t.Errorf("a VolumeConflict after the wire (%v) is also %s", got, name)
		}
	}
}

// A kind a newer peer added (as not_configured was added within 1.x)
// reaches an older one as a PluginError with the code it was sent with.
func TestUnknownKindIsAPluginError(t *testing.T) {
	st, err := status.New(codes.FailedPrecondition, "not configured: List before Configure").
		WithDetails(&pb.ErrorDetail{Kind: "some_future_kind", Message: "List before Configure"})
	if err != nil {
		t.Fatal(err)
	}
	got := fromStatus(status.FromProto(overWire(t, st.Proto())).Err())
	var pe *PluginError
	if !errors.As(got, &pe) || pe.Code != codes.FailedPrecondition || pe.Message != "not configured: List before Configure" {
		t.Errorf("an unknown kind after the wire = %v (%T), want a PluginError with code FailedPrecondition and the text", got, got)
	}
}
