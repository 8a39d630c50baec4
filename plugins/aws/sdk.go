package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
)

// ec2API is every EC2 operation the plugin calls, and nothing else: the
// plugin holds its client as an ec2API, so a call outside this list does
// not compile. deploy/aws/iam-policy.json grants exactly these operations
// (plus ec2:CreateTags for RunInstances' TagSpecifications and iam:PassRole
// for its instance profile), and TestIAMPolicyMatchesTheCalls keeps the two
// in step. *ec2.Client implements it.
type ec2API interface {
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	GetConsoleOutput(ctx context.Context, in *ec2.GetConsoleOutputInput, opts ...func(*ec2.Options)) (*ec2.GetConsoleOutputOutput, error)
	DescribeVolumes(ctx context.Context, in *ec2.DescribeVolumesInput, opts ...func(*ec2.Options)) (*ec2.DescribeVolumesOutput, error)
	AttachVolume(ctx context.Context, in *ec2.AttachVolumeInput, opts ...func(*ec2.Options)) (*ec2.AttachVolumeOutput, error)
	DetachVolume(ctx context.Context, in *ec2.DetachVolumeInput, opts ...func(*ec2.Options)) (*ec2.DetachVolumeOutput, error)
}

// ecrAPI is every ECR operation the plugin calls. *ecr.Client implements it.
type ecrAPI interface {
	GetAuthorizationToken(ctx context.Context, in *ecr.GetAuthorizationTokenInput, opts ...func(*ecr.Options)) (*ecr.GetAuthorizationTokenOutput, error)
}

var (
	_ ec2API = (*ec2.Client)(nil)
	_ ecrAPI = (*ecr.Client)(nil)
)
