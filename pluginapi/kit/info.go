package kit

import (
	"fmt"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// Info is who a plugin is, what GetInfo reports.
type Info struct {
	Name         string
	Version      string
	Capabilities []pluginapi.Capability
	// ConfigSchema is the configuration struct's JSON Schema
	// (pluginapi.ConfigSchema).
	ConfigSchema string
	// Catalog loads the plugin's embedded catalog (its catalog package's
	// Load).
	Catalog func() (*catalog.Catalog, error)
}

// GetInfo answers GetInfo: it needs no configuration and calls no cloud
// API. The catalog's provenance is the embedded catalog's.
func (i Info) GetInfo() (*pluginapi.GetInfoResponse, error) {
	cat, err := i.Catalog()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded catalog: %w", err)
	}
	return &pluginapi.GetInfoResponse{
		Name:         i.Name,
		Version:      i.Version,
		APIVersions:  []string{pluginapi.APIVersion},
		Capabilities: i.Capabilities,
		ConfigSchema: i.ConfigSchema,
		Catalog:      cat.Info(),
	}, nil
}
