package aws

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/userdata"
	"github.com/kipcell/kip/plugins/aws/catalog"
)

// maxClientToken is EC2's limit on a ClientToken.
const maxClientToken = 64

// Launch starts the cell's instance with one RunInstances call whose
// ClientToken is the cell ID: EC2 answers a retried call (after a timeout, a
// crash, a restart of either side) with the instance of the first, so a
// cell never gets two. That holds once the instance has ended too: EC2
// keeps the ClientToken at least 24 hours after termination and answers
// the terminated instance, as the contract asks of a Launch of a
// terminated cell. Tags are part of the call (TagSpecifications), so the
// instance and its volume carry them from their first moment.
func (p *provider) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := cfg.plan(req)
	if err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	out, err := cfg.ec2.RunInstances(ctx, plan.input)
	if errorCode(err) == codeIdempotentMismatch {
		// The cell was launched before with other parameters (a newer
		// AMI matching image.name since, say): its instance is the answer.
		if inst, ferr := cfg.findCell(ctx, req.CellID); ferr == nil && inst != nil {
			p.Log.Info("cell launched before with other parameters; returning its instance", "cell", req.CellID, "instance", inst.ID)
			cfg.view.Launched(inst.ID, *inst)
			return &pluginapi.LaunchResponse{Instance: *inst}, nil
		}
	}
	if err != nil {
		// The instance may exist even so (the answer was lost): the next
		// List must ask EC2 rather than trust the snapshot.
		cfg.view.Uncertain()
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, mapLaunchError(err, req.InstanceType, plan.zone, plan.capacity))
	}
	if len(out.Instances) != 1 {
		cfg.view.Uncertain()
		return nil, fmt.Errorf("launching cell %s: RunInstances answered %d instances, want 1", req.CellID, len(out.Instances))
	}
	inst := instanceFromEC2(out.Instances[0])
	if c := inst.Tags[pluginapi.TagCluster]; c != "" && c != cfg.clusterID {
		return nil, fmt.Errorf("launching cell %s: ClientToken %q already launched instance %s for cluster %q; cell IDs must be unique in the account and region",
			req.CellID, req.CellID, inst.ID, c)
	}
	// RunInstances may answer before the tags show; they are the request's.
	if inst.Tags[pluginapi.TagCell] == "" {
		inst.Tags = plan.tags
	}
	inst.CellID = req.CellID
	cfg.view.Launched(inst.ID, inst)
	p.Log.Info("cell launched", "cell", req.CellID, "instance", inst.ID, "type", req.InstanceType,
		"zone", inst.Zone, "capacity_type", plan.capacity, "subnet", plan.subnet, "pod_address", inst.PodAddress())
	return &pluginapi.LaunchResponse{Instance: inst}, nil
}

// launchPlan is a RunInstances call and what it was made of.
type launchPlan struct {
	input    *ec2.RunInstancesInput
	zone     string
	subnet   string
	capacity pluginapi.CapacityType
	tags     map[string]string
}

