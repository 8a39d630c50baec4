package aws

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
)

// resolveSubnets returns the subnet of each zone the cells may use: the
// configured subnets (at most one per zone, in vpcID when it is set), or
// the subnets of vpcID tagged kipcell.io/cells=true, or all of them, one
// per zone (the one with the most free addresses).
func resolveSubnets(ctx context.Context, api ec2API, s *settings) (map[string]string, []string, error) {
	if len(s.subnets) > 0 {
		return explicitSubnets(ctx, api, s)
	}
	var all []types.Subnet
	in := &ec2.DescribeSubnetsInput{
		Filters:    []types.Filter{{Name: aws.String("vpc-id"), Values: []string{s.vpcID}}},
		MaxResults: aws.Int32(1000),
	}
	for pages := ec2.NewDescribeSubnetsPaginator(api, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, configureError("DescribeSubnets", "vpcID", err)
		}
		all = append(all, page.Subnets...)
	}
	if len(all) == 0 {
		return nil, nil, pluginapi.NewInvalidConfig("vpcID", "VPC %s has no subnets in region %s", s.vpcID, s.region)
	}
	var warnings []string
	pool := slices.DeleteFunc(slices.Clone(all), func(sn types.Subnet) bool { return tagValue(sn.Tags, TagCells) != "true" })
	if len(pool) == 0 {
		pool = all
		warnings = append(warnings, fmt.Sprintf("no subnet of VPC %s is tagged %s=true: cells may use any of its %d subnets", s.vpcID, TagCells, len(all)))
	}
	best := map[string]types.Subnet{}
	for _, sn := range pool {
		zone := aws.ToString(sn.AvailabilityZone)
		cur, ok := best[zone]
		if !ok || aws.ToInt32(sn.AvailableIpAddressCount) > aws.ToInt32(cur.AvailableIpAddressCount) ||
			(aws.ToInt32(sn.AvailableIpAddressCount) == aws.ToInt32(cur.AvailableIpAddressCount) && aws.ToString(sn.SubnetId) < aws.ToString(cur.SubnetId)) {
			best[zone] = sn
		}
	}
	out := make(map[string]string, len(best))
	for zone, sn := range best {
		out[zone] = aws.ToString(sn.SubnetId)
	}
	return out, warnings, nil
}

func explicitSubnets(ctx context.Context, api ec2API, s *settings) (map[string]string, []string, error) {
	byID := map[string]types.Subnet{}
	for pages := ec2.NewDescribeSubnetsPaginator(api, &ec2.DescribeSubnetsInput{SubnetIds: s.subnets}); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			key := "subnets"
			for i, id := range s.subnets {
				if strings.Contains(err.Error(), "'"+id+"'") {
					key = fmt.Sprintf("subnets[%d]", i)
					break
				}
			}
			return nil, nil, configureError("DescribeSubnets", key, err)
		}
		for _, sn := range page.Subnets {
			byID[aws.ToString(sn.SubnetId)] = sn
		}
	}
	out := map[string]string{}
	where := map[string]int{} // zone → index in s.subnets
	for i, id := range s.subnets {
		key := fmt.Sprintf("subnets[%d]", i)
		sn, ok := byID[id]
		switch {
		case !ok:
			return nil, nil, pluginapi.NewInvalidConfig(key, "subnet %s does not exist in region %s", id, s.region)
		case s.vpcID != "" && aws.ToString(sn.VpcId) != s.vpcID:
			return nil, nil, pluginapi.NewInvalidConfig(key, "subnet %s is in VPC %s, not vpcID %s", id, aws.ToString(sn.VpcId), s.vpcID)
		case aws.ToString(sn.AvailabilityZone) == "":
			return nil, nil, pluginapi.NewInvalidConfig(key, "EC2 reports no zone for subnet %s", id)
		}
		zone := aws.ToString(sn.AvailabilityZone)
		if j, dup := where[zone]; dup {
			return nil, nil, pluginapi.NewInvalidConfig(key, "subnet %s is in zone %s like subnets[%d]; list at most one subnet per zone", id, zone, j)
		}
		where[zone] = i
		out[zone] = id
	}
	return out, nil, nil
}

