package ec2sim

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
)

func TestRunPendingToRunning(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	cells := newFakeCells()
	cells.Gate = make(chan struct{})
	sim, url := startSim(t, Options{Cells: cells, Now: clk.Now, BootDelay: 30 * time.Second})
	c := ec2Client(url, noRetries)

	bootstrap := `{"cellID":"cell-a","caPEM":"…"}`
	out, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId:          aws.String("ami-0de0000000000a002"),
		InstanceType:     types.InstanceTypeT3Micro,
		MinCount:         aws.Int32(1),
		MaxCount:         aws.Int32(1),
		ClientToken:      aws.String("cell-a"),
		SubnetId:         aws.String("subnet-00000000000000002"),
		SecurityGroupIds: []string{"sg-0123456789abcdef0", "sg-0fedcba9876543210"},
		IamInstanceProfile: &types.IamInstanceProfileSpecification{
			Arn: aws.String("arn:aws:iam::123456789012:instance-profile/kip-cell"),
		},
		UserData: aws.String(mimeUserData(t, "#cloud-config\npackages: [containerd]\n", bootstrap)),
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("kipcell.io/cell"), Value: aws.String("cell-a")}, {Key: aws.String("Name"), Value: aws.String("cell-a")}}},
			{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("kipcell.io/cell"), Value: aws.String("cell-a")}}},
		},
		MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
			InstanceMetadataTags: types.InstanceMetadataTagsStateEnabled},
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		CreditSpecification:               &types.CreditSpecificationRequest{CpuCredits: aws.String("unlimited")},
		BlockDeviceMappings: []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsBlockDevice{
			VolumeSize: aws.Int32(30), VolumeType: types.VolumeTypeGp3, Encrypted: aws.Bool(true), KmsKeyId: aws.String("alias/kip-cells")}}},
	})
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	got := out.Instances[0]
	id := aws.ToString(got.InstanceId)
	if stateName(got) != "pending" || got.PrivateIpAddress != nil {
		t.Errorf("RunInstances answered state %q address %v, want pending without an address", stateName(got), aws.ToString(got.PrivateIpAddress))
	}
	if aws.ToString(got.Placement.AvailabilityZone) != "us-east-1b" || aws.ToString(got.SubnetId) != "subnet-00000000000000002" {
		t.Errorf("placement %s subnet %s, want us-east-1b subnet-00000000000000002", aws.ToString(got.Placement.AvailabilityZone), aws.ToString(got.SubnetId))
	}
	if in := describe(t, c, id); stateName(in) != "pending" {
		t.Errorf("before the cell started: state %q, want pending", stateName(in))
	}

	close(cells.Gate)
	eventually(t, "the cell to start", func() bool { return cells.IsStarted(id) })
	eventually(t, "the address", func() bool { return describe(t, c, id).PrivateIpAddress != nil })
	if in := describe(t, c, id); stateName(in) != "pending" {
		t.Errorf("cell started, boot delay not over: state %q, want pending", stateName(in))
	}
	clk.Advance(30 * time.Second)
	in := describe(t, c, id)
	if stateName(in) != "running" || aws.ToString(in.PrivateIpAddress) != cells.Address(id) {
		t.Fatalf("after the boot delay: state %q address %q, want running at %q", stateName(in), aws.ToString(in.PrivateIpAddress), cells.Address(id))
	}
	if aws.ToString(in.PrivateDnsName) != "ip-"+strings.ReplaceAll(cells.Address(id), ".", "-")+".ec2.internal" {
		t.Errorf("privateDnsName %q", aws.ToString(in.PrivateDnsName))
	}
	if cells.Bootstrap(id) != bootstrap || cells.Type(id) != "t3.micro" {
		t.Errorf("cell started with type %q bootstrap %q, want t3.micro %q", cells.Type(id), cells.Bootstrap(id), bootstrap)
	}

	// What DescribeInstances says, through the SDK's decoding.
	var tags []string
	for _, tg := range in.Tags {
		tags = append(tags, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
	}
	var groups []string
	for _, g := range in.SecurityGroups {
		groups = append(groups, aws.ToString(g.GroupId))
	}
	gotDesc := map[string]any{
		"type": string(in.InstanceType), "image": aws.ToString(in.ImageId), "token": aws.ToString(in.ClientToken),
		"tags": tags, "groups": groups, "profile": aws.ToString(in.IamInstanceProfile.Arn),
		"tokens": string(in.MetadataOptions.HttpTokens), "arch": string(in.Architecture), "vpc": aws.ToString(in.VpcId),
		"metadata tags": string(in.MetadataOptions.InstanceMetadataTags),
		"launched":      in.LaunchTime.Equal(clk.Now().Add(-30 * time.Second)),
	}
	wantDesc := map[string]any{
		"type": "t3.micro", "image": "ami-0de0000000000a002", "token": "cell-a",
		"tags": []string{"Name=cell-a", "kipcell.io/cell=cell-a"}, "groups": []string{"sg-0123456789abcdef0", "sg-0fedcba9876543210"},
		"profile": "arn:aws:iam::123456789012:instance-profile/kip-cell", "tokens": "required", "arch": "x86_64", "vpc": DefaultVPCID,
		"metadata tags": "enabled",
		"launched":      true,
	}
	if d := cmp.Diff(wantDesc, gotDesc); d != "" {
		t.Errorf("DescribeInstances (-want +got):\n%s", d)
	}

	// What the server recorded of the request.
	rec, ok := sim.Instance(id)
	if !ok {
		t.Fatal("Instance: not found")
	}
	if d := cmp.Diff(Instance{
		ID: id, ReservationID: rec.ReservationID, ClientToken: "cell-a", ImageID: "ami-0de0000000000a002", InstanceType: "t3.micro",
		Zone: "us-east-1b", SubnetID: "subnet-00000000000000002", VPCID: DefaultVPCID, State: "running", PrivateIP: cells.Address(id),
		LaunchTime: rec.LaunchTime, SecurityGroupIDs: []string{"sg-0123456789abcdef0", "sg-0fedcba9876543210"},
		IamInstanceProfile: "arn:aws:iam::123456789012:instance-profile/kip-cell",
		Tags:               map[string]string{"kipcell.io/cell": "cell-a", "Name": "cell-a"},
		VolumeTags:         map[string]string{"kipcell.io/cell": "cell-a"},
		UserData:           rec.UserData, Bootstrap: []byte(bootstrap),
		MetadataHTTPTokens: "required", MetadataHopLimit: 1, MetadataTags: "enabled", ShutdownBehavior: "terminate", CPUCredits: "unlimited",
		BlockDevices: []BlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 30, VolumeType: "gp3", Encrypted: aws.Bool(true), KMSKeyID: "alias/kip-cells"}},
	}, rec); d != "" {
		t.Errorf("Instance (-want +got):\n%s", d)
	}
	if !strings.Contains(string(rec.UserData), "text/cloud-config") {
		t.Errorf("user data lost its cloud-config part:\n%s", rec.UserData)
	}
}

