// Package azuresim is a wire-level Azure Resource Manager simulator: an
// HTTPS server that speaks ARM's Compute and Network REST API (JSON) well
// enough that the real Azure SDK for Go (armcompute/v8 v8.3.0,
// armnetwork/v9 v9.0.0, azcore v1.24.0), pointed at it through
// cloud.Configuration, creates, reads, lists and deletes VMs and follows
// their long-running operations with its own pollers, as it would in a
// subscription. The SDK's fake packages skip the LRO protocol (their
// pollers are fakes); this simulator speaks it.
//
// The directory is test/cloudsim/azure; the package is named azuresim so
// that it does not clash with the SDK's packages in the files that use
// both.
//
// # Using it
//
//	sim := azuresim.New(azuresim.Options{})
//	url, err := sim.Start() // https://127.0.0.1:<port>
//	defer sim.Close()
//	opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{
//		Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: url + "/", Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
//			cloud.ResourceManager: {Endpoint: url, Audience: "https://management.core.windows.net/"}}},
//		Transport: sim.Client(), // or a client trusting sim.CACert()
//	}, DisableRPRegistration: true}
//	vms, err := armcompute.NewVirtualMachinesClient(azuresim.DefaultSubscription, &azfake.TokenCredential{}, opts)
//
// It serves TLS only (httptest's certificate for 127.0.0.1; CACert is it
// in PEM for a CA bundle file, CertPool and Client trust it), as azcore's
// bearer-token policy refuses plain HTTP; a plain request is 400. Every
// request needs a bearer token (any: 401 AuthenticationFailed without
// one) and an api-version (any version: 400 MissingApiVersionParameter
// without one).
//
// # What it simulates
//
// Paths are ARM's, under /subscriptions/{sub} (segments
// case-insensitive); operation IDs are ARM's, which Calls counts
// (including calls answered with an error):
//
//	VirtualMachines_CreateOrUpdate PUT    resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{vm}
//	VirtualMachines_Get            GET    …/virtualMachines/{vm}?$expand=instanceView|userData
//	VirtualMachines_InstanceView   GET    …/virtualMachines/{vm}/instanceView
//	VirtualMachines_Update         PATCH  …/virtualMachines/{vm}  (tags, storageProfile.dataDisks)
//	VirtualMachines_Delete         DELETE …/virtualMachines/{vm}  (forceDeletion= accepted, ignored)
//	Disks_CreateOrUpdate           PUT    resourceGroups/{rg}/providers/Microsoft.Compute/disks/{disk}
//	Disks_Get                      GET    …/disks/{disk}
//	Disks_Delete                   DELETE …/disks/{disk}
//	VirtualMachines_List           GET    resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines?$expand=instanceView&$skiptoken=
//	VirtualMachines_ListAll        GET    providers/Microsoft.Compute/virtualMachines?statusOnly=true&$expand=instanceView&$skiptoken=
//	Operations_Get                 GET    providers/Microsoft.Compute/locations/{loc}/operations/{id}        (Azure-AsyncOperation)
//	OperationResults_Get           GET    providers/Microsoft.Compute/locations/{loc}/operationResults/{id}  (Location)
//	ResourceSkus_List              GET    providers/Microsoft.Compute/skus?$filter=location eq '{loc}'
//	NetworkInterfaces_List         GET    resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces
//	NetworkInterfaces_Get          GET    …/networkInterfaces/{nic}
//	Subnets_Get                    GET    resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}
//	NetworkSecurityGroups_Get      GET    resourceGroups/{rg}/providers/Microsoft.Network/networkSecurityGroups/{nsg}
//
// Another subscription is 404 SubscriptionNotFound, a resource group not
// in Options.ResourceGroups 404 ResourceGroupNotFound, a resource that
// does not exist 404 ResourceNotFound, a path not served 404
// NoRegisteredProviderFound. Errors are ARM's body,
// {"error":{"code","message","target","details":[…]}}, which azcore
// surfaces as an *azcore.ResponseError whose ErrorCode is the code.
//
// The long-running-operation protocol is ARM's. A PUT that creates a VM
// is 201 (200 when it creates again a VM whose create failed) with the VM
// Creating, an Azure-AsyncOperation header naming the operation
// (https://{host}/subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/operations/{id}?api-version=…,
// the request's api-version) and Retry-After (Options.RetryAfter in
// seconds, 0 by default: the client polls at its own frequency). The
// operation answers {"status":"InProgress"} (with Retry-After) until the
// VM runs, then Succeeded, after which the SDK GETs the VM; or Failed
// with ARM's error object ({"code":"AllocationFailed","message":…}),
// which PollUntilDone returns as an *azcore.ResponseError. A DELETE is
// 202 with Location (…/operationResults/{id}: 202 while the delete runs,
// then 204) and Azure-AsyncOperation (InProgress until the VM is gone);
// a DELETE of a VM that does not exist is 204. A second DELETE while
// deleting is another 202 that ends with the first. Resume tokens work as
// with ARM, since they hold only these URLs.
//
// A VM is Creating from its PUT: without a power state until its
// allocation is decided (Options.AllocationDelay later), then
// PowerState/starting for Options.BootDelay and until its cell started,
// then Succeeded and PowerState/running. An allocation failure
// (InjectAllocationFailure) is decided at the PUT and surfaces at the
// allocation: the VM is Failed, its instance view saying
// ProvisioningState/failed/<code> with the message, and stays until
// deleted; no cell starts. A VM whose cell cannot start is Failed with
// OSProvisioningTimedOut. A deleted VM is Deleting (PowerState/stopping,
// then stopped) for Options.ShutdownDelay and until its cell stopped,
// then gone (404, its name free) with its OS disk and its NIC. States are
// computed when read, from Options.Now, so tests move a clock instead of
// sleeping. A PUT while the VM is Creating is 409 Conflict, while it is
// Deleting 409 OperationNotAllowed ("marked for deletion"); a PUT of a VM
// that succeeded is 200 (provisioningState Updating, an operation that
// succeeds at once) and changes its tags; changing its zones, priority or
// size is 409 PropertyChangeNotAllowed. A DELETE while Creating cancels
// the create: its operation ends Canceled.
//
// A VM answers with what the client sent plus what ARM fills in: id,
// name, type, location, zones, tags, vmId, provisioningState,
// timeCreated, the OS disk's name and managed disk ID, and
// networkProfile.networkInterfaces with the NIC's ID; never
// osProfile.adminPassword or customData, and userData only with
// $expand=userData. The instance view (with $expand=instanceView,
// statusOnly=true, or the instanceView route) has computerName and the
// statuses ProvisioningState/<state> (with time and, when Failed, level
// Error and the message) and PowerState/<state> (plus PowerState/evicted
// once evicted).
//
// A PUT is checked as ARM and Compute check it, with their codes: the VM
// name (InvalidResourceName), location (LocationRequired,
// LocationNotAvailableForResourceType), tag names (InvalidTagNameCharacters
// for <>%&\?/; at most 50 tags), and as InvalidParameter: a size the
// location does not offer, zones (one, of Options.Zones), an
// imageReference, osDisk.createOption FromImage, osProfile (computerName
// a Linux host name, adminUsername, and an SSH key with
// disablePasswordAuthentication or else adminPassword), customData and
// userData in base64 (userData at most 64 KB), priority Regular, Low or
// Spot with evictionPolicy (Delete or Deallocate, default Deallocate) and
// billingProfile.maxPrice (-1 or more than zero) for Spot only, and
// networkProfile: networkApiVersion with networkInterfaceConfigurations,
// a NIC configuration with a name and an ipConfiguration with a name and
// a subnet. A subnet or network security group that does not exist is
// 400 InvalidResourceReference.
//
// The primary NIC configuration becomes the NIC
// Microsoft.Network/networkInterfaces/{name}, created with the VM: one
// ipConfiguration (its name, the subnet, privateIPAllocationMethod
// Dynamic, privateIPAddress the cell's address, absent until the cell
// started), properties.virtualMachine.id, networkSecurityGroup, a MAC
// address. With deleteOption Delete it is deleted with the VM; otherwise
// (Detach, ARM's default) it stays, detached, and a later VM's NIC of the
// same name replaces it.
//
// Lists are {"value":[…],"nextLink":…} in PUT order, Options.PageSize
// items a page (SetPageSize), nextLink being the request's URL with
// $skiptoken. The VM list's $filter takes only virtualMachineScaleSet/id
// (no VM here belongs to one): ARM has no tag filter, and another filter
// is 400. resourceSkus lists Options.Sizes as virtualMachines SKUs of the
// location (capabilities vCPUs, MemoryGB, GPUs, CpuArchitectureType x64,
// LowPriorityCapable, PremiumIO; family; locationInfo zones, less the
// zones a Size's Zones leave out) with restrictions: Zone
// (NotAvailableForSubscription, the zones) where SkuNotAvailable made the
// size unavailable in some zones, Location where in all; its $filter
// takes only location eq '…'.
//
// # Managed data disks
//
// disks.go has the details and the Azure documents they follow. A disk
// PUT (createOption Empty, diskSizeGB 1 to 32767, a SKU, at most one zone
// of Options.Zones) is 202 with Azure-AsyncOperation and Location, the
// disk Creating until Options.DiskDelay (SetDiskDelay) has passed and
// the DiskStarter made it, then Succeeded; GET shows diskState
// Unattached, Attached (managedBy the VM) or Reserved (its VM
// deallocated); DELETE is 202 (204 for none), 409 OperationNotAllowed
// "Disk … is attached to VM …" while it is attached, attaching or
// detaching. A VM's PATCH (VirtualMachines_Update: the dataDisks it sends
// are the whole list) or PUT of a VM that succeeded (the whole model: no
// dataDisks detaches every disk) attaches the disks it lists
// (createOption Attach, managedDisk.id, a LUN of 0 to 63) and detaches
// those it leaves out or marks toBeDetached; the VM is Updating, and the
// update's operation InProgress, until every disk attached and detached
// (Options.DiskDelay and the DiskStarter's call). GET shows dataDisks by
// LUN, a disk detaching with toBeDetached true (one left out is gone from
// the model at once), and the VM's etag, which changes with each update;
// If-Match is checked (412 PreconditionFailed). Refusals are Compute's: a
// disk attached to another VM 409 ConflictingUserInput, a disk in another
// zone than the VM 400 BadRequest, a LUN twice or taken 400
// InvalidParameter "A disk at LUN n already exists.", more disks than
// the size takes 409 OperationNotAllowed (resourceSkus' MaxDataDiskCount:
// Size.MaxDataDisks, else twice the vCPUs, at most 32, with the
// documented exceptions), a Premium SSD (Premium_LRS, Premium_ZRS) on a
// size without premium storage (PremiumIO False: no s in its name, as
// Standard_D2_v3) 400 InvalidParameter "…does not support the storage
// account type…", a disk that does not exist 404 NotFound,
// changing an attached disk's LUN 409 PropertyChangeNotAllowed, and any
// update while the VM is Updating 409 Conflict "The request failed due to
// conflict with a concurrent request.". Data disks at a VM's create are
// not modelled (400). A deleted VM detaches its disks: each is free once
// the VM is gone and the machine let it go.
//
// With a CellStarter that is a simcells.DiskStarter, the disks are real:
// a disk PUT calls CreateDisk (the disk's uniqueId as its ID) and a
// DELETE DeleteDisk, an attach AttachDisk for the VM's cell at
// /dev/disk/azure/scsi1/lun<N> (the path the udev rule of Azure's Linux
// images links, which azuredisk-csi reads), a detach DetachDisk, asked
// again while it fails (a disk still mounted: the operation stays
// InProgress), all in the background; an AttachDisk that fails fails the
// update's operation (InternalOperationError) and attaches nothing.
//
// # Real cells
//
// Every VM whose allocation succeeded gets a real cell through
// Options.Cells, a simcells.CellStarter (localcells.LocalCells runs the
// kip-plugin-local binary; the lifecycle is simcells.Lifecycle, shared
// with ec2sim and gcesim): the cell's ID is the VM's name, its type the
// VM size, its bootstrap the VM's userData base64-decoded (the boot
// recipe hands it to kip-cell --bootstrap), and its address the NIC's
// private IP. The agent starts Options.AgentDelay after the VM runs
// (SetAgentDelay) or never (SilenceAgents). Delete and eviction stop the
// cell; Close stops every cell still running. With no CellStarter, VMs
// get an address of 10.0.0.0/16 and no process.
//
// # Instance metadata
//
// Every VM whose allocation succeeded has its own Instance Metadata
// Service (imds.go), from its create until its cell has stopped (a
// deleted VM's, a deallocated VM's), on a unix socket that reaches into
// its cell's network namespace: where the CellStarter wants it
// (simcells.IMDSLocator; localcells.LocalCells puts it where its agent
// command's {imds} says, given the VM's name), else in a directory of the
// server's own; IMDSSocket(resourceGroup, name) says where, and Close
// stops them all. It answers as Azure's IMDS
// (169.254.169.254/metadata) does: Metadata: true required and
// X-Forwarded-For refused (400), GET only (405), an api-version of
// Azure's list required (400 with newest-versions); /metadata/instance
// (compute and network, the NIC's private addresses, primary first) with
// route parameters and format=text for leaves,
// /metadata/instance/compute/userData (from 2021-01-01),
// /metadata/versions, and /metadata/identity/oauth2/token, always 400
// "Identity not found" (no VM has a managed identity here); anything else
// is 404.
//
// # The subscription's resources
//
// Options.Sizes (DefaultSizes: the sizes of plugins/azure/catalog, which a
// test keeps equal, in every zone; a Size's Zones restrict it; its quota
// family from Family unless set), Options.Zones (1, 2, 3) of
// Options.Location (eastus), Options.ResourceGroups (kip-rg),
// Options.Subnets (DefaultSubnets: kip-vnet/default, 10.0.0.0/24) and
// Options.SecurityGroups (DefaultSecurityGroups: kip-nsg).
//
// # Knobs
//
// Every knob is safe for concurrent use. SetAllocationDelay, SetBootDelay,
// SetShutdownDelay, SetPageSize, SetAgentDelay, SilenceAgents; from
// simknobs (shared with ec2sim and gcesim): InjectFault and ClearFaults
// (any ARM code and status on any operation ID, optionally AfterEffect:
// the call takes effect and its answer is lost, so a retried PUT meets
// the VM being created), SetRateLimit (a token bucket over all calls,
// answered 429 with Retry-After and Compute's throttling body:
// OperationNotAllowed "…too many requests have been received for this
// subscription." with a TooManyRequests detail; azcore's retry policy
// honours Retry-After), SetLatency, and the counters Calls (by operation
// ID), MaxCallsPerSecond, Throttled and ResetCalls.
//
// InjectAllocationFailure(size, zone, code) (the most specific applies;
// ClearAllocationFailures): the PUT is accepted and the operation ends
// Failed with AllocationFailed, ZonalAllocationFailed or
// OverconstrainedAllocationRequest and Compute's message.
// SkuNotAvailable(size, zone) (ClearSkuNotAvailable): the PUT is refused,
// 409 SkuNotAvailable with Compute's message naming the size, location
// and zone, and resourceSkus shows the restriction. InjectQuota(name,
// vCPUs) (ClearQuotas) for a size family (standardDSv3Family: regular
// VMs of that family), QuotaLowPriorityCores (Spot VMs) or
// QuotaRegionalCores (regular VMs): a PUT that would take the vCPUs of
// the VMs that exist (not Failed, not deallocated) over the limit is
// refused, 409 OperationNotAllowed "Operation could not be completed as
// it results in exceeding approved standardDSv3Family Cores quota…"
// ("LowPriorityCores quota", "Total Regional Cores quota") with a
// QuotaExceeded detail. Evict(name) reclaims a running Spot VM: with
// evictionPolicy Delete it is Deleting, then gone with its NIC, with no
// DELETE; with Deallocate it stays, PowerState/deallocated, its cell
// stopped. VM and VMs show what was created, with the body the client
// sent, its address, bootstrap and whether its agent started.
//
// # Not yet
//
// NICs, public IPs and virtual networks cannot be created on their own (a
// VM's networkProfile.networkInterfaces references are 400); only the
// primary NIC configuration of a VM is created. Disks are created Empty
// only (no snapshot, image or copy source), not resized, listed, shared
// (maxShares), or zone-redundant (a ZRS disk would attach in any zone).
// Resizing a VM, start, stop, deallocate and restart calls, Spot
// priority SpotPlus, scale sets, availability sets (If-None-Match
// is modelled: a PUT with If-None-Match: * of a VM that exists, in any
// state, is 412 PreconditionFailed; and If-Match, above) and the activity log are not modelled; nor are
// the IMDS's scheduled events, attested data, load balancer category,
// managed identity tokens and rate limit: an evicted VM's cell simply
// stops. Operations never expire.
//
// This package is test support: it imports the standard library and what
// it shares with ec2sim and gcesim: test/cloudsim/simcells (the cell
// lifecycle), test/cloudsim/simknobs (faults, rate limit, latency,
// counters; it brings golang.org/x/time) and test/cloudsim/simhttp
// (gzip-compressed answers, and Sockets for the IMDS); it serves with net/http/httptest's TLS
// server, since simhttp's Endpoint is plain HTTP. Only the tests of
// test/cloudsim/azure/sdktest (a module of its own, in go.work) import
// the Azure SDK, so that the simulator checks the SDK's wire format
// instead of sharing its types, and the root module does not require
// the SDK.
package azuresim
