package sdktest

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const (
	sub      = azuresim.DefaultSubscription
	rg       = azuresim.DefaultResourceGroup
	location = azuresim.DefaultLocation
	size     = "Standard_D2s_v3"
)

// pollEvery is the poller's frequency: under go test azcore allows less
// than its one-second floor.
var pollEvery = &runtime.PollUntilDoneOptions{Frequency: 5 * time.Millisecond}

// newClock is a manual clock for Options.Now.
func newClock() *cellstest.Clock {
	return cellstest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
}

// clients are the SDK's clients, pointed at a simulator.
type clients struct {
	vms     *armcompute.VirtualMachinesClient
	disks   *armcompute.DisksClient
	skus    *armcompute.ResourceSKUsClient
	nics    *armnetwork.InterfacesClient
	subnets *armnetwork.SubnetsClient
	nsgs    *armnetwork.SecurityGroupsClient
}

// startSim starts a simulator with opts and returns it with the SDK's
// clients pointed at it as the plugin will point them (cloud.Configuration
// with the simulator as ResourceManager, its certificate trusted, a static
// token), with retries off unless retries says otherwise.
func startSim(t *testing.T, opts azuresim.Options, retry ...policy.RetryOptions) (*azuresim.Server, clients) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sim := azuresim.New(opts)
	url, err := sim.Start()
	if err != nil {
		t.Fatalf("starting the simulator: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	co := &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud: cloud.Configuration{
				ActiveDirectoryAuthorityHost: url + "/",
				Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
					cloud.ResourceManager: {Endpoint: url, Audience: "https://management.core.windows.net/"},
				},
			},
			Transport: sim.Client(),
			Retry:     policy.RetryOptions{MaxRetries: -1},
		},
		DisableRPRegistration: true,
	}
	if len(retry) > 0 {
		co.Retry = retry[0]
	}
	cred := &azfake.TokenCredential{}
	var c clients
	must := func(err error) {
		if err != nil {
			t.Fatalf("creating an SDK client: %v", err)
		}
	}
	c.vms, err = armcompute.NewVirtualMachinesClient(sub, cred, co)
	must(err)
	c.disks, err = armcompute.NewDisksClient(sub, cred, co)
	must(err)
	c.skus, err = armcompute.NewResourceSKUsClient(sub, cred, co)
	must(err)
	c.nics, err = armnetwork.NewInterfacesClient(sub, cred, co)
	must(err)
	c.subnets, err = armnetwork.NewSubnetsClient(sub, cred, co)
	must(err)
	c.nsgs, err = armnetwork.NewSecurityGroupsClient(sub, cred, co)
	must(err)
	return sim, c
}

// subnetID and nsgID are the simulator's default subnet and network
// security group.
var (
	subnetID = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/kip-vnet/subnets/default"
	nsgID    = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/networkSecurityGroups/kip-nsg"
)

// spec is the VM a test creates.
type spec struct {
	name, size, zone string
	spot             bool
	eviction         armcompute.VirtualMachineEvictionPolicyTypes
	bootstrap        string
	tags             map[string]string
}

// podIPConfig is the NIC's second IP configuration the plugin asks for,
// whose address is the pod's.
func podIPConfig() *armcompute.VirtualMachineNetworkInterfaceIPConfiguration {
	return &armcompute.VirtualMachineNetworkInterfaceIPConfiguration{
		Name: to.Ptr("ipconfig-pod"),
		Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{
			Primary: to.Ptr(false), Subnet: &armcompute.SubResource{ID: to.Ptr(subnetID)},
		},
	}
}

