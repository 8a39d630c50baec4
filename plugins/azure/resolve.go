package azure

import (
	"context"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// resolve asks Azure Resource Manager what Configure must know before a
// launch: that the subnet exists (subnets get), which also proves the
// credentials and the endpoint, and the network security group, when one
// is configured (networkSecurityGroups get). The image is not looked up: a
// marketplace image's "latest" is resolved by Azure at every launch, and
// a wrong image fails the first launch naming image.
func (cfg *config) resolve(ctx context.Context) error {
	ref, _ := parseSubnetID(cfg.subnetID) // validate checked it
	if _, err := cfg.clients.subnets.Get(ctx, ref.resourceGroup, ref.vnet, ref.subnet, nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isNotFound(err) {
			return pluginapi.NewInvalidConfig("subnetID", "subnet %s does not exist (or the plugin may not read it): %v", cfg.subnetID, err)
		}
		return mapError("Subnets_Get", err)
	}
	if cfg.nsgID == "" {
		return nil
	}
	nsg := strings.Split(strings.TrimPrefix(cfg.nsgID, "/"), "/") // validate checked it
	if _, err := cfg.clients.nsgs.Get(ctx, nsg[3], nsg[7], nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isNotFound(err) {
			return pluginapi.NewInvalidConfig("networkSecurityGroupID", "network security group %s does not exist (or the plugin may not read it): %v", cfg.nsgID, err)
		}
		return mapError("NetworkSecurityGroups_Get", err)
	}
	return nil
}