func TestInstanceRunningWaiter(t *testing.T) {
	_, url := startSim(t, Options{Cells: newFakeCells(), BootDelay: 200 * time.Millisecond})
	c := ec2Client(url)
	id := launch(t, c, runInput("t3.small", "", ""))
	w := ec2.NewInstanceRunningWaiter(c, func(o *ec2.InstanceRunningWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, 10*time.Second); err != nil {
		t.Fatalf("InstanceRunningWaiter: %v", err)
	}
}

func TestCellStartFailure(t *testing.T) {
	cells := newFakeCells()
	cells.FailStart = errors.New("no room")
	_, url := startSim(t, Options{Cells: cells})
	c := ec2Client(url, noRetries)
	id := launch(t, c, runInput("t3.small", "", ""))
	eventually(t, "terminated", func() bool { return stateName(describe(t, c, id)) == "terminated" })
	in := describe(t, c, id)
	if aws.ToString(in.StateReason.Code) != ReasonInternalError {
		t.Errorf("stateReason %q, want %s", aws.ToString(in.StateReason.Code), ReasonInternalError)
	}
	eventually(t, "the failed cell to be cleaned up", func() bool { return cells.Stops(id) == 1 })
}

func TestClientTokenIdempotency(t *testing.T) {
	ctx := t.Context()
	sim, url := startSim(t, Options{})
	c := ec2Client(url, noRetries)
	first := launch(t, c, runInput("t3.micro", "", "token-1"))

	tests := []struct {
		name     string
		in       *ec2.RunInstancesInput
		wantCode string
		wantSame bool
	}{
		{name: "same token, same parameters", in: runInput("t3.micro", "", "token-1"), wantSame: true},
		{name: "same token, other type", in: runInput("t3.small", "", "token-1"), wantCode: "IdempotentParameterMismatch"},
		{name: "same token, other subnet", in: runInput("t3.micro", "subnet-00000000000000003", "token-1"), wantCode: "IdempotentParameterMismatch"},
		// EC2 compares the parameters "other than the Region or
		// Availability Zone" (ec2/latest/devguide/ec2-api-idempotency.html).
		{name: "same token, other zone", in: func() *ec2.RunInstancesInput {
			in := runInput("t3.micro", "", "token-1")
			in.Placement = &types.Placement{AvailabilityZone: aws.String("us-east-1c")}
			return in
		}(), wantSame: true},
		{name: "same token, other market", in: func() *ec2.RunInstancesInput {
			in := runInput("t3.micro", "", "token-1")
			in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
			return in
		}(), wantCode: "IdempotentParameterMismatch"},
		{name: "other token", in: runInput("t3.micro", "", "token-2")},
		{name: "no token", in: runInput("t3.micro", "", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.RunInstances(ctx, tt.in)
			if code := apiCode(err); code != tt.wantCode {
				t.Fatalf("RunInstances: error %v, want code %q", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if same := aws.ToString(out.Instances[0].InstanceId) == first; same != tt.wantSame {
				t.Errorf("got instance %s, first was %s: same=%v, want %v", aws.ToString(out.Instances[0].InstanceId), first, same, tt.wantSame)
			}
		})
	}
	if n := len(sim.Instances()); n != 3 {
		t.Errorf("%d instances launched, want 3 (token-1, token-2, no token)", n)
	}
	// A repeat after the instance ended still answers the same instance.
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{first}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.RunInstances(ctx, runInput("t3.micro", "", "token-1"))
	if err != nil || aws.ToString(out.Instances[0].InstanceId) != first || stateName(out.Instances[0]) != "terminated" {
		t.Errorf("repeat after terminate: %v, want %s terminated", err, first)
	}
}

func TestDescribeFilters(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	_, url := startSim(t, Options{Now: clk.Now})
	c := ec2Client(url, noRetries)
	tagged := func(typ, subnet, token string, tags map[string]string) *ec2.RunInstancesInput {
		in := runInput(typ, subnet, token)
		spec := types.TagSpecification{ResourceType: types.ResourceTypeInstance}
		for k, v := range tags {
			spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []types.TagSpecification{spec}
		return in
	}
	a := launch(t, c, tagged("t3.micro", "subnet-00000000000000001", "ta", map[string]string{"kipcell.io/cluster": "c1", "cell/pod": "default/nginx"}))
	b := launch(t, c, tagged("t3.small", "subnet-00000000000000002", "tb", map[string]string{"kipcell.io/cluster": "c1", "cell/pod": "default/redis"}))
	d := launch(t, c, tagged("t3.micro", "subnet-00000000000000003", "td", map[string]string{"kipcell.io/cluster": "c2"}))
	spotIn := runInput("t3.micro", "", "te")
	spotIn.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	e := launch(t, c, spotIn)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{d}}); err != nil {
		t.Fatal(err)
	}
	all := []string{a, b, d, e}
	sort.Strings(all)
	sorted := func(s ...string) []string { sort.Strings(s); return s }
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}

	tests := []struct {
		name     string
		in       *ec2.DescribeInstancesInput
		want     []string
		wantCode string
	}{
		{name: "all", in: &ec2.DescribeInstancesInput{}, want: all},
		{name: "tag", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("tag:kipcell.io/cluster", "c1")}}, want: sorted(a, b)},
		{name: "tag with slash value", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("tag:cell/pod", "default/nginx")}}, want: []string{a}},
		{name: "tag wildcard", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("tag:cell/pod", "default/*")}}, want: sorted(a, b)},
		{name: "tag values are ORed", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("tag:kipcell.io/cluster", "c1", "c2")}}, want: sorted(a, b, d)},
		{name: "tag-key", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("tag-key", "cell/pod")}}, want: sorted(a, b)},
		{name: "filters are ANDed", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("tag:kipcell.io/cluster", "c1"), f("instance-type", "t3.micro")}}, want: []string{a}},
		{name: "state", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("instance-state-name", "pending", "running")}}, want: sorted(a, b, e)},
		{name: "terminated still visible", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("instance-state-name", "terminated", "shutting-down")}}, want: []string{d}},
		{name: "instance-id", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("instance-id", b, "i-00000000000000000")}}, want: []string{b}},
		{name: "client-token", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("client-token", "ta")}}, want: []string{a}},
		{name: "zone", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("availability-zone", "us-east-1b")}}, want: []string{b}},
		{name: "spot", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("instance-lifecycle", "spot")}}, want: []string{e}},
		{name: "ids", in: &ec2.DescribeInstancesInput{InstanceIds: []string{d, a}}, want: sorted(a, d)},
		{name: "ids and filter", in: &ec2.DescribeInstancesInput{InstanceIds: []string{d, a}, Filters: []types.Filter{f("instance-state-name", "running", "pending")}}, want: []string{a}},
		{name: "missing id", in: &ec2.DescribeInstancesInput{InstanceIds: []string{a, "i-0000000000000000f"}}, wantCode: "InvalidInstanceID.NotFound"},
		{name: "malformed id", in: &ec2.DescribeInstancesInput{InstanceIds: []string{"nope"}}, wantCode: "InvalidInstanceID.Malformed"},
		{name: "unknown filter", in: &ec2.DescribeInstancesInput{Filters: []types.Filter{f("no-such-filter", "x")}}, wantCode: "InvalidParameterValue"},
		{name: "ids with MaxResults", in: &ec2.DescribeInstancesInput{InstanceIds: []string{a}, MaxResults: aws.Int32(5)}, wantCode: "InvalidParameterCombination"},
		{name: "MaxResults too small", in: &ec2.DescribeInstancesInput{MaxResults: aws.Int32(4)}, wantCode: "InvalidParameterValue"},
		{name: "bad token", in: &ec2.DescribeInstancesInput{NextToken: aws.String("garbage")}, wantCode: "InvalidPaginationToken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.DescribeInstances(ctx, tt.in)
			if code := apiCode(err); code != tt.wantCode {
				t.Fatalf("DescribeInstances: %v, want code %q", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(tt.want, ids(out.Reservations)); d != "" {
				t.Errorf("instances (-want +got):\n%s", d)
			}
		})
	}

	// After TerminatedVisible, the terminated instance is gone.
	clk.Advance(DefaultTerminatedVisible)
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{d}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("terminated an hour ago: %v, want InvalidInstanceID.NotFound", err)
	}
}

