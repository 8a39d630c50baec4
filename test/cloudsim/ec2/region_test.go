package ec2sim

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

func flt(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	ctx := t.Context()
	_, url := startSim(t, Options{InstanceTypes: []InstanceType{
		{Name: "t3.micro", VCPUs: 2, MemoryMiB: 1024},
		{Name: "g5.xlarge", VCPUs: 4, MemoryMiB: 16384, Zones: []string{"us-east-1b"}},
		{Name: "m5.large", VCPUs: 2, MemoryMiB: 8192, Zones: []string{"us-east-1a", "us-east-1c"}},
	}})
	c := ec2Client(url, noRetries)
	type offer struct{ Type, Location string }
	tests := []struct {
		name     string
		in       *ec2.DescribeInstanceTypeOfferingsInput
		want     []offer
		wantCode string
	}{
		{name: "region (default)", in: &ec2.DescribeInstanceTypeOfferingsInput{},
			want: []offer{{"t3.micro", "us-east-1"}, {"g5.xlarge", "us-east-1"}, {"m5.large", "us-east-1"}}},
		{name: "zones", in: &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone},
			want: []offer{{"t3.micro", "us-east-1a"}, {"t3.micro", "us-east-1b"}, {"t3.micro", "us-east-1c"}, {"g5.xlarge", "us-east-1b"}, {"m5.large", "us-east-1a"}, {"m5.large", "us-east-1c"}}},
		{name: "zone filter", in: &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone, Filters: []types.Filter{flt("location", "us-east-1b")}},
			want: []offer{{"t3.micro", "us-east-1b"}, {"g5.xlarge", "us-east-1b"}}},
		{name: "type wildcard", in: &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone, Filters: []types.Filter{flt("instance-type", "m5.*")}},
			want: []offer{{"m5.large", "us-east-1a"}, {"m5.large", "us-east-1c"}}},
		{name: "zone IDs", in: &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZoneId, Filters: []types.Filter{flt("instance-type", "g5.xlarge")}},
			want: []offer{{"g5.xlarge", "use1-az2"}}},
		{name: "unknown filter", in: &ec2.DescribeInstanceTypeOfferingsInput{Filters: []types.Filter{flt("vcpus", "2")}}, wantCode: "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.DescribeInstanceTypeOfferings(ctx, tt.in)
			if apiCode(err) != tt.wantCode {
				t.Fatalf("got %v, want code %q", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			var got []offer
			for _, o := range out.InstanceTypeOfferings {
				got = append(got, offer{string(o.InstanceType), aws.ToString(o.Location)})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("offerings (-want +got):\n%s", d)
			}
		})
	}

	// Paginated over the SDK's paginator, 5 per page.
	var all []string
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(5)})
	pages := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range page.InstanceTypeOfferings {
			all = append(all, string(o.InstanceType)+"@"+aws.ToString(o.Location))
		}
	}
	if pages != 2 || len(all) != 6 {
		t.Errorf("%d pages, %d offerings; want 2 pages, 6 offerings", pages, len(all))
	}
}

