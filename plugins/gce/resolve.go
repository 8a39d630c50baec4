package gce

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/kipcell/kip/pluginapi"
)

// resolve asks Compute Engine for the region (its zones), the configured
// subnetwork and image, failing with the key named when one does not
// exist.
func (cfg *config) resolve(ctx context.Context) error {
	if err := cfg.resolveZones(ctx); err != nil {
		return err
	}
	sub, err := cfg.clients.subnetworks.Get(ctx, &computepb.GetSubnetworkRequest{Project: cfg.project, Region: cfg.region, Subnetwork: cfg.subnetwork})
	if err != nil {
		if isNotFound(err) {
			return pluginapi.NewInvalidConfig("subnetwork", "subnetwork %q does not exist in project %s, region %s", cfg.subnetwork, cfg.project, cfg.region)
		}
		return fmt.Errorf("resolving subnetwork %s: %w", cfg.subnetwork, configError("subnetwork", mapError("subnetworks.get", err)))
	}
	cfg.subnetworkURL = sub.GetSelfLink()
	if cfg.subnetworkURL == "" {
		cfg.subnetworkURL = fmt.Sprintf("projects/%s/regions/%s/subnetworks/%s", cfg.project, cfg.region, cfg.subnetwork)
	}
	cfg.networkURL = sub.GetNetwork()
	if cfg.network != "" && cfg.networkURL != "" && path.Base(cfg.networkURL) != cfg.network {
		return pluginapi.NewInvalidConfig("network", "subnetwork %s is in network %s, not %s", cfg.subnetwork, path.Base(cfg.networkURL), cfg.network)
	}

	var img *computepb.Image
	key := "image.name"
	if cfg.image.Family != "" {
		key = "image.family"
		img, err = cfg.clients.images.GetFromFamily(ctx, &computepb.GetFromFamilyImageRequest{Project: cfg.image.Project, Family: cfg.image.Family})
	} else {
		img, err = cfg.clients.images.Get(ctx, &computepb.GetImageRequest{Project: cfg.image.Project, Image: cfg.image.Name})
	}
	if err != nil {
		if isNotFound(err) {
			return pluginapi.NewInvalidConfig(key, "no image %q in project %s", cfg.image.Family+cfg.image.Name, cfg.image.Project)
		}
		return fmt.Errorf("resolving the image: %w", configError(key, mapError("images.get", err)))
	}
	if st := img.GetDeprecated().GetState(); st == "OBSOLETE" || st == "DELETED" {
		return pluginapi.NewInvalidConfig(key, "image %s is %s", img.GetName(), st)
	}
	cfg.imageURL = img.GetSelfLink()
	if cfg.imageURL == "" {
		cfg.imageURL = fmt.Sprintf("projects/%s/global/images/%s", cfg.image.Project, img.GetName())
	}
	cfg.imageArch = archOf(img.GetArchitecture())
	return nil
}

// resolveZones checks the configured zones against the region's
// (regions.get), or takes the region's when none are configured.
func (cfg *config) resolveZones(ctx context.Context) error {
	region, err := cfg.clients.regions.Get(ctx, &computepb.GetRegionRequest{Project: cfg.project, Region: cfg.region})
	if err != nil {
		if isNotFound(err) {
			return pluginapi.NewInvalidConfig("region", "region %q does not exist (or project %s cannot see it)", cfg.region, cfg.project)
		}
		return fmt.Errorf("resolving region %s: %w", cfg.region, configError("region", mapError("regions.get", err)))
	}
	var zones []string
	for _, z := range region.GetZones() {
		zones = append(zones, last(z))
	}
	if len(zones) == 0 {
		return pluginapi.NewInvalidConfig("region", "region %s answers no zones", cfg.region)
	}
	if len(cfg.zones) == 0 {
		cfg.zones = slices.Sorted(slices.Values(zones))
		return nil
	}
	for _, z := range cfg.zones {
		if !slices.Contains(zones, z) {
			return pluginapi.NewInvalidConfig(fmt.Sprintf("zones[%d]", slices.Index(cfg.configuredZones, z)), "region %s has no zone %s (its zones: %s)", cfg.region, z, strings.Join(zones, ", "))
		}
	}
	return nil
}

// configError names key for a refusal that is the configuration's fault
// (no permission on the resource).
func configError(key string, err error) error {
	if pluginapi.IsInvalidConfig(err) {
		return err
	}
	if isPermission(err) {
		return pluginapi.NewInvalidConfig(key, "%v", err)
	}
	return err
}

// archOf maps an image's architecture.
func archOf(a string) pluginapi.Arch {
	switch a {
	case "X86_64":
		return pluginapi.ArchAMD64
	case "ARM64":
		return pluginapi.ArchARM64
	}
	return ""
}
