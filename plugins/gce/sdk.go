package gce

import (
	"context"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
)

// The Compute Engine methods the plugin calls, and nothing else: the
// plugin holds each REST client as one of these interfaces, so a call
// outside them does not compile. deploy/gce/role.yaml grants exactly their
// permissions, and iam_test.go keeps the three in step (permissions names
// every method here; the role grants their permissions; a run through
// every Provider method calls exactly these). The *compute clients
// implement them.
type (
	instancesAPI interface {
		AggregatedList(ctx context.Context, req *computepb.AggregatedListInstancesRequest, opts ...gax.CallOption) *compute.InstancesScopedListPairIterator
		AttachDisk(ctx context.Context, req *computepb.AttachDiskInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
		DetachDisk(ctx context.Context, req *computepb.DetachDiskInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
		Delete(ctx context.Context, req *computepb.DeleteInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
		Get(ctx context.Context, req *computepb.GetInstanceRequest, opts ...gax.CallOption) (*computepb.Instance, error)
		GetSerialPortOutput(ctx context.Context, req *computepb.GetSerialPortOutputInstanceRequest, opts ...gax.CallOption) (*computepb.SerialPortOutput, error)
		Insert(ctx context.Context, req *computepb.InsertInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
		Close() error
	}
	zoneOperationsAPI interface {
		List(ctx context.Context, req *computepb.ListZoneOperationsRequest, opts ...gax.CallOption) *compute.OperationIterator
		Wait(ctx context.Context, req *computepb.WaitZoneOperationRequest, opts ...gax.CallOption) (*computepb.Operation, error)
		Close() error
	}
	regionsAPI interface {
		Get(ctx context.Context, req *computepb.GetRegionRequest, opts ...gax.CallOption) (*computepb.Region, error)
		Close() error
	}
	machineTypesAPI interface {
		AggregatedList(ctx context.Context, req *computepb.AggregatedListMachineTypesRequest, opts ...gax.CallOption) *compute.MachineTypesScopedListPairIterator
		Close() error
	}
	imagesAPI interface {
		Get(ctx context.Context, req *computepb.GetImageRequest, opts ...gax.CallOption) (*computepb.Image, error)
		GetFromFamily(ctx context.Context, req *computepb.GetFromFamilyImageRequest, opts ...gax.CallOption) (*computepb.Image, error)
		Close() error
	}
	subnetworksAPI interface {
		Get(ctx context.Context, req *computepb.GetSubnetworkRequest, opts ...gax.CallOption) (*computepb.Subnetwork, error)
		Close() error
	}
)

var (
	_ instancesAPI      = (*compute.InstancesClient)(nil)
	_ zoneOperationsAPI = (*compute.ZoneOperationsClient)(nil)
	_ regionsAPI        = (*compute.RegionsClient)(nil)
	_ machineTypesAPI   = (*compute.MachineTypesClient)(nil)
	_ imagesAPI         = (*compute.ImagesClient)(nil)
	_ subnetworksAPI    = (*compute.SubnetworksClient)(nil)
)