// plan turns a launch request into a RunInstances call. It is pure: the
// same request and configuration give the same call, which a retry under
// the same ClientToken needs.
func (cfg *config) plan(req *pluginapi.LaunchRequest) (*launchPlan, error) {
	capacity, err := req.Capacity()
	if err != nil {
		return nil, err
	}
	if len(req.CellID) > maxClientToken {
		return nil, fmt.Errorf("cell ID %q is longer than EC2's ClientToken (%d characters)", req.CellID, maxClientToken)
	}
	if err := cfg.allowed(req); err != nil {
		return nil, err
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded catalog: %w", err)
	}
	spec, known := cat.Type(req.InstanceType)

	image := cfg.image.id
	if req.Image != "" {
		if !amiRE.MatchString(req.Image) {
			return nil, pluginapi.NewInvalidConfig("image", "the requested image %q is not an AMI ID such as \"ami-0abc\"", req.Image)
		}
		image = req.Image
	} else if known && cfg.image.arch != "" && pluginapi.Arch(spec.Arch) != cfg.image.arch {
		return nil, pluginapi.NewInvalidConfig("image", "image %s is %s; instance type %s is %s", cfg.image.id, cfg.image.arch, req.InstanceType, spec.Arch)
	}

	zone, subnet, err := cfg.placement(req, capacity)
	if err != nil {
		return nil, err
	}

	userData, err := userdata.Build(cfg.cloudConfig, req.Bootstrap)
	if err != nil {
		return nil, err
	}
	if len(userData) > maxUserData {
		return nil, pluginapi.NewInvalidConfig("cloudInit", "the user data (cloud-init and bootstrap) is %d bytes; EC2 takes at most %d", len(userData), maxUserData)
	}

	tags := cfg.tagsFor(req)
	// The primary network interface, in the zone's subnet with the
	// security groups, has a secondary private address: the pod's own
	// (pluginapi.AddressPod). The agent gives it to the pod's network
	// namespace, so that a pod never shares the instance's network; EC2
	// routes it to the interface and its source/destination check lets it
	// out, as the VPC CNI's pod addresses. The subnet and groups go on the
	// interface: EC2 refuses them beside it at the instance's level.
	nic := types.InstanceNetworkInterfaceSpecification{
		DeviceIndex:                    aws.Int32(0),
		SubnetId:                       aws.String(subnet),
		SecondaryPrivateIpAddressCount: aws.Int32(1),
		DeleteOnTermination:            aws.Bool(true),
	}
	input := &ec2.RunInstancesInput{
		ClientToken:       aws.String(req.CellID),
		ImageId:           aws.String(image),
		InstanceType:      types.InstanceType(req.InstanceType),
		MinCount:          aws.Int32(1),
		MaxCount:          aws.Int32(1),
		NetworkInterfaces: []types.InstanceNetworkInterfaceSpecification{nic},
		// IMDSv2 only, one hop: the agent reads metadata (its address,
		// spot notices); the pod, in a network namespace of its own
		// behind a veth, is one hop further and gets no token, and the
		// agent drops its traffic to metadata besides (cell/podnet).
		// Tags stay out of metadata unless the operator asks.
		MetadataOptions: &types.InstanceMetadataOptionsRequest{
			HttpEndpoint:            types.InstanceMetadataEndpointStateEnabled,
			HttpTokens:              types.HttpTokensStateRequired,
			HttpPutResponseHopLimit: aws.Int32(1),
			InstanceMetadataTags:    types.InstanceMetadataTagsStateDisabled,
		},
		// A cell that shuts itself down is gone: a stopped instance
		// would keep its volume (billed) and its cell ID.
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: ec2Tags(tags)},
			{ResourceType: types.ResourceTypeVolume, Tags: ec2Tags(tags)},
		},
	}
	if len(userData) > 0 {
		input.UserData = aws.String(base64.StdEncoding.EncodeToString(userData))
	}
	if groups := dedupe(append(slices.Clone(cfg.securityGroups), req.SecurityGroups...)); len(groups) > 0 {
		input.NetworkInterfaces[0].Groups = groups
	}
	if profile := cmp.Or(req.InstanceProfile, cfg.instanceProfile); profile != "" {
		if strings.HasPrefix(profile, "arn:") {
			input.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: aws.String(profile)}
		} else {
			input.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(profile)}
		}
	}
	if capacity == pluginapi.CapacitySpot {
		input.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{
			MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{
				SpotInstanceType:             types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
			},
		}
	}
	// Burstable types get the credit option the host priced: unlimited
	// when it asked, standard otherwise (never the account's default,
	// which for T3 and later is unlimited and bills surplus credits).
	switch {
	case req.UnlimitedCPUCredits:
		input.CreditSpecification = &types.CreditSpecificationRequest{CpuCredits: aws.String("unlimited")}
	case known && spec.BaselineMilliCPU > 0:
		input.CreditSpecification = &types.CreditSpecificationRequest{CpuCredits: aws.String("standard")}
	}
	if cfg.metadataTags {
		input.MetadataOptions.InstanceMetadataTags = types.InstanceMetadataTagsStateEnabled
	}
	if cfg.podMetadata {
		input.MetadataOptions.HttpPutResponseHopLimit = aws.Int32(2)
	}
	// The root volume is always encrypted (with the configured key, or
	// EBS's default one), whatever the AMI's snapshot is, and ends with
	// the instance; its size and type change only when the pod asks.
	root := &types.EbsBlockDevice{Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}
	if cfg.kmsKeyID != "" {
		root.KmsKeyId = aws.String(cfg.kmsKeyID)
	}
	if req.VolumeSizeGiB > 0 {
		root.VolumeSize, root.VolumeType = aws.Int32(req.VolumeSizeGiB), types.VolumeTypeGp3
	}
	input.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String(cfg.image.rootDevice), Ebs: root}}
	return &launchPlan{input: input, zone: zone, subnet: subnet, capacity: capacity, tags: tags}, nil
}

