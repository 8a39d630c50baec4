package pluginapi

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestAPIVersionsUpTo(t *testing.T) {
	tests := []struct {
		version string
		want    []string
	}{
		{"1.0", []string{"1.0"}},
		{"1.2", []string{"1.0", "1.1", "1.2"}},
		{"2.1", []string{"2.0", "2.1"}},
		{"1", []string{"1"}},
		{"1.x", []string{"1.x"}},
		{"1.02", []string{"1.02"}},
	}
	for _, tt := range tests {
		if got := apiVersionsUpTo(tt.version); !slices.Equal(got, tt.want) {
			t.Errorf("apiVersionsUpTo(%q) = %q, want %q", tt.version, got, tt.want)
		}
	}
}

// The versions this package speaks: every minor of major ProtocolVersion up
// to APIVersion, which CompatibleAPIVersion picks from them.
func TestSupportedAPIVersions(t *testing.T) {
	got := SupportedAPIVersions()
	if len(got) == 0 || got[len(got)-1] != APIVersion {
		t.Fatalf("SupportedAPIVersions() = %q, want it to end with APIVersion %q", got, APIVersion)
	}
	major := strconv.Itoa(ProtocolVersion) + "."
	for _, v := range got {
		if !strings.HasPrefix(v, major) {
			t.Errorf("SupportedAPIVersions() holds %q, not of major %d (ProtocolVersion)", v, ProtocolVersion)
		}
	}
	if got[0] != major+"0" {
		t.Errorf("SupportedAPIVersions() = %q, want it to start with %s0: within a major every minor stays spoken", got, major)
	}
	if best, ok := CompatibleAPIVersion(got); !ok || best != APIVersion {
		t.Errorf("CompatibleAPIVersion(SupportedAPIVersions()) = %q, %v; want %q", best, ok, APIVersion)
	}
}
