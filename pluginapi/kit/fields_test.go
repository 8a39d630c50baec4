package kit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

func TestRefusedField(t *testing.T) {
	rules := []FieldRule{
		{Match: []string{"machinetype", "machine type"}, Capacity: true},
		{Match: []string{"disksizegb"}, Field: pluginapi.FieldVolumeSizeGiB},
		{Match: []string{"/images/", "image"}, Key: "image"},
	}
	tests := []struct {
		name  string
		where string
		check func(error) bool
	}{
		{"capacity", "Invalid value for field 'resource.machineType'", func(err error) bool {
			var ic *pluginapi.InsufficientCapacityError
			return errors.As(err, &ic) && ic.InstanceType == "t.large" && ic.Zone == "z1" && ic.CapacityType == pluginapi.CapacitySpot
		}},
		{"a request field", "diskSizeGb too small", func(err error) bool {
			var uf *pluginapi.UnsupportedError
			return errors.As(err, &uf) && uf.Field == pluginapi.FieldVolumeSizeGiB
		}},
		{"a configuration key, the first rule that matches", "The resource 'projects/p/global/images/x' was not found", func(err error) bool {
			var ic *pluginapi.InvalidConfigError
			return errors.As(err, &ic) && ic.Key == "image"
		}},
		{"no rule", "something else", func(err error) bool { return err == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RefusedField(rules, tt.where, "op: refused", "t.large", "z1", pluginapi.CapacitySpot)
			if !tt.check(err) {
				t.Fatalf("RefusedField(%q) = %#v", tt.where, err)
			}
		})
	}
}

func TestNotAnAPIError(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name          string
		err           error
		wantTransient bool
		want          string
	}{
		{"a network error", dial, true, "op.get: dial tcp: connection refused"},
		{"a URL error", &url.Error{Op: "Get", URL: "https://x", Err: dial}, true, `op.get: Get "https://x": dial tcp: connection refused`},
		{"another error", errors.New("bad"), false, "op.get: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NotAnAPIError("op.get", tt.err)
			if pluginapi.IsTransient(err) != tt.wantTransient || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NotAnAPIError() = %v (transient %v), want %q (transient %v)", err, pluginapi.IsTransient(err), tt.want, tt.wantTransient)
			}
			if !tt.wantTransient && !errors.Is(err, tt.err) {
				t.Errorf("NotAnAPIError() = %v does not wrap %v", err, tt.err)
			}
		})
	}
}

func TestIsContextError(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{fmt.Errorf("calling: %w", context.DeadlineExceeded), true},
		{errors.New("canceled"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := IsContextError(tt.err); got != tt.want {
			t.Errorf("IsContextError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