// vmBody is the VM the plugin creates (the contract): inline NIC
// <name>-nic on the subnet with the security group, deleted with the VM,
// the OS disk from an image deleted with it, the bootstrap as userData,
// Spot with maxPrice -1.
func vmBody(s spec) armcompute.VirtualMachine {
	vm := armcompute.VirtualMachine{
		Location: to.Ptr(location),
		Tags:     map[string]*string{},
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(s.size))},
			StorageProfile: &armcompute.StorageProfile{
				ImageReference: &armcompute.ImageReference{
					Publisher: to.Ptr("Canonical"), Offer: to.Ptr("ubuntu-24_04-lts"), SKU: to.Ptr("server"), Version: to.Ptr("latest"),
				},
				OSDisk: &armcompute.OSDisk{
					CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
					DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
				},
			},
			OSProfile: &armcompute.OSProfile{
				ComputerName: to.Ptr(s.name), AdminUsername: to.Ptr("kip"),
				LinuxConfiguration: &armcompute.LinuxConfiguration{
					DisablePasswordAuthentication: to.Ptr(true),
					SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
						Path: to.Ptr("/home/kip/.ssh/authorized_keys"), KeyData: to.Ptr("ssh-ed25519 AAAA kip"),
					}}},
				},
			},
			NetworkProfile: &armcompute.NetworkProfile{
				NetworkAPIVersion: to.Ptr(armcompute.NetworkAPIVersionTwoThousandTwenty1101),
				NetworkInterfaceConfigurations: []*armcompute.VirtualMachineNetworkInterfaceConfiguration{{
					Name: to.Ptr(s.name + "-nic"),
					Properties: &armcompute.VirtualMachineNetworkInterfaceConfigurationProperties{
						Primary: to.Ptr(true), DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete),
						NetworkSecurityGroup: &armcompute.SubResource{ID: to.Ptr(nsgID)},
						IPConfigurations: []*armcompute.VirtualMachineNetworkInterfaceIPConfiguration{{
							Name: to.Ptr("ipconfig1"),
							Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{
								Primary: to.Ptr(true), Subnet: &armcompute.SubResource{ID: to.Ptr(subnetID)},
							},
						}},
					},
				}},
			},
			UserData: to.Ptr(base64.StdEncoding.EncodeToString([]byte(s.bootstrap))),
		},
	}
	if s.size == "" {
		vm.Properties.HardwareProfile.VMSize = to.Ptr(armcompute.VirtualMachineSizeTypes(size))
	}
	if s.zone != "" {
		vm.Zones = []*string{to.Ptr(s.zone)}
	}
	for k, v := range s.tags {
		vm.Tags[k] = to.Ptr(v)
	}
	if s.spot {
		vm.Properties.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
		vm.Properties.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		if s.eviction != "" {
			vm.Properties.EvictionPolicy = to.Ptr(s.eviction)
		}
		vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(-1.0)}
	}
	return vm
}

// begin sends the PUT of s.
func begin(ctx context.Context, c clients, s spec) (*runtime.Poller[armcompute.VirtualMachinesClientCreateOrUpdateResponse], error) {
	return c.vms.BeginCreateOrUpdate(ctx, rg, s.name, vmBody(s), nil)
}

// create creates s and waits for its operation.
func create(ctx context.Context, c clients, s spec) (armcompute.VirtualMachine, error) {
	p, err := begin(ctx, c, s)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	r, err := p.PollUntilDone(ctx, pollEvery)
	return r.VirtualMachine, err
}

// mustCreate creates s, which must succeed.
func mustCreate(t *testing.T, c clients, s spec) armcompute.VirtualMachine {
	t.Helper()
	vm, err := create(t.Context(), c, s)
	if err != nil {
		t.Fatalf("creating %s: %v", s.name, err)
	}
	return vm
}

// remove deletes a VM and waits for its operation.
func remove(ctx context.Context, c clients, name string) error {
	p, err := c.vms.BeginDelete(ctx, rg, name, nil)
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, pollEvery)
	return err
}

// respErr is the status and ARM error code of an error from the SDK, as
// the plugin will read them; 0 and "" for another error.
func respErr(err error) (int, string) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return 0, ""
	}
	return re.StatusCode, re.ErrorCode
}

// get reads a VM with its instance view.
func get(ctx context.Context, c clients, name string) (armcompute.VirtualMachine, error) {
	r, err := c.vms.Get(ctx, rg, name, &armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
	return r.VirtualMachine, err
}

// states are the provisioning state and the instance view's status codes
// of a VM read with its instance view.
func states(vm armcompute.VirtualMachine) (string, []string) {
	var codes []string
	if vm.Properties == nil {
		return "", nil
	}
	if iv := vm.Properties.InstanceView; iv != nil {
		for _, s := range iv.Statuses {
			codes = append(codes, *s.Code)
		}
	}
	return str(vm.Properties.ProvisioningState), codes
}

// eventually polls cond for a few seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// str is *p, or "".
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// pollOnce polls once and reports whether the operation is done.
func pollOnce[T any](ctx context.Context, p *runtime.Poller[T]) (bool, error) {
	resp, err := p.Poll(ctx)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return p.Done(), err
}