func TestPagination(t *testing.T) {
	ctx := t.Context()
	_, url := startSim(t, Options{})
	c := ec2Client(url, noRetries)
	var want []string
	for range 6 {
		want = append(want, launch(t, c, runInput("t3.nano", "", "")))
	}
	// One reservation with six instances: pages split it.
	out, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: aws.String("ami-0de0000000000a002"), InstanceType: types.InstanceTypeT3Nano, MinCount: aws.Int32(6), MaxCount: aws.Int32(6),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range out.Instances {
		want = append(want, aws.ToString(in.InstanceId))
	}
	sort.Strings(want)

	var got []string
	pages := 0
	p := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		n := len(ids(page.Reservations))
		if n > 5 {
			t.Errorf("page %d has %d instances, MaxResults is 5", pages, n)
		}
		got = append(got, ids(page.Reservations)...)
	}
	sort.Strings(got)
	if pages != 3 {
		t.Errorf("%d pages for 12 instances at 5 per page, want 3", pages)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("paginated instances (-want +got):\n%s", d)
	}
}

func TestTerminate(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	cells := newFakeCells()
	sim, url := startSim(t, Options{Cells: cells, Now: clk.Now, ShutdownDelay: 10 * time.Second})
	c := ec2Client(url, noRetries)
	id := launch(t, c, runInput("t3.micro", "", "t"))
	eventually(t, "running", func() bool { return stateName(describe(t, c, id)) == "running" })

	out, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatalf("TerminateInstances: %v", err)
	}
	ch := out.TerminatingInstances[0]
	if ch.CurrentState.Name != types.InstanceStateNameShuttingDown || ch.PreviousState.Name != types.InstanceStateNameRunning {
		t.Errorf("state change %s → %s, want running → shutting-down", ch.PreviousState.Name, ch.CurrentState.Name)
	}
	in := describe(t, c, id)
	if stateName(in) != "shutting-down" || aws.ToString(in.StateReason.Code) != ReasonUserShutdown || !strings.HasPrefix(aws.ToString(in.StateTransitionReason), "User initiated (") {
		t.Errorf("after terminate: %s reason %q transition %q", stateName(in), aws.ToString(in.StateReason.Code), aws.ToString(in.StateTransitionReason))
	}
	eventually(t, "the cell to stop", func() bool { return cells.Stops(id) == 1 })
	if s := stateName(describe(t, c, id)); s != "shutting-down" {
		t.Errorf("cell stopped, shutdown delay not over: %s", s)
	}
	clk.Advance(10 * time.Second)
	if s := stateName(describe(t, c, id)); s != "terminated" {
		t.Errorf("after the shutdown delay: %s, want terminated", s)
	}

	// Terminating again is idempotent.
	out, err = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil || out.TerminatingInstances[0].CurrentState.Name != types.InstanceStateNameTerminated || out.TerminatingInstances[0].PreviousState.Name != types.InstanceStateNameTerminated {
		t.Errorf("second terminate: %v %+v", err, out)
	}
	if cells.Stops(id) != 1 {
		t.Errorf("cell stopped %d times, want once", cells.Stops(id))
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0000000000000000f"}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("terminate unknown: %v, want InvalidInstanceID.NotFound", err)
	}

	// Terminating a pending instance whose cell is still starting stops
	// the cell once it has started.
	cells.Gate = make(chan struct{})
	p := launch(t, c, runInput("t3.micro", "", ""))
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{p}}); err != nil {
		t.Fatal(err)
	}
	close(cells.Gate)
	eventually(t, "the started cell to stop", func() bool { return cells.Stops(p) == 1 })
	clk.Advance(10 * time.Second)
	if got, _ := sim.Instance(p); got.State != "terminated" {
		t.Errorf("pending instance after terminate: %s", got.State)
	}
}

