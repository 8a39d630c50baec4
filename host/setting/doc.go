// Package setting is the error a host component's Config.Validate returns
// for a bad setting. Each component (host/node, host/cells, host/match,
// host/plugin, …) owns its Config: its fields and koanf tags are its
// section of kip.yaml, and its Validate names a bad field by its key within
// that section ("catalogTTL", "capacity.cpu"). host/config puts the
// section in front ("cells.catalogTTL") when it reports the error, so a
// component never needs to know where kip.yaml places it and never imports
// host/config.
//
// It imports only the standard library, and every host package may import
// it.
package setting
