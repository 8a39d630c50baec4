package pluginapi

import "fmt"

// SupportedAPIVersions returns the contract versions this package speaks,
// oldest first: every MAJOR.MINOR from ProtocolVersion.0 up to APIVersion.
// Minors only add (fields, calls, capabilities, error kinds), so a plugin
// built with this package implements all of them and may list them all in
// GetInfoResponse.APIVersions. A host built with it accepts a plugin that
// lists any version of major ProtocolVersion, older or newer than these
// (CompatibleAPIVersion); `kip version` prints both.
//
// The pluginapi module is released as pluginapi/vMAJOR.MINOR.PATCH, where
// MAJOR.MINOR is APIVersion (docs/plugins.md, "Versions and releases").
func SupportedAPIVersions() []string { return apiVersionsUpTo(APIVersion) }

// apiVersionsUpTo returns MAJOR.0 through version, or just version when it
// is not MAJOR.MINOR.
func apiVersionsUpTo(version string) []string {
	var major, minor int
	if n, err := fmt.Sscanf(version, "%d.%d", &major, &minor); n != 2 || err != nil || minor < 0 ||
		fmt.Sprintf("%d.%d", major, minor) != version {
		return []string{version}
	}
	out := make([]string, 0, minor+1)
	for m := 0; m <= minor; m++ {
		out = append(out, fmt.Sprintf("%d.%d", major, m))
	}
	return out
}