func TestDescribeSubnets(t *testing.T) {
	_, url := startSim(t, Options{
		Zones: []string{"us-east-1a", "us-east-1b"},
		Subnets: []Subnet{
			{ID: "subnet-0aaaaaaaaaaaaaaa1", Zone: "us-east-1a", VPCID: "vpc-0kip", Tags: map[string]string{"kipcell.io/cells": "true"}},
			{ID: "subnet-0aaaaaaaaaaaaaaa2", Zone: "us-east-1b", VPCID: "vpc-0kip"},
			{ID: "subnet-0bbbbbbbbbbbbbbb1", Zone: "us-east-1a", VPCID: "vpc-0other", DefaultForAZ: true},
		},
	})
	c := ec2Client(url, noRetries)
	tests := []struct {
		name     string
		in       *ec2.DescribeSubnetsInput
		want     []string
		wantCode string
	}{
		{name: "all", in: &ec2.DescribeSubnetsInput{}, want: []string{"subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0bbbbbbbbbbbbbbb1"}},
		{name: "vpc", in: &ec2.DescribeSubnetsInput{Filters: []types.Filter{flt("vpc-id", "vpc-0kip")}}, want: []string{"subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"}},
		{name: "vpc and tag", in: &ec2.DescribeSubnetsInput{Filters: []types.Filter{flt("vpc-id", "vpc-0kip"), flt("tag:kipcell.io/cells", "true")}}, want: []string{"subnet-0aaaaaaaaaaaaaaa1"}},
		{name: "zone", in: &ec2.DescribeSubnetsInput{Filters: []types.Filter{flt("availability-zone", "us-east-1b")}}, want: []string{"subnet-0aaaaaaaaaaaaaaa2"}},
		{name: "ids", in: &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0bbbbbbbbbbbbbbb1"}}, want: []string{"subnet-0bbbbbbbbbbbbbbb1"}},
		{name: "missing id", in: &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0ccccccccccccccc1"}}, wantCode: "InvalidSubnetID.NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.DescribeSubnets(t.Context(), tt.in)
			if apiCode(err) != tt.wantCode {
				t.Fatalf("got %v, want code %q", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			var got []string
			for _, s := range out.Subnets {
				got = append(got, aws.ToString(s.SubnetId))
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("subnets (-want +got):\n%s", d)
			}
		})
	}
	out, err := c.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0aaaaaaaaaaaaaaa1"}})
	if err != nil {
		t.Fatal(err)
	}
	s := out.Subnets[0]
	if aws.ToString(s.CidrBlock) != "10.0.1.0/24" || aws.ToInt32(s.AvailableIpAddressCount) != 251 || aws.ToString(s.AvailabilityZone) != "us-east-1a" {
		t.Errorf("subnet %s: cidr %s free %d zone %s", aws.ToString(s.SubnetId), aws.ToString(s.CidrBlock), aws.ToInt32(s.AvailableIpAddressCount), aws.ToString(s.AvailabilityZone))
	}

	// Instances use addresses of their subnet.
	id := launch(t, c, runInput("t3.micro", "subnet-0aaaaaaaaaaaaaaa1", ""))
	if ip := aws.ToString(describe(t, c, id).PrivateIpAddress); ip != "10.0.1.4" {
		t.Errorf("instance without a cell got %q, want 10.0.1.4 (the first address EC2 hands out)", ip)
	}
	out, _ = c.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0aaaaaaaaaaaaaaa1"}})
	if n := aws.ToInt32(out.Subnets[0].AvailableIpAddressCount); n != 250 {
		t.Errorf("after a launch: %d free addresses, want 250", n)
	}
}

func TestDescribeImages(t *testing.T) {
	_, url := startSim(t, Options{Images: append(slices.Clone(DefaultImages),
		Image{ID: "ami-0000000000000c001", Name: "kip-cell-private", OwnerID: DefaultAccountID, CreationDate: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
		Image{ID: "ami-0000000000000c002", Name: "someone-elses", OwnerID: "999999999999", CreationDate: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
	)})
	c := ec2Client(url, noRetries)
	tests := []struct {
		name     string
		in       *ec2.DescribeImagesInput
		want     []string
		wantCode string
	}{
		{name: "owner and name wildcard", in: &ec2.DescribeImagesInput{Owners: []string{DebianOwnerID}, Filters: []types.Filter{flt("name", "debian-12-amd64-*")}},
			want: []string{"ami-0de0000000000a001", "ami-0de0000000000a002"}},
		{name: "architecture", in: &ec2.DescribeImagesInput{Owners: []string{DebianOwnerID}, Filters: []types.Filter{flt("architecture", "arm64")}},
			want: []string{"ami-0de0000000000b001", "ami-0de0000000000b002"}},
		{name: "self", in: &ec2.DescribeImagesInput{Owners: []string{"self"}}, want: []string{"ami-0000000000000c001"}},
		{name: "no owner: public and own", in: &ec2.DescribeImagesInput{Filters: []types.Filter{flt("name", "kip-*", "someone-*")}}, want: []string{"ami-0000000000000c001"}},
		{name: "by id", in: &ec2.DescribeImagesInput{ImageIds: []string{"ami-0000000000000c002"}}, want: []string{"ami-0000000000000c002"}},
		{name: "missing id", in: &ec2.DescribeImagesInput{ImageIds: []string{"ami-0000000000000dead"}}, wantCode: "InvalidAMIID.NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.DescribeImages(t.Context(), tt.in)
			if apiCode(err) != tt.wantCode {
				t.Fatalf("got %v, want code %q", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			var got []string
			for _, im := range out.Images {
				got = append(got, aws.ToString(im.ImageId))
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("images (-want +got):\n%s", d)
			}
		})
	}
	out, err := c.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{"ami-0de0000000000a002"}})
	if err != nil {
		t.Fatal(err)
	}
	im := out.Images[0]
	if aws.ToString(im.CreationDate) != "2026-11-01T10:00:00.000Z" || aws.ToString(im.Name) != "debian-12-amd64-20261101-2650" ||
		im.Architecture != types.ArchitectureValuesX8664 || im.State != types.ImageStateAvailable {
		t.Errorf("image %+v", im)
	}
}

func TestDescribeAvailabilityZones(t *testing.T) {
	_, url := startSim(t, Options{Region: "ap-southeast-2"})
	c := ec2Client(url, noRetries, func(o *ec2.Options) { o.Region = "ap-southeast-2" })
	out, err := c.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, z := range out.AvailabilityZones {
		got = append(got, aws.ToString(z.ZoneName)+"/"+aws.ToString(z.ZoneId)+"/"+string(z.State))
	}
	want := []string{"ap-southeast-2a/apse2-az1/available", "ap-southeast-2b/apse2-az2/available", "ap-southeast-2c/apse2-az3/available"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("zones (-want +got):\n%s", d)
	}
	out, err = c.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{Filters: []types.Filter{flt("zone-name", "*b")}})
	if err != nil || len(out.AvailabilityZones) != 1 {
		t.Errorf("zone-name filter: %v %d zones", err, len(out.AvailabilityZones))
	}
	if _, err := c.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1a"}}); apiCode(err) != "InvalidParameterValue" {
		t.Errorf("unknown zone: %v", err)
	}
}

func TestRegionCode(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1": "use1", "eu-west-1": "euw1", "ap-southeast-2": "apse2", "ap-northeast-1": "apne1",
		"eu-central-1": "euc1", "sa-east-1": "sae1", "us-gov-west-1": "usgw1",
	} {
		if got := regionCode(region); got != want {
			t.Errorf("regionCode(%q) = %q, want %q", region, got, want)
		}
	}
}
