// Package azure is Kip's Azure cloud plugin, pre-alpha: a cell is one
// Azure VM, created with one VirtualMachines_CreateOrUpdate (its NIC and
// OS disk inline), found again by its tags and ended with one
// VirtualMachines_Delete. The kip host runs it as kip-plugin-azure.
//
// Read it in this order; each file holds one concern:
//
//	provider.go   New, GetInfo, Configure: the plugin's face, on the kit's
//	              skeleton (pluginapi/kit: seams, timings, configuration); the credentials
//	              and the ARM clients on one set of pipeline options
//	config.go     the configuration: one struct, its keys and JSON Schema in its
//	              tags (pluginapi.DecodeConfig, ConfigSchema), validation, defaults
//	resolve.go    what Configure asks Azure: the subnet and the NSG exist
//	ratelimit.go  client-side token buckets (pluginapi/ratelimit) as an azcore
//	              per-retry policy, in front of every request, retries and
//	              operation polls included
//	errors.go     ARM errors and failed operations → pluginapi error kinds
//	tags.go       the tags of a cell's VM; resource IDs
//	catalog.go    ListInstanceTypes: the embedded catalog (no prices), with
//	              availability from resourceSkus restrictions
//	launch.go     Launch: the PUT named after the cell, its operation followed
//	describe.go   Describe and List from the view of the cluster's VMs: one
//	              shared, coalesced VM list and NIC list (pluginapi/snapshot)
//	terminate.go  Terminate: the DELETE, idempotent
//	events.go     WatchEvents: state changes, Spot eviction
//	volumes.go    AttachVolume, DetachVolume, DescribeVolumeAttachments:
//	              managed disks as the VMs' data disks
//
// The contract is pluginapi.Provider. Its rules shape this package: every
// call is safe to retry, and no state lives only in memory (VMs carry the
// plugin's tags, and List finds them by the cluster tag after any
// restart). What the plugin keeps in memory is a cache: the view of the
// cluster's VMs, the SKUs sold per zone, the VMs it deleted and the resume
// tokens of the creates under way.
//
// # VMs, names and IDs
//
// Every cell's VM lives in one resource group, the configuration's
// resourceGroup (it must exist; one per cluster keeps List small). A VM is
// named after the cell ID (Kip's cell IDs, kip-<pod UID> and
// kip-<uid>-r<n>, are Linux VM names; Launch refuses any other), and its
// computer name is the cell ID too. The contract's instance ID is the VM
// name: the resource group is the plugin's configuration, so an ID means
// the same to every process of the plugin configured alike. The contract's
// zone of availability zone 1 of eastus is eastus-1, the form AKS writes in
// topology.kubernetes.io/zone; zones defaults to 1, 2 and 3.
//
// One PUT creates everything: the NIC is inline
// (networkProfile.networkInterfaceConfigurations, named <vm>-nic, one IP
// configuration ipconfig1 on subnetID, the optional NSG, deleteOption
// Delete, networkApiVersion 2020-11-01) and so is the OS disk (FromImage,
// deleteOption Delete, the pod's volume size if it asks one), so one
// DELETE removes it all. The cell's bootstrap is the VM's userData (base64
// of LaunchRequest.Bootstrap verbatim), which the boot recipe
// (deploy/azure/cloud-init.yaml, the configuration's customData) reads
// from IMDS. Cells get no public address. Linux VMs need an SSH key or a
// password: the administrator (adminUsername, default kipadmin) gets
// sshPublicKey, or the public half of an RSA key the plugin generates once
// per process and never writes down, so that nobody can log in. Spot is
// priority Spot, evictionPolicy Delete and billingProfile.maxPrice -1 (an
// evicted cell is gone; it is evicted for capacity, never price).
//
// # Launch
//
// Launch is the PUT, with If-None-Match: * so that it creates and never
// updates, and then the operation followed to its end
// (Azure-AsyncOperation; the SDK's poller, every second or as Retry-After
// says; the SDK then reads the VM). Following it is the host's need: it
// has no path for a launch that fails after Launch answered (a lost cell
// fails its pod), and a zone without capacity fails the operation
// (AllocationFailed, ZonalAllocationFailed,
// OverconstrainedAllocationRequest), not the PUT. A failed create's VM is
// deleted, and the delete waited for, before Launch answers
// InsufficientCapacity, so that the host's next offering reuses the name.
//
// Launch is idempotent four ways. The poller's resume token is kept in
// memory by cell while the create runs: a Launch the host retries after
// its context ended follows the same operation, with no second PUT. A cell
// this process terminated is answered terminated and nothing is started
// (for an hour; the host never launches a cell that old). A VM of the cell
// the view knows (a restarted plugin's first List finds it) is answered:
// followed by VirtualMachines_Get while it is Creating, deleted and
// answered InsufficientCapacity (or Transient) while Failed, and answered
// as it is otherwise. And a PUT that finds the name taken (412 of
// If-None-Match, or 409 while it is being created or deleted) reads the
// VM: this cluster's is the answer, another cluster's is refused with a
// clear error and left as it was.
//
// # Tags
//
// Azure tag names may not hold < > % & \ ? /, so the standard tags
// (pluginapi.StandardTags) are written under the plugin's names, and read
// back under the standard keys:
//
//	kipcell.io/cluster   kip-cluster
//	kipcell.io/node      kip-node
//	kipcell.io/cell      kip-cell
//	kipcell.io/pod-uid   kip-pod-uid
//
// Every other tag of the request is written with its name escaped (~ is
// ~0, / is ~1, < ~2, > ~3, % ~4, & ~5, \ ~6, ? ~7: kipcell.io/namespace is
// kipcell.io~1namespace) and read back unescaped; the configuration's tags
// (names without those characters) are written as they are. A value is
// cut to Azure's 256 characters; tags beyond Azure's 50 are left out, the
// request's first. ARM's VM list has no tag filter: List is the resource
// group's VM list, filtered by kip-cluster here, and a VM without kip-cell
// is no cell.
//
// # States
//
// provisioningState Creating is pending; Succeeded with PowerState/running
// is running (PowerState/starting, or no power state yet, pending);
// Deleting is terminating; Failed is terminated, the reason the instance
// view's ProvisioningState/failed/<code> status; PowerState/stopping or
// deallocating is terminating and stopped or deallocated terminated
// ("stopped outside Kip": the host ends such a cell). A Spot VM that ends
// without the plugin's delete is an eviction: WatchEvents sends
// EventInterruption, and Describe and List say so in the reason.
//
// # Volumes
//
// The plugin reports the capability volumes with the driver
// disk.csi.azure.com: a PersistentVolume of azuredisk-csi, whose volume
// handle is the managed disk's resource ID
// (/subscriptions/…/resourceGroups/…/providers/Microsoft.Compute/disks/<name>,
// compared without case as ARM compares IDs), in the plugin's
// subscription. AttachVolume reads the VM and the disk (Disks_Get: a disk
// another VM manages is in-use, naming it; one in another zone is
// wrong-zone), then PATCHes the VM's data disks (VirtualMachines_Update)
// with the disk added at the lowest free LUN (createOption Attach, caching
// None), If-Match on the VM's etag, and answers once ARM accepted it,
// attaching; ARM's data disk limit of the size is attachment-limit, and
// its refusal of a disk type the size cannot take (a Premium SSD on a size
// without premium storage: 400 InvalidParameter, target
// dataDisk.managedDisk.storageAccountType) wrong-type, naming the SKU.
// DetachVolume PATCHes the disk toBeDetached, as azuredisk-csi does.
// Calls on one VM are serialised in the process, and each waits out an
// update of the VM under way (ARM takes one at a time: 409 Conflict) and
// re-reads the VM after a 412, so that concurrent attaches, from this
// process or another, lose no disk. DescribeVolumeAttachments reads each
// VM (VirtualMachines_Get): a listed disk is attaching while the VM is
// Creating or Updating, detaching when toBeDetached or the VM is
// Deleting, attached otherwise. The VM's model is the only record.
//
// On the VM the data disk at LUN n is the SCSI disk the udev rule of
// Azure's Linux images (66-azure-storage.rules, from WALinuxAgent or
// azure-vm-utils) links as /dev/disk/azure/scsi1/lun<n>, which is what
// the attachment's Device.Path says and where the cell's agent waits for
// it, as azuredisk-csi's node plugin looks there; Azure gives the agent no
// serial to match. A read-only attachment is Unsupported (field
// read_only): Azure attaches a managed disk read-write (only a shared disk,
// maxShares > 1, can be attached read-only), and the host mounts it
// read-only instead.
//
// # Calls
//
// ARM calls are few by design, since a subscription's request rate is
// shared: a cell costs a PUT, its operation polls (one a second or as
// Retry-After says), the SDK's final GET and one NetworkInterfaces_Get
// (Launch answers the VM running at its address, so that the host reaches
// the agent at once rather than after the next NIC listing), and a
// DELETE; a volume's attach costs a VirtualMachines_Get, a Disks_Get and
// a VirtualMachines_Update (more when it waits for another update), its
// detach a VirtualMachines_Get and a VirtualMachines_Update, and
// DescribeVolumeAttachments a VirtualMachines_Get per instance; Describe, List
// and WatchEvents of every cell are served from one snapshot of the
// cluster (the resource group's VM list with $expand=instanceView, and
// its NIC list for the private addresses, each paginated), refreshed at
// most once per snapshot age however many cells ask; the watch polls it
// every second only until it has seen a boot, then from shortly before
// the quickest recent boot may end (pluginapi/boottime). resourceSkus
// (one location's list, for availability) is read once an hour. Every
// request passes the plugin's token buckets (rateLimit: reads, operation
// polls included, and writes), and the SDK retries 408, 429 (after its
// Retry-After) and 5xx up to three times. The SDK's automatic resource
// provider registration is off: the subscription must have
// Microsoft.Compute and Microsoft.Network registered.
// deploy/azure/role.json is the custom role with exactly the actions of
// those calls; iam_test.go keeps the two equal.
//
// The SDK's documentation says the VM list's $expand=instanceView needs
// a $filter; the simulator serves it without one, as the lead's contract
// says. Should real ARM refuse it, the list moves to ListAll with
// statusOnly (every VM of the subscription) filtered by resource group.
//
// # Not yet (pre-alpha)
//
// Prices: the catalog has none (plugins/azure/catalog), so every offering
// is PriceKnown false and the host picks the smallest size that fits;
// GetInfo's catalog source says so, and kip plugins describe shows it.
// RegistryAuth (ACR tokens through the managed identity), ConsoleOutput
// (boot diagnostics: RetrieveBootDiagnosticsData and a read of the serial
// log's blob) and VerifyInstanceIdentity (IMDS's attested document) are
// not implemented, so the plugin does not report those capabilities.
// WatchEvents sends no maintenance events: ARM does not show Scheduled
// Events (only the VM's IMDS does). Security groups and instance profiles
// have no per-pod meaning (the NSG and the managed identity are the
// configuration's). A private cloud's endpoint takes the public cloud's
// token audience and Microsoft Entra authority. The catalog has no Arm
// size, and the image's architecture is not looked up.
//
// # The SDK
//
// The plugin uses azcore v1.24.0, azidentity v1.15.0, armcompute/v8
// v8.3.0 (which sends api-version 2026-04-01) and armnetwork/v9 v9.0.0;
// go mod tidy may want newer ones: pin them back by hand (the module
// proxy is a filtered mirror). This module is in go.work: its build list
// does not move the root module's. fake_test.go is a wire-level ARM over
// TLS (real LRO headers) for the unit tests and the conformance suite; the
// simulator for end-to-end tests is test/cloudsim/azure.
//
// The package imports pluginapi (and its catalog, kit, snapshot and
// ratelimit packages), its own catalog and the Azure SDK; never host,
// cell, Kubernetes or another plugin (hack/depcheck.sh).
package azure