// Pod annotations the host turns into LaunchRequest fields; the plugin
// names them when it refuses a value.
const (
	annotationInstanceProfile = "kipcell.io/instance-profile"
	annotationSecurityGroups  = "kipcell.io/security-groups"
)

// allowed refuses an instance profile or security group the operator did
// not allow. The request's values come from the pod's annotations, and a
// pod author is not trusted with the account: an instance profile passes
// its role's credentials to whatever runs on the cell, and a security
// group opens the cell's network. Only the configured defaults and the
// allow-lists pass. The refusal is InvalidConfig naming the allow-list
// key, so that the operator knows what to change, and its message names
// the annotation and the value, which the host shows on the pod.
func (cfg *config) allowed(req *pluginapi.LaunchRequest) error {
	if p := req.InstanceProfile; p != "" && !slices.Contains(cfg.allowedProfiles, p) {
		return pluginapi.NewInvalidConfig("allowedInstanceProfiles",
			"the pod's annotation %s asks for instance profile %q, which allowedInstanceProfiles does not list", annotationInstanceProfile, p)
	}
	var refused []string
	for _, g := range req.SecurityGroups {
		if !slices.Contains(cfg.allowedGroups, g) {
			refused = append(refused, g)
		}
	}
	if len(refused) > 0 {
		return pluginapi.NewInvalidConfig("allowedSecurityGroups",
			"the pod's annotation %s asks for security group %s, which allowedSecurityGroups does not list", annotationSecurityGroups, strings.Join(refused, ", "))
	}
	return nil
}

// placement picks the zone and subnet: the first of req.Zones with a
// subnet, or, when the request names no zone, one derived from the cell ID
// (the same every retry, spread over the zones).
func (cfg *config) placement(req *pluginapi.LaunchRequest, capacity pluginapi.CapacityType) (string, string, error) {
	if len(req.Zones) == 0 {
		h := fnv.New32a()
		h.Write([]byte(req.CellID))
		zone := cfg.zones[int(h.Sum32()%uint32(len(cfg.zones)))]
		return zone, cfg.subnets[zone], nil
	}
	for _, z := range req.Zones {
		if subnet, ok := cfg.subnets[z]; ok {
			return z, subnet, nil
		}
	}
	return "", "", pluginapi.NewInsufficientCapacity(req.InstanceType, req.Zones[0], capacity,
		fmt.Sprintf("no configured subnet is in zone %s (the subnets are in %s)", strings.Join(req.Zones, ", "), strings.Join(cfg.zones, ", ")))
}

// tagsFor returns the tags of a cell's instance and volume: the configured
// tags, then the request's, then the standard tags, which win; Name is the
// cell ID unless a configured or requested tag sets it.
func (cfg *config) tagsFor(req *pluginapi.LaunchRequest) map[string]string {
	tags := make(map[string]string, len(cfg.tags)+len(req.Tags)+reservedTags)
	tags["Name"] = req.CellID
	for k, v := range cfg.tags {
		tags[k] = v
	}
	for k, v := range pluginapi.StandardTags(cfg.clusterID, req) {
		tags[k] = v
	}
	return tags
}

// ec2Tags turns tags into EC2's form, sorted by key so that the same tags
// make the same call.
func ec2Tags(tags map[string]string) []types.Tag {
	out := make([]types.Tag, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

// findCell returns the newest instance of this cluster launched with the
// cell's ClientToken, or nil.
func (cfg *config) findCell(ctx context.Context, cellID string) (*pluginapi.Instance, error) {
	insts, err := cfg.describe(ctx, []types.Filter{
		{Name: aws.String("client-token"), Values: []string{cellID}},
		{Name: aws.String("tag:" + pluginapi.TagCluster), Values: []string{cfg.clusterID}},
	})
	if err != nil || len(insts) == 0 {
		return nil, err
	}
	newest := insts[0]
	for _, i := range insts[1:] {
		if i.LaunchedAt.After(newest.LaunchedAt) {
			newest = i
		}
	}
	return &newest, nil
}

func dedupe(s []string) []string {
	out := s[:0]
	seen := map[string]bool{}
	for _, v := range s {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
