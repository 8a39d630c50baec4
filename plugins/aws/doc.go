// Package aws is Kip's Amazon EC2 cloud plugin: a cell is one EC2 instance,
// launched with RunInstances, found again by its tags, and ended with
// TerminateInstances. The kip host runs it as kip-plugin-aws.
//
// Read it in this order; each file holds one concern:
//
//	provider.go   New, GetInfo, Configure: the plugin's face, on the kit's
//	              skeleton (pluginapi/kit: seams, timings, configuration)
//	config.go     the configuration: one struct, its keys and JSON Schema in its
//	              tags (pluginapi.DecodeConfig, ConfigSchema), validation, defaults
//	resolve.go    what Configure asks EC2: the subnets per zone, the image
//	sdk.go        the SDK clients behind narrow interfaces (every operation
//	              the plugin may call is a method there, and nothing else)
//	ratelimit.go  client-side token buckets (pluginapi/ratelimit) in front
//	              of every EC2 call
//	errors.go     SDK errors → pluginapi error kinds, at the edge
//	catalog.go    ListInstanceTypes: the embedded catalog, with availability
//	              from DescribeInstanceTypeOfferings
//	launch.go     Launch: RunInstances, idempotent on the cell ID (ClientToken)
//	              and the user data (pluginapi/userdata: MIME multipart with
//	              the cloud-config and the bootstrap)
//	describe.go   Describe and List, answered from the view of the cluster's
//	              instances: one shared, coalesced snapshot (pluginapi/snapshot)
//	terminate.go  Terminate: TerminateInstances, idempotent
//	events.go     WatchEvents: state changes, spot interruptions, maintenance
//	registry.go   RegistryAuth: ECR pull credentials
//	console.go    ConsoleOutput: GetConsoleOutput, decoded
//	identity.go   VerifyInstanceIdentity: EC2's signed identity documents
//	volumes.go    AttachVolume, DetachVolume, DescribeVolumeAttachments:
//	              EBS volumes of driver ebs.csi.aws.com (handle: the volume ID)
//
// Volumes: AttachVolume attaches a PersistentVolume's EBS volume to a cell
// at a free device name of /dev/xvdaa…/dev/xvddx (the EBS CSI driver's
// names; an attachment at one of them is the plugin's), after describing
// the volume (EC2 refuses to attach a volume twice, even to the same
// instance, so the plugin answers an attachment already there). The agent
// finds the disk by its NVMe serial, the volume ID without its dash, or at
// /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol… (what udev makes on a
// Nitro instance); the device name given to EC2 is only a label there.
// VolumeInUse, InvalidVolume.ZoneMismatch and AttachmentLimitExceeded are
// the contract's VolumeConflict in-use, wrong-zone and attachment-limit;
// EBS has no read-only attachment (Unsupported, read_only). The IAM policy
// allows AttachVolume and DetachVolume on volumes tagged with the cluster.
//
// The contract is pluginapi.Provider. Its rules shape this package: every
// call is safe to retry (Launch passes the cell ID as RunInstances'
// ClientToken, so EC2 itself returns the first instance to a retry), and no
// state lives only in memory (instances carry the standard tags, and List
// finds them by the cluster tag after any restart). What the plugin keeps in
// memory is a cache: the view of the cluster's instances, the instance-type
// offerings and ECR tokens, all rebuilt from EC2 on demand.
//
// A pod's annotations are not trusted with the account: the instance
// profile and security groups a pod names pass to RunInstances only when
// the configuration allows them (allowedInstanceProfiles,
// allowedSecurityGroups, beside the defaults instanceProfile and
// securityGroups); otherwise Launch refuses with InvalidConfig naming the
// allow-list, the annotation and the value (launch.go, allowed).
//
// EC2 calls are few by design, since an account's request rate is shared:
// Describe and List of every cell are served from one snapshot of the
// cluster's instances (one paginated DescribeInstances filtered by the
// cluster tag), refreshed at most once per snapshot age however many cells
// ask; WatchEvents polls the same snapshot. See deploy/aws/README.md for the
// IAM policy, the boot recipe and the configuration.
//
// The package imports pluginapi, its own catalog and the AWS SDK for Go v2;
// never host, cell, Kubernetes or another plugin (hack/depcheck.sh).
package aws
