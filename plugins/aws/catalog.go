package aws

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// ListInstanceTypes returns the embedded catalog for the configured region
// and the zones of the cells' subnets, without the types of another
// architecture than the image's. An offering is available when EC2 sells
// the type in the zone (DescribeInstanceTypeOfferings, kept for an hour);
// without permission for that call every offering of the catalog is, and
// the plugin says so once.
func (p *provider) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return cfg.types.List(ctx, func(ctx context.Context) (kit.Sells, error) {
		offered, err := cfg.offerings.Get(ctx)
		if offered == nil {
			return nil, err
		}
		return func(typ, zone string) bool { return offered[typ][zone] }, nil
	})
}

// offered is which types EC2 sells in which of the cells' zones: type →
// zone → sold.
type offered = map[string]map[string]bool

// fetchOfferings returns the offerings cache's source:
// DescribeInstanceTypeOfferings of the cells' zones; nil when EC2 answers
// none (an endpoint that does not know).
func (p *provider) fetchOfferings(api ec2API, zones []string) func(context.Context) (offered, error) {
	return func(ctx context.Context) (offered, error) {
		sold := offered{}
		in := &ec2.DescribeInstanceTypeOfferingsInput{
			LocationType: types.LocationTypeAvailabilityZone,
			Filters:      []types.Filter{{Name: aws.String("location"), Values: zones}},
			MaxResults:   aws.Int32(1000),
		}
		for pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(api, in); pages.HasMorePages(); {
			page, err := pages.NextPage(ctx)
			if errorCode(err) == codeUnauthorized {
				return nil, kit.Denied("the IAM policy does not allow ec2:DescribeInstanceTypeOfferings: every type of the catalog is offered as available in every zone, and launches of types a zone does not sell fail over to the next candidate",
					errors.New(apiText("DescribeInstanceTypeOfferings", err)))
			}
			if err != nil {
				return nil, mapError("DescribeInstanceTypeOfferings", err)
			}
			for _, off := range page.InstanceTypeOfferings {
				name := string(off.InstanceType)
				if sold[name] == nil {
					sold[name] = map[string]bool{}
				}
				sold[name][aws.ToString(off.Location)] = true
			}
		}
		if len(sold) == 0 {
			// EC2 sells something in every zone; an empty answer is an
			// endpoint that does not know, not a region that sells nothing.
			p.Log.Warn("DescribeInstanceTypeOfferings answered no offering in the cells' zones: every type of the catalog is offered as available", "zones", zones)
			return nil, nil
		}
		return sold, nil
	}
}