// resolvedImage is the cells' AMI as EC2 describes it.
type resolvedImage struct {
	id         string
	arch       pluginapi.Arch // "" when EC2 reports an architecture Kip does not know
	rawArch    string
	rootDevice string
}

// defaultRootDevice is the root device of Amazon Linux and Debian AMIs.
const defaultRootDevice = "/dev/xvda"

// resolveImage describes the configured image: by ID, or the newest
// available image of the owner whose name matches (wildcards * and ?).
func resolveImage(ctx context.Context, api ec2API, im Image) (resolvedImage, error) {
	in := &ec2.DescribeImagesInput{}
	key := "image.id"
	if im.ID != "" {
		in.ImageIds = []string{im.ID}
	} else {
		key = "image.name"
		in.Owners = []string{im.Owner}
		in.Filters = []types.Filter{
			{Name: aws.String("name"), Values: []string{im.Name}},
			{Name: aws.String("state"), Values: []string{string(types.ImageStateAvailable)}},
		}
	}
	var images []types.Image
	for {
		resp, err := api.DescribeImages(ctx, in)
		if err != nil {
			return resolvedImage{}, configureError("DescribeImages", key, err)
		}
		images = append(images, resp.Images...)
		if aws.ToString(resp.NextToken) == "" {
			break
		}
		in.NextToken = resp.NextToken
	}
	// EC2 applied the same conditions; checking them again keeps the
	// choice right whatever answered.
	images = slices.DeleteFunc(images, func(i types.Image) bool {
		if im.ID != "" {
			return aws.ToString(i.ImageId) != im.ID
		}
		ok, _ := path.Match(im.Name, aws.ToString(i.Name))
		return !ok || (i.State != "" && i.State != types.ImageStateAvailable)
	})
	if len(images) == 0 {
		if im.ID != "" {
			return resolvedImage{}, pluginapi.NewInvalidConfig(key, "image %s does not exist or is not visible to this account", im.ID)
		}
		return resolvedImage{}, pluginapi.NewInvalidConfig(key, "no available image named %q is owned by %s", im.Name, im.Owner)
	}
	// Newest first; creation dates are ISO 8601 in UTC, so they sort as
	// strings. Equal dates fall back to the ID, for a stable choice.
	slices.SortFunc(images, func(a, b types.Image) int {
		return cmp.Or(strings.Compare(aws.ToString(b.CreationDate), aws.ToString(a.CreationDate)),
			strings.Compare(aws.ToString(a.ImageId), aws.ToString(b.ImageId)))
	})
	img := images[0]
	out := resolvedImage{id: aws.ToString(img.ImageId), rawArch: string(img.Architecture), rootDevice: aws.ToString(img.RootDeviceName)}
	switch img.Architecture {
	case types.ArchitectureValuesX8664:
		out.arch = pluginapi.ArchAMD64
	case types.ArchitectureValuesArm64:
		out.arch = pluginapi.ArchARM64
	}
	if out.rootDevice == "" {
		out.rootDevice = defaultRootDevice
	}
	return out, nil
}

// configureError maps an error of a call Configure makes: what names a
// configuration key becomes InvalidConfig for key, the rest maps as usual.
func configureError(op, key string, err error) error {
	mapped := mapError(op, err)
	switch code := errorCode(err); {
	case configCodes[code] != "":
		return pluginapi.NewInvalidConfig(key, "%s", apiText(op, err))
	case code == codeUnauthorized:
		return pluginapi.NewInvalidConfig("credentials", "%v", mapped)
	}
	return fmt.Errorf("configuring: %w", mapped)
}

// tagValue returns the value of tag key, or "".
func tagValue(tags []types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
