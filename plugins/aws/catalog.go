package aws

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/aws/catalog"
)

// ListInstanceTypes returns the embedded catalog for the configured region
// and the zones of the cells' subnets, without the types of another
// architecture than the image's. An offering is available when EC2 sells
// the type in the zone (DescribeInstanceTypeOfferings, kept for an hour);
// without permission for that call every offering of the catalog is, and
// the plugin says so once.
func (p *provider) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded catalog: %w", err)
	}
	all, warnings := cat.InstanceTypes(cfg.region, cfg.zones)
	offered, err := cfg.offerings.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instance types: %w", err)
	}
	out := all[:0]
	otherArch := 0
	for _, t := range all {
		if cfg.image.arch != "" && t.Arch != cfg.image.arch {
			otherArch++
			continue
		}
		if offered != nil {
			for i := range t.Offerings {
				t.Offerings[i].Available = offered[t.Name][t.Offerings[i].Zone]
			}
		}
		out = append(out, t)
	}
	cfg.warnOnce.Do(func() {
		for _, w := range warnings {
			p.log.Warn(w)
		}
		if otherArch > 0 {
			p.log.Info("catalog: leaving out the types of another architecture than the image's",
				"image", cfg.image.id, "arch", cfg.image.arch, "left_out", otherArch)
		}
	})
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: out}, nil
}

// offerings caches which types EC2 sells in which of the cells' zones.
type offerings struct {
	api   ec2API
	zones []string
	ttl   time.Duration
	now   func() time.Time
	log   *slog.Logger

	sem chan struct{} // one fetch at a time; a waiter may give up with its ctx

	// Guarded by sem.
	at      time.Time
	offered map[string]map[string]bool // type → zone → sold; nil: not permitted
	denied  bool                       // the last fetch was refused (logged once)
}

// get returns type → zone → sold, or nil when the plugin may not ask.
func (o *offerings) get(ctx context.Context) (map[string]map[string]bool, error) {
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-o.sem }()
	if !o.at.IsZero() && o.now().Sub(o.at) < o.ttl {
		return o.offered, nil
	}
	offered := map[string]map[string]bool{}
	in := &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: types.LocationTypeAvailabilityZone,
		Filters:      []types.Filter{{Name: aws.String("location"), Values: o.zones}},
		MaxResults:   aws.Int32(1000),
	}
	for pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(o.api, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if errorCode(err) == codeUnauthorized {
			if !o.denied {
				o.log.Warn("the IAM policy does not allow ec2:DescribeInstanceTypeOfferings: every type of the catalog is offered as available in every zone, and launches of types a zone does not sell fail over to the next candidate",
					"error", apiText("DescribeInstanceTypeOfferings", err))
			}
			o.denied, o.offered, o.at = true, nil, o.now()
			return nil, nil
		}
		if err != nil {
			return nil, mapError("DescribeInstanceTypeOfferings", err)
		}
		for _, off := range page.InstanceTypeOfferings {
			name := string(off.InstanceType)
			if offered[name] == nil {
				offered[name] = map[string]bool{}
			}
			offered[name][aws.ToString(off.Location)] = true
		}
	}
	if len(offered) == 0 {
		// EC2 sells something in every zone; an empty answer is an
		// endpoint that does not know, not a region that sells nothing.
		o.log.Warn("DescribeInstanceTypeOfferings answered no offering in the cells' zones: every type of the catalog is offered as available", "zones", o.zones)
		offered = nil
	}
	o.denied, o.offered, o.at = false, offered, o.now()
	return offered, nil
}
