package pluginapi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// Error kind names carried in ErrorDetail.kind.
const (
	kindNotFound             = "not_found"
	kindInsufficientCapacity = "insufficient_capacity"
	kindQuotaExceeded        = "quota_exceeded"
	kindThrottled            = "throttled"
	kindInvalidConfig        = "invalid_config"
	kindUnsupported          = "unsupported"
	kindTransient            = "transient"
	kindNotConfigured        = "not_configured"
	kindVolumeConflict       = "volume_conflict"
)

// toStatus turns an error returned by a Provider into a gRPC status error
// whose code classifies it and whose ErrorDetail lets the client rebuild
// the same kind. The message keeps the whole wrapped text.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code, detail := classify(err)
	if detail == nil && code == codes.Unknown {
		// A status from a gRPC call the plugin made itself: keep its code,
		// except that Unavailable there is the plugin's transient failure,
		// not an unreachable plugin.
		if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
			code = st.Code()
			if code == codes.Unavailable {
				detail = &pb.ErrorDetail{Kind: kindTransient, Message: st.Message()}
			}
		}
	}
	if detail == nil {
		return status.Error(code, err.Error())
	}
	st, derr := status.New(code, err.Error()).WithDetails(detail)
	if derr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}

func classify(err error) (codes.Code, *pb.ErrorDetail) {
	var (
		notFound *NotFoundError
		capacity *InsufficientCapacityError
		quota    *QuotaExceededError
		throttle *ThrottledError
		invalid  *InvalidConfigError
		unsup    *UnsupportedError
		trans    *TransientError
		notConf  *NotConfiguredError
		conflict *VolumeConflictError
	)
	switch {
	case errors.As(err, &notFound):
		return codes.NotFound, &pb.ErrorDetail{Kind: kindNotFound, Message: notFound.Message}
	case errors.As(err, &capacity):
		return codes.ResourceExhausted, &pb.ErrorDetail{
			Kind:         kindInsufficientCapacity,
			InstanceType: capacity.InstanceType,
			Zone:         capacity.Zone,
			CapacityType: string(capacity.CapacityType),
			Message:      capacity.Message,
		}
	case errors.As(err, &quota):
		return codes.ResourceExhausted, &pb.ErrorDetail{
			Kind: kindQuotaExceeded, Message: quota.Message,
			InstanceTypes: quota.InstanceTypes, CapacityType: string(quota.CapacityType),
		}
	case errors.As(err, &throttle):
		d := &pb.ErrorDetail{Kind: kindThrottled, Message: throttle.Message}
		if throttle.RetryAfter > 0 {
			d.RetryAfter = durationpb.New(throttle.RetryAfter)
		}
		return codes.Unavailable, d
	case errors.As(err, &invalid):
		return codes.InvalidArgument, &pb.ErrorDetail{Kind: kindInvalidConfig, Key: invalid.Key, Message: invalid.Message}
	case errors.As(err, &unsup):
		return codes.Unimplemented, &pb.ErrorDetail{Kind: kindUnsupported, Key: unsup.Field, Message: unsup.Message}
	case errors.As(err, &trans):
		return codes.Unavailable, &pb.ErrorDetail{Kind: kindTransient, Message: trans.Message}
	case errors.As(err, &notConf):
		return codes.FailedPrecondition, &pb.ErrorDetail{Kind: kindNotConfigured, Message: notConf.Message}
	case errors.As(err, &conflict):
		return codes.FailedPrecondition, &pb.ErrorDetail{
			Kind: kindVolumeConflict, Message: conflict.Message,
			Reason: string(conflict.Reason), VolumeHandle: conflict.VolumeHandle, InstanceId: conflict.InstanceID,
			DiskType: conflict.DiskType,
		}
	case errors.Is(err, context.Canceled):
		return codes.Canceled, nil
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, nil
	default:
		return codes.Unknown, nil
	}
}

// PluginError is an error the plugin returned that is none of the contract's
// kinds. Message is the plugin's text.
type PluginError struct {
	Code    codes.Code
	Message string
}

func (e *PluginError) Error() string { return e.Message }

// fromStatus turns a gRPC error seen by the client back into the error kind
// the plugin returned. Errors with no ErrorDetail map by code: Canceled and
// DeadlineExceeded to the context errors, Unimplemented to Unsupported,
// Unavailable (the connection to the plugin failed) to an unreachable
// Transient error, anything else to a PluginError.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		detail, ok := d.(*pb.ErrorDetail)
		if !ok {
			continue
		}
		kind := kindFromDetail(detail)
		if kind == nil {
			continue
		}
		if kind.Error() == st.Message() {
			return kind
		}
		return &remoteError{text: st.Message(), kind: kind}
	}
	switch st.Code() {
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Unimplemented:
		return &UnsupportedError{Message: st.Message()}
	case codes.Unavailable:
		return &TransientError{Message: "plugin unreachable: " + st.Message(), unreachable: true}
	default:
		return &PluginError{Code: st.Code(), Message: st.Message()}
	}
}

// kindFromDetail rebuilds the error kind an ErrorDetail names; nil for a
// kind this version does not know.
func kindFromDetail(detail *pb.ErrorDetail) error {
	msg := detail.GetMessage()
	switch detail.GetKind() {
	case kindNotFound:
		return &NotFoundError{Message: msg}
	case kindInsufficientCapacity:
		return &InsufficientCapacityError{
			InstanceType: detail.GetInstanceType(),
			Zone:         detail.GetZone(),
			CapacityType: CapacityType(detail.GetCapacityType()),
			Message:      msg,
		}
	case kindQuotaExceeded:
		return &QuotaExceededError{InstanceTypes: detail.GetInstanceTypes(), CapacityType: CapacityType(detail.GetCapacityType()), Message: msg}
	case kindThrottled:
		return &ThrottledError{RetryAfter: detail.GetRetryAfter().AsDuration(), Message: msg}
	case kindInvalidConfig:
		return &InvalidConfigError{Key: detail.GetKey(), Message: msg}
	case kindUnsupported:
		return &UnsupportedError{Field: detail.GetKey(), Message: msg}
	case kindTransient:
		return &TransientError{Message: msg}
	case kindNotConfigured:
		return &NotConfiguredError{Message: msg}
	case kindVolumeConflict:
		return &VolumeConflictError{
			Reason:       VolumeConflictReason(detail.GetReason()),
			VolumeHandle: detail.GetVolumeHandle(),
			InstanceID:   detail.GetInstanceId(),
			DiskType:     detail.GetDiskType(),
			Message:      msg,
		}
	}
	return nil
}

// remoteError keeps the plugin's whole error text (which may wrap the kind
// in context, "launching c-1: insufficient capacity ...") while errors.As
// still finds the kind underneath.
type remoteError struct {
	text string
	kind error
}

func (e *remoteError) Error() string { return e.text }
func (e *remoteError) Unwrap() error { return e.kind }

// ErrorFromStatus turns the error of a gRPC call to a plugin back into the
// error kind the plugin returned, as every Client method does: for a host
// that looks at calls on the wire (a gRPC client interceptor counting
// outcomes). A nil error stays nil; an error that is no gRPC status is
// returned as it is.
func ErrorFromStatus(err error) error { return fromStatus(err) }
