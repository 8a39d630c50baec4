package kit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// FieldRule is what a cloud's refusal of a launch request means when its
// text names one of Match: the instance type is not sold in the zone (no
// capacity, for good: Capacity), or a configuration key is wrong (Key),
// or a request field is (Field, a pluginapi.Field name).
type FieldRule struct {
	// Match are lowercase words of the refusal's text, any of which
	// matches.
	Match    []string
	Key      string // configuration key; "" with Capacity or Field
	Field    string // LaunchRequest field
	Capacity bool
}

// RefusedField maps a refused launch by the first of rules whose words
// where (the refusal's text: the field it targets, its message) holds,
// in any case: InsufficientCapacity of the offering (instanceType, zone,
// capacity), UnsupportedField or InvalidConfig, each with text as its
// message. It returns nil when no rule matches.
func RefusedField(rules []FieldRule, where, text, instanceType, zone string, capacity pluginapi.CapacityType) error {
	where = strings.ToLower(where)
	for _, f := range rules {
		if !slices.ContainsFunc(f.Match, func(m string) bool { return strings.Contains(where, m) }) {
			continue
		}
		switch {
		case f.Capacity:
			return pluginapi.NewInsufficientCapacity(instanceType, zone, capacity, text)
		case f.Field != "":
			return pluginapi.NewUnsupportedField(f.Field, "%s", text)
		default:
			return pluginapi.NewInvalidConfig(f.Key, "%s", text)
		}
	}
	return nil
}

// IsContextError reports whether err is or wraps a context's end
// (context.Canceled, context.DeadlineExceeded): a plugin returns it
// unchanged, so that the server answers the call's own end.
func IsContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// NotAnAPIError maps an error of the cloud call op that is not the
// cloud's answer: a network error (net.Error, which *url.Error is) is
// Transient, the host retries; any other is wrapped with op.
func NotAnAPIError(op string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) {
		return pluginapi.NewTransient("%s: %v", op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