func TestRunInstancesValidation(t *testing.T) {
	_, url := startSim(t, Options{
		InstanceTypes: []InstanceType{
			{Name: "t3.micro", VCPUs: 2, MemoryMiB: 1024},
			{Name: "t4g.micro", VCPUs: 2, MemoryMiB: 1024, Arch: "arm64"},
			{Name: "g5.xlarge", VCPUs: 4, MemoryMiB: 16384, Zones: []string{"us-east-1b"}},
		},
	})
	c := ec2Client(url, noRetries)
	mod := func(f func(*ec2.RunInstancesInput)) *ec2.RunInstancesInput {
		in := runInput("t3.micro", "", "")
		f(in)
		return in
	}
	tests := []struct {
		name     string
		in       *ec2.RunInstancesInput
		wantCode string
	}{
		{name: "valid", in: runInput("t3.micro", "", "")},
		{name: "unknown image", in: mod(func(in *ec2.RunInstancesInput) { in.ImageId = aws.String("ami-00000000000000000") }), wantCode: "InvalidAMIID.NotFound"},
		{name: "malformed image", in: mod(func(in *ec2.RunInstancesInput) { in.ImageId = aws.String("debian") }), wantCode: "InvalidAMIID.Malformed"},
		{name: "unknown type", in: runInput("x9.huge", "", ""), wantCode: "InvalidParameterValue"},
		{name: "arm type, x86 image", in: runInput("t4g.micro", "", ""), wantCode: "InvalidParameterValue"},
		{name: "arm type, arm image", in: mod(func(in *ec2.RunInstancesInput) {
			in.InstanceType, in.ImageId = types.InstanceTypeT4gMicro, aws.String("ami-0de0000000000b002")
		})},
		{name: "unknown subnet", in: runInput("t3.micro", "subnet-0000000000000ffff", ""), wantCode: "InvalidSubnetID.NotFound"},
		{name: "type not offered in the subnet's zone", in: runInput("g5.xlarge", "subnet-00000000000000001", ""), wantCode: "Unsupported"},
		{name: "no subnet picks a zone offering the type", in: runInput("g5.xlarge", "", "")},
		{name: "malformed group", in: mod(func(in *ec2.RunInstancesInput) { in.SecurityGroupIds = []string{"default"} }), wantCode: "InvalidGroupId.Malformed"},
		{name: "user data not base64", in: mod(func(in *ec2.RunInstancesInput) { in.UserData = aws.String("not base64!") }), wantCode: "InvalidParameterValue"},
		{name: "user data over 16 KiB", in: mod(func(in *ec2.RunInstancesInput) {
			in.UserData = aws.String(base64.StdEncoding.EncodeToString(make([]byte, 16*1024+1)))
		}), wantCode: "InvalidParameterValue"},
		{name: "reserved tag key", in: mod(func(in *ec2.RunInstancesInput) {
			in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("aws:x"), Value: aws.String("y")}}}}
		}), wantCode: "InvalidParameterValue"},
		{name: "min above max", in: mod(func(in *ec2.RunInstancesInput) { in.MinCount = aws.Int32(2) }), wantCode: "InvalidParameterValue"},
		{name: "credits on a non-burstable type", in: mod(func(in *ec2.RunInstancesInput) {
			in.InstanceType = types.InstanceTypeG5Xlarge
			in.CreditSpecification = &types.CreditSpecificationRequest{CpuCredits: aws.String("unlimited")}
		}), wantCode: "InvalidParameterValue"},
		{name: "dry run", in: mod(func(in *ec2.RunInstancesInput) { in.DryRun = aws.Bool(true) }), wantCode: "DryRunOperation"},
		{name: "shutdown behaviour", in: mod(func(in *ec2.RunInstancesInput) { in.InstanceInitiatedShutdownBehavior = "hibernate" }), wantCode: "InvalidParameterValue"},
		{name: "metadata tags", in: mod(func(in *ec2.RunInstancesInput) {
			in.MetadataOptions = &types.InstanceMetadataOptionsRequest{InstanceMetadataTags: "on"}
		}), wantCode: "InvalidParameterValue"},
		// "The parameter KmsKeyId requires the parameter Encrypted to be
		// set." (InvalidParameterDependency), as EC2 answered in
		// github.com/keithvassallomt/parsec-aws-automation/issues/12.
		{name: "KMS key without encryption", in: mod(func(in *ec2.RunInstancesInput) {
			in.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsBlockDevice{KmsKeyId: aws.String("alias/kip-cells")}}}
		}), wantCode: "InvalidParameterDependency"},
		{name: "KMS key with encryption off", in: mod(func(in *ec2.RunInstancesInput) {
			in.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsBlockDevice{Encrypted: aws.Bool(false), KmsKeyId: aws.String("alias/kip-cells")}}}
		}), wantCode: "InvalidParameterDependency"},
		{name: "network interface", in: mod(withInterface(1))},
		{name: "network interface and instance subnet", in: mod(func(in *ec2.RunInstancesInput) {
			withInterface(1)(in)
			in.SubnetId = aws.String("subnet-00000000000000001")
		}), wantCode: "InvalidParameterCombination"},
		{name: "network interface and instance groups", in: mod(func(in *ec2.RunInstancesInput) {
			withInterface(1)(in)
			in.SecurityGroupIds = []string{"sg-0123456789abcdef0"}
		}), wantCode: "InvalidParameterCombination"},
		{name: "network interface without device index", in: mod(func(in *ec2.RunInstancesInput) {
			withInterface(1)(in)
			in.NetworkInterfaces[0].DeviceIndex = nil
		}), wantCode: "MissingParameter"},
		{name: "more addresses than the type takes", in: mod(withInterface(2)), wantCode: "PrivateIpAddressLimitExceeded"},
		{name: "negative secondary count", in: mod(withInterface(-1)), wantCode: "InvalidParameterValue"},
		{name: "KMS key with encryption", in: mod(func(in *ec2.RunInstancesInput) {
			in.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsBlockDevice{Encrypted: aws.Bool(true), KmsKeyId: aws.String("alias/kip-cells")}}}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.RunInstances(t.Context(), tt.in)
			if code := apiCode(err); code != tt.wantCode {
				t.Errorf("RunInstances: %v, want code %q", err, tt.wantCode)
			}
		})
	}
}

