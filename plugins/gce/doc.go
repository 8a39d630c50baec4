// Package gce is Kip's Google Compute Engine cloud plugin: a cell is one
// Compute Engine instance, launched with instances.insert, found again by
// its labels and ended with instances.delete. The kip host runs it as
// kip-plugin-gce.
//
// Read it in this order; each file holds one concern:
//
//	provider.go   New, GetInfo, Configure: the plugin's face, on the kit's
//	              skeleton (pluginapi/kit: seams, timings, configuration); the credentials
//	              and the REST clients on one rate-limited HTTP client
//	config.go     the configuration: one struct, its keys and JSON Schema in its
//	              tags (pluginapi.DecodeConfig, ConfigSchema), validation, defaults
//	resolve.go    what Configure asks Compute Engine: the region's zones, the
//	              subnetwork, the image
//	ratelimit.go  client-side token buckets (pluginapi/ratelimit) under the SDK,
//	              in front of every request, retries included
//	errors.go     HTTP errors and failed operations → pluginapi error kinds
//	labels.go     the labels and metadata of a cell's instance
//	catalog.go    ListInstanceTypes: the embedded catalog, with availability
//	              from machineTypes.aggregatedList
//	launch.go     Launch: instances.insert named after the cell, waited for
//	operations.go the waits for insert operations, shared by the launches of
//	              a zone under way together
//	describe.go   Describe and List from the view of the cluster's instances:
//	              one shared, coalesced aggregatedList (pluginapi/snapshot)
//	terminate.go  Terminate: instances.delete, idempotent
//	events.go     WatchEvents: state changes, Spot preemption, host maintenance
//	              (Describe and List say preempted too: a Spot instance
//	              stopping that the plugin did not delete)
//	registry.go   RegistryAuth: Artifact Registry and Container Registry tokens
//	console.go    ConsoleOutput: instances.getSerialPortOutput
//	identity.go   VerifyInstanceIdentity: a cell's identity token, checked
//	              against Google's keys (no Compute Engine call)
//	volumes.go    AttachVolume, DetachVolume, DescribeVolumeAttachments:
//	              instances.attachDisk and detachDisk of the PD CSI
//	              driver's zonal disks
//
// The contract is pluginapi.Provider. Its rules shape this package: every
// call is safe to retry, and no state lives only in memory (instances carry
// the plugin's labels, and List finds them by the cluster label after any
// restart). What the plugin keeps in memory is a cache: the view of the
// cluster's instances and the machine types sold per zone.
//
// # Instances, names and IDs
//
// A cell's instance is named after the cell ID (Kip's cell IDs, kip-<pod
// UID> and kip-<uid>-r<n>, are Compute Engine names; Launch refuses any
// other). Compute Engine names an instance within its zone, so the
// contract's instance ID is zone/name, such as us-central1-a/kip-<uid>.
//
// Launch waits for the insert's operation and reads its error, always:
// Operation.Wait of the SDK returns nil for an operation that failed
// without httpErrorStatusCode (ZONE_RESOURCE_POOL_EXHAUSTED is one), so
// the plugin waits for it itself (operations.go: zoneOperations.wait for
// one launch alone, one zoneOperations.list by name for the launches of a
// zone under way together) and inspects operation.error. It is idempotent three ways (launch.go): the insert's
// requestId is a name-based UUID of the cell ID and the offering (zone,
// type, capacity type), so a retried insert is the first one; the name is
// the cell's, so alreadyExists answers the existing instance when it is
// this cluster's (and refuses another's with a clear error); and a cell
// the view already knows, launched or terminated, is answered without an
// insert. A cell whose instance has been deleted answers terminated for
// as long as Compute Engine remembers the requestId (at least an hour,
// where EC2 keeps a ClientToken a day), or while the plugin's view still
// shows it; later, a Launch of that cell would start a new instance (the
// host never launches a cell that old).
//
// Spot is provisioningModel SPOT with instanceTerminationAction DELETE (a
// preempted cell is gone, not stopped); machine types with GPUs (A2, G2:
// bundled) get onHostMaintenance TERMINATE, and a catalog type whose GPUs
// are not bundled gets them as guestAccelerators. Custom machine types
// (custom-2-4096, n2-custom-2-4096) are named in machineType as they are.
// Cells get no external address: they reach the internet through Cloud
// NAT, and kip reaches them on their internal address.
//
// # Labels and metadata
//
// Every instance and its boot disk carry the configured labels and four of
// the plugin's: kip-cluster, kip-node, kip-cell and kip-pod-uid, whose
// values are the standard tags' (pluginapi.StandardTags) encoded as label
// values (labelValue): a value that already is a label value (lowercase
// a-z, 0-9, _ and -, at most 63 characters) is itself; any other is
// lowercased, every other character replaced by -, cut to 54 characters
// and suffixed with - and the first 8 hex digits of the original's
// SHA-256. Cell IDs and pod UIDs are label values already; a cluster ID or
// node name with capitals or dots is encoded. List filters
// aggregatedList by labels.kip-cluster.
//
// Labels cannot hold the tags exactly (keys like kipcell.io/cluster, any
// values), so the metadata item kip-tags holds them as a JSON object, and
// Describe and List answer it as the instance's Tags (an instance without
// it answers the standard tags back from the labels, encoded). The other
// metadata items are the cell's boot (the contract with deploy/gce and the
// simulator): kip-bootstrap is LaunchRequest.Bootstrap verbatim (JSON),
// and startup-script is the file startupScript names (deploy/gce/startup.sh
// reads kip-bootstrap from the metadata server and runs kip-cell
// --bootstrap); without startupScript the image runs kip-cell by itself.
// The configuration's metadata adds items of its own, such as the boot
// recipe's kip-cell-url and kip-cell-sha256.
//
// # Calls
//
// Compute Engine calls are few by design, since a project's request rate
// is shared: a cell costs an insert, at most one operation wait (launches
// under way together share zoneOperations.list calls), and a delete;
// Describe, List and WatchEvents of every cell are served from one
// snapshot of the cluster's instances (one paginated aggregatedList),
// refreshed at most once per snapshot age however many cells ask; the
// watch polls it every second only until it has seen a boot, then from
// shortly before the quickest recent boot may end (pluginapi/boottime),
// and every second while an instance it did not delete is stopping (a
// preemption), not while its own deletions end.
// Every
// request passes the plugin's token buckets (rateLimit: reads, including
// operation waits, and writes), so the plugin never exceeds its limit.
// deploy/gce/role.yaml is the custom IAM role with exactly the permissions
// of those calls; iam_test.go keeps the two equal.
//
// # Persistent disks
//
// The plugin reports capability volumes with the driver
// pd.csi.storage.gke.io (VolumeDriver): it attaches the zonal persistent
// disks of the Compute Engine PD CSI driver's PersistentVolumes, whose
// volume handle is projects/<project>/zones/<zone>/disks/<name>, to its
// instances as that driver's controller does: instances.attachDisk with
// the disk's name as the device name, autoDelete false (the disk outlives
// the cell), mode READ_ONLY for a read-only attachment (offered), then its
// operation. The agent finds the disk at the path it answers,
// /dev/disk/by-id/google-<name>, which Google's guest udev rules link on
// the instance (the path the PD CSI node plugin uses); no serial is
// answered, since neither a SCSI persistent disk nor an NVMe one shows the
// device name as its kernel serial. Compute Engine's refusals are the
// contract's: a disk READ_WRITE on another instance (or READ_ONLY there
// when asked READ_WRITE) is VolumeConflict in-use naming that instance; a
// disk of another zone than the instance's wrong-zone; a disk type the
// machine type cannot take (UNSUPPORTED_OPERATION "[pd-standard] features
// are not compatible": a pd-* disk on N4, pd-standard on C3) wrong-type
// naming the disk type; the machine type's
// maximumPersistentDisks (16 on shared-core types, 128 on others, the boot
// disk included) attachment-limit; a regional disk Unsupported. Attaches
// and detaches whose operation runs past a few seconds are answered
// attaching or detaching, and remembered so that
// DescribeVolumeAttachments (instances.get of each instance) shows them
// until the instance does; volumes.go says what a restart forgets and how
// the next call finds it.
//
// # Instance identity
//
// VerifyInstanceIdentity (capability instance-identity) checks the
// identity token a cell's agent read from its instance's metadata server
// (kip-cell --gce-metadata-endpoint; deploy/gce/startup.sh passes it) and
// sent with its join: a JWT Google signs (RS256) for the instance's
// service account, minted for the audience
// pluginapi/identity.Audience(cluster ID, cell ID), whose
// google.compute_engine claims name the instance. The plugin verifies the
// signature with the standard library against the JWKS at
// identity.certsURL (Google's https://www.googleapis.com/oauth2/v3/certs
// by default, kept as its Cache-Control says; a simulator's or a private
// mirror's otherwise), then the issuer, the project, the instance
// (zone/name is the request's instance ID), the audience, and exp and
// iat with two minutes of skew; identity.go says why not the SDK's
// idtoken. A token refused is a plain error naming why; keys it cannot
// fetch are Transient. A cell without a service account has no token:
// without serviceAccount the plugin answers NotChecked, with it a join
// without a token is refused. Fetching the keys is no Compute Engine call
// and needs no permission.
//
// Security groups and instance profiles have no per-pod meaning here
// (firewall rules follow networkTags; the cells' service account is
// serviceAccount): the plugin does not report those capabilities.
//
// # The SDK and the build list
//
// The plugin uses cloud.google.com/go/compute v1.74.0 (apiv1, the REST
// clients) with google.golang.org/api v0.288.0, the version compute
// requires (at most v0.309.0 may be used: v0.310.0 and later, like compute
// v1.74.1, need genproto versions the module proxy cannot serve; see
// ../shared/research/cloud-sdks.md §2.1). go mod tidy must keep them: pin
// them back by hand if it raises them. sdk_test.go drives the real
// InstancesRESTClient against a local endpoint.
//
// That SDK cannot share go.work's single build list with the root module:
// compute v1.74.0 requires, among others, google.golang.org/grpc v1.83.2,
// google.golang.org/genproto (and googleapis/api)
// v0.0.0-20260715232425-e75dac1f907d, go.opentelemetry.io/otel v1.45.0 and
// otelhttp v0.67.0, cloud.google.com/go v0.123.0 and go-logr v1.4.4, where
// the root module (kip, kip-cell) resolves grpc v1.79.3, genproto
// v0.0.0-20231211222908-989df2bf70f3, googleapis/api
// v0.0.0-20251202230838-ff82c1b0f217, otel v1.43.0, otelhttp v0.61.0,
// cloud.google.com/go v0.110.10 and go-logr v1.4.3. In one workspace the
// minimum version selection would move kip's gRPC, OpenTelemetry and
// genproto (and about 150 other lines of `go list -m all`) for a plugin
// kip never links. So this module is not in go.work: the Makefile lists it
// in STANDALONE and vets, lints, tidies, tests and builds it (make build,
// make dist) with GOWORK=off, as a third party's plugin module is built;
// it requires pluginapi v1.0.0, replaced by the checkout, like every
// plugin. The two sides meet only over go-plugin's gRPC wire protocol,
// which does not depend on both ends linking the same grpc-go. The same
// holds for the simulator's client tests (test/cloudsim/gce/sdktest, its
// own module), so the root module's build list stays as it was.
//
// The package imports pluginapi (and its catalog, kit, snapshot, ratelimit
// and identity packages), its own catalog and the Google Cloud SDK; never host, cell,
// Kubernetes or another plugin (hack/depcheck.sh).
package gce
