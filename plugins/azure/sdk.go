package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// The Azure Resource Manager operations the plugin calls, and nothing
// else: the plugin holds each client as one of these interfaces, so a
// call outside them does not compile. deploy/azure/role.json grants
// exactly their permissions (Operations_Get is the long-running
// operations' polls), and iam_test.go keeps them in step. The arm*
// clients implement them.
type (
	virtualMachinesAPI interface {
		BeginCreateOrUpdate(ctx context.Context, resourceGroupName, vmName string, parameters armcompute.VirtualMachine,
			options *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (*runtime.Poller[armcompute.VirtualMachinesClientCreateOrUpdateResponse], error)
		BeginDelete(ctx context.Context, resourceGroupName, vmName string,
			options *armcompute.VirtualMachinesClientBeginDeleteOptions) (*runtime.Poller[armcompute.VirtualMachinesClientDeleteResponse], error)
		Get(ctx context.Context, resourceGroupName, vmName string,
			options *armcompute.VirtualMachinesClientGetOptions) (armcompute.VirtualMachinesClientGetResponse, error)
		// BeginUpdate is the PATCH that attaches and detaches data disks
		// (volumes.go).
		BeginUpdate(ctx context.Context, resourceGroupName, vmName string, parameters armcompute.VirtualMachineUpdate,
			options *armcompute.VirtualMachinesClientBeginUpdateOptions) (*runtime.Poller[armcompute.VirtualMachinesClientUpdateResponse], error)
		NewListPager(resourceGroupName string, options *armcompute.VirtualMachinesClientListOptions) *runtime.Pager[armcompute.VirtualMachinesClientListResponse]
	}
	disksAPI interface {
		Get(ctx context.Context, resourceGroupName, diskName string,
			options *armcompute.DisksClientGetOptions) (armcompute.DisksClientGetResponse, error)
	}
	resourceSKUsAPI interface {
		NewListPager(options *armcompute.ResourceSKUsClientListOptions) *runtime.Pager[armcompute.ResourceSKUsClientListResponse]
	}
	networkInterfacesAPI interface {
		Get(ctx context.Context, resourceGroupName, networkInterfaceName string,
			options *armnetwork.InterfacesClientGetOptions) (armnetwork.InterfacesClientGetResponse, error)
		NewListPager(resourceGroupName string, options *armnetwork.InterfacesClientListOptions) *runtime.Pager[armnetwork.InterfacesClientListResponse]
	}
	subnetsAPI interface {
		Get(ctx context.Context, resourceGroupName, virtualNetworkName, subnetName string,
			options *armnetwork.SubnetsClientGetOptions) (armnetwork.SubnetsClientGetResponse, error)
	}
	networkSecurityGroupsAPI interface {
		Get(ctx context.Context, resourceGroupName, networkSecurityGroupName string,
			options *armnetwork.SecurityGroupsClientGetOptions) (armnetwork.SecurityGroupsClientGetResponse, error)
	}
)

var (
	_ virtualMachinesAPI       = (*armcompute.VirtualMachinesClient)(nil)
	_ disksAPI                 = (*armcompute.DisksClient)(nil)
	_ resourceSKUsAPI          = (*armcompute.ResourceSKUsClient)(nil)
	_ networkInterfacesAPI     = (*armnetwork.InterfacesClient)(nil)
	_ subnetsAPI               = (*armnetwork.SubnetsClient)(nil)
	_ networkSecurityGroupsAPI = (*armnetwork.SecurityGroupsClient)(nil)
)