// withInterface launches with the subnet and a security group on the
// primary network interface, asking for n secondary private addresses.
func withInterface(n int32) func(*ec2.RunInstancesInput) {
	return func(in *ec2.RunInstancesInput) {
		in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{{
			DeviceIndex: aws.Int32(0), SubnetId: aws.String("subnet-00000000000000001"),
			Groups: []string{"sg-0123456789abcdef0"}, SecondaryPrivateIpAddressCount: aws.Int32(n),
		}}
	}
}

// TestSecondaryPrivateAddress launches with a secondary private address on
// the primary interface: DescribeInstances shows the interface, in the
// request's subnet and groups, with the cell's address as primary and its
// pod address as secondary; without a pod address from the cells the
// secondary comes from the subnet and is freed when the instance ends.
func TestSecondaryPrivateAddress(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cells     CellStarter
		primary   string
		secondary string
	}{
		{name: "pod address of the cell", cells: newFakeCells(), primary: "127.77.0.2", secondary: "127.78.0.2"},
		{name: "no cells: subnet addresses", primary: "10.0.1.4", secondary: "10.0.1.5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			sim, url := startSim(t, Options{Cells: tt.cells})
			c := ec2Client(url, noRetries)
			in := runInput("t3.micro", "", "")
			withInterface(1)(in)
			id := launch(t, c, in)
			w := ec2.NewInstanceRunningWaiter(c, func(o *ec2.InstanceRunningWaiterOptions) {
				o.MinDelay, o.MaxDelay = 10*time.Millisecond, 50*time.Millisecond
			})
			out, err := w.WaitForOutput(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, time.Minute)
			if err != nil {
				t.Fatalf("waiting for running: %v", err)
			}
			got := out.Reservations[0].Instances[0]
			if aws.ToString(got.SubnetId) != "subnet-00000000000000001" || len(got.SecurityGroups) != 1 || aws.ToString(got.SecurityGroups[0].GroupId) != "sg-0123456789abcdef0" {
				t.Errorf("subnet %s groups %v, want the interface's", aws.ToString(got.SubnetId), got.SecurityGroups)
			}
			if len(got.NetworkInterfaces) != 1 {
				t.Fatalf("network interfaces %+v, want one", got.NetworkInterfaces)
			}
			ni := got.NetworkInterfaces[0]
			var addrs []string
			for _, a := range ni.PrivateIpAddresses {
				addrs = append(addrs, fmt.Sprintf("%s primary=%t", aws.ToString(a.PrivateIpAddress), aws.ToBool(a.Primary)))
			}
			want := []string{tt.primary + " primary=true", tt.secondary + " primary=false"}
			if !slices.Equal(addrs, want) || aws.ToString(ni.PrivateIpAddress) != tt.primary || aws.ToString(got.PrivateIpAddress) != tt.primary {
				t.Errorf("addresses %v (interface %s, instance %s), want %v", addrs, aws.ToString(ni.PrivateIpAddress), aws.ToString(got.PrivateIpAddress), want)
			}
			if ni.Attachment == nil || aws.ToInt32(ni.Attachment.DeviceIndex) != 0 || aws.ToString(ni.SubnetId) != "subnet-00000000000000001" {
				t.Errorf("interface %+v, want attached at device index 0 in the subnet", ni)
			}
			if snap, _ := sim.Instance(id); !slices.Equal(snap.SecondaryIPs, []string{tt.secondary}) {
				t.Errorf("Instance().SecondaryIPs = %v, want [%s]", snap.SecondaryIPs, tt.secondary)
			}
			if tt.cells != nil {
				return
			}
			// Ended, the instance gives its addresses back: the next
			// launch gets the same two.
			if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
				t.Fatalf("TerminateInstances: %v", err)
			}
			tw := ec2.NewInstanceTerminatedWaiter(c, func(o *ec2.InstanceTerminatedWaiterOptions) {
				o.MinDelay, o.MaxDelay = 10*time.Millisecond, 50*time.Millisecond
			})
			if err := tw.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, time.Minute); err != nil {
				t.Fatalf("waiting for terminated: %v", err)
			}
			if ended := describe(t, c, id); len(ended.NetworkInterfaces) != 0 {
				t.Errorf("terminated instance has network interfaces %+v; EC2 deletes them with it", ended.NetworkInterfaces)
			}
			again := runInput("t3.micro", "", "")
			withInterface(1)(again)
			next := describe(t, c, launch(t, c, again))
			if len(next.NetworkInterfaces) != 1 || len(next.NetworkInterfaces[0].PrivateIpAddresses) != 2 ||
				aws.ToString(next.NetworkInterfaces[0].PrivateIpAddresses[1].PrivateIpAddress) != tt.secondary {
				t.Errorf("next instance's interfaces %+v, want the freed secondary %s again", next.NetworkInterfaces, tt.secondary)
			}
		})
	}
}

func TestEventualConsistency(t *testing.T) {
	clk := newClock()
	sim, url := startSim(t, Options{Now: clk.Now})
	c := ec2Client(url, noRetries)
	sim.SetEventualConsistency(2 * time.Second)
	id := launch(t, c, runInput("t3.micro", "", ""))
	_, err := c.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("right after launch: %v, want InvalidInstanceID.NotFound", err)
	}
	clk.Advance(2 * time.Second)
	if s := stateName(describe(t, c, id)); s != "running" {
		t.Errorf("after the delay: %s, want running", s)
	}
}

func TestDescribeInstanceStatusAndMaintenance(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, url := startSim(t, Options{Now: clk.Now})
	c := ec2Client(url, noRetries)
	a := launch(t, c, runInput("t3.micro", "", ""))
	b := launch(t, c, runInput("t3.micro", "", ""))
	eventID, err := sim.ScheduleMaintenance(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.ScheduleMaintenance("i-0000000000000000f"); err == nil {
		t.Error("ScheduleMaintenance of an unknown instance: no error")
	}

	out, err := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{
		Filters: []types.Filter{{Name: aws.String("event.code"), Values: []string{"system-maintenance"}}},
	})
	if err != nil {
		t.Fatalf("DescribeInstanceStatus: %v", err)
	}
	if len(out.InstanceStatuses) != 1 || aws.ToString(out.InstanceStatuses[0].InstanceId) != a {
		t.Fatalf("instances with a maintenance event: %+v, want %s only", out.InstanceStatuses, a)
	}
	st := out.InstanceStatuses[0]
	ev := st.Events[0]
	if ev.Code != types.EventCodeSystemMaintenance || aws.ToString(ev.InstanceEventId) != eventID ||
		!ev.NotBefore.Equal(clk.Now().Add(24*time.Hour)) || st.InstanceStatus.Status != types.SummaryStatusOk {
		t.Errorf("status %+v event %+v", st.InstanceStatus, ev)
	}

	if err := sim.CompleteEvent(a, eventID, false); err != nil {
		t.Fatal(err)
	}
	out, err = c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{a}})
	if err != nil || !strings.HasPrefix(aws.ToString(out.InstanceStatuses[0].Events[0].Description), "[Completed] ") {
		t.Errorf("completed event: %v %+v", err, out)
	}

	// Only running instances unless IncludeAllInstances.
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{b}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		all  bool
		want []string
	}{{false, []string{a}}, {true, []string{a, b}}} {
		out, err := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{IncludeAllInstances: aws.Bool(tt.all)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range out.InstanceStatuses {
			got = append(got, aws.ToString(s.InstanceId))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("IncludeAllInstances=%v: %v, want %v", tt.all, got, tt.want)
		}
	}
}
