// Package ec2sim is a wire-level EC2 simulator: an HTTP server that speaks
// the EC2 Query protocol (form POST in, XML out) well enough that the real
// aws-sdk-go-v2 EC2 client, pointed at it with BaseEndpoint, launches,
// describes and terminates instances as it would in a region. It also
// answers ECR's GetAuthorizationToken (JSON 1.1) on the same endpoint.
//
// The directory is test/cloudsim/ec2; the package is named ec2sim so that it
// does not clash with the SDK's ec2 package in the files that use both.
//
// # Using it
//
//	sim := ec2sim.New(ec2sim.Options{Cells: cells})
//	url, err := sim.Start() // http://127.0.0.1:<port>
//	defer sim.Close()
//	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(url) })
//
// A Server is also an http.Handler, for httptest.NewServer.
//
// # What it simulates
//
// Operations: RunInstances, DescribeInstances, TerminateInstances,
// DescribeInstanceStatus, DescribeInstanceTypeOfferings, DescribeSubnets,
// DescribeImages, DescribeAvailabilityZones, GetConsoleOutput (a Debian
// cloud image's boot log, base64), the EBS volume calls (CreateVolume,
// DeleteVolume, DescribeVolumes, AttachVolume, DetachVolume; volumes.go),
// and ECR GetAuthorizationToken.
// Any other action is answered with InvalidAction. Form keys and XML element
// names follow the SDK's serializers and deserializers (ec2 v1.344.0), not
// the API reference; errors use EC2's
// <Response><Errors><Error><Code>…</Code> body with the status codes EC2
// uses (400 client errors, 500 InsufficientInstanceCapacity and
// InternalError, 503 RequestLimitExceeded), so the SDK's retryer behaves as
// it does against AWS.
//
// Instances move pending → running once their cell has started and the boot
// delay has passed; where the CellStarter holds agents back (AgentStarter,
// as LocalCells does), the cell agent starts Options.AgentDelay after
// that, as kip-cell starts minutes after EC2 says running, or never
// (SilenceAgents); and shutting-down → terminated once their cell has
// stopped and the shutdown delay has passed; terminated instances stay
// visible for Options.TerminatedVisible (an hour by default), as in EC2.
// States are computed when read, from the injected clock (Options.Now), so
// tests can move time instead of sleeping. RunInstances is idempotent on
// ClientToken (a repeat with other parameters but the zone is
// IdempotentParameterMismatch). The subnet and security groups come at the
// instance's level or on its one network interface (NetworkInterface.1,
// device index 0), never both (InvalidParameterCombination); the
// interface's SecondaryPrivateIpAddressCount is bounded by the type's
// addresses per interface (PrivateIpAddressLimitExceeded), and
// DescribeInstances shows the interface with its addresses
// (networkInterfaceSet, privateIpAddressesSet): the first secondary is the
// cell's pod address (simcells.Addresses.Pod) where it has one, the others
// come from the subnet.
// DescribeInstances supports InstanceId, the filters listed in
// instanceFilters (tags, state, id, client token, type, zone, subnet, VPC,
// lifecycle, …) with EC2's * and ? wildcards, and MaxResults/NextToken
// pagination. An unknown filter name is an error, as in EC2, so a plugin
// that relies on an unsupported filter finds out here.
//
// EBS volumes move creating → available → in-use → deleting, and their
// attachments attaching → attached → detaching → gone, each after
// Options.VolumeDelay (SetVolumeDelay) on the injected clock. CreateVolume
// is idempotent on ClientToken; AttachVolume refuses as EC2 does: a volume
// attached anywhere, even to the same instance (VolumeInUse), one not
// available or an instance not running (IncorrectState), another zone
// (InvalidVolume.ZoneMismatch), a device name in use or not an EBS one
// (InvalidParameterValue), and past the type's attachments
// (AttachmentLimitExceeded: InstanceType.Attachments, 28 by default,
// shared with the root volume and the network interface, the Nitro rule).
// DetachVolume of a volume not attached is IncorrectState, of another
// instance's attachment InvalidAttachment.NotFound; DeleteVolume of an
// attached volume VolumeInUse. An instance's end detaches its volumes
// (free once it is terminated), and DescribeInstances shows them in
// blockDeviceMapping after the root volume. DescribeVolumes takes VolumeId,
// the filters in volumeFields and tags, and MaxResults (5–500)/NextToken.
// RunInstances makes each instance's root volume (vol-<the instance's
// digits>, attached at /dev/xvda with DeleteOnTermination, deleted with
// the instance; it cannot be detached, and counts against the limit).
// Where the CellStarter is a simcells.DiskStarter, each
// volume is a real disk, attached to the instance's cell at NVMePath
// (udev's /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol…), and a
// volume waits in creating, attaching, detaching or deleting until the
// DiskStarter has done its part (DetachDisk is asked again while the cell
// holds the disk); Close deletes the disks left.
//
// Every instance gets a real cell through a CellStarter (the cell lifecycle
// is simcells.Lifecycle, shared with gcesim): localcells.LocalCells
// (test/cloudsim/simcells/localcells) starts a cell agent through the
// kip-plugin-local binary (driven by host/plugin), sized like the
// instance's type (CellTypes),
// so an instance's privateIpAddress is where its kip-cell listens, and an
// agent that dies is started again by the local plugin, as the instance's
// systemd does (deploy/aws/cloud-init.yaml: Restart=always). With no
// CellStarter, instances get an address from their subnet and no process.
// The cell receives the kip bootstrap document, taken from the
// application/vnd.kipcell.bootstrap+json part of the MIME multipart user
// data (or the whole user data when it is not MIME).
//
// Every instance has its own instance metadata service (imds.go): IMDSv2
// (tokens, and IMDSv1 refused with 401 when launched with HttpTokens
// required) over HTTP on a unix socket, which reaches into a cell's network
// namespace (IMDSSocket; LocalCells puts it where its agent command's
// {imds} says). It serves the instance's metadata, user data and identity
// document, signed as EC2 signs it by a key whose certificate
// IdentityCertificatePEM returns.
//
// # Knobs
//
// Every knob is safe for concurrent use (the faults, rate limit, latency
// and counters are simknobs.Knobs, shared with gcesim): SetBootDelay, SetShutdownDelay,
// SetAgentDelay, SetVolumeDelay, SilenceAgents (the next instances never start their agent),
// SetEventualConsistency (new instances invisible to Describe for a while),
// InjectThrottle, SetRateLimit (a token bucket over all EC2 calls,
// answering RequestLimitExceeded above it), InjectInsufficientCapacity per
// instance type and zone, Inject5xx, InjectFault (any code, any operation,
// optionally after the call took effect: a lost response; the quota and
// refusal codes of RunInstances are in LaunchErrorCodes), Interrupt (spot
// interruption), NoticeInterruption (the two-minute warning in the
// instance's metadata, then Interrupt at its time), RecommendRebalance,
// ScheduleMaintenance, ScheduleEvent and CompleteEvent
// (DescribeInstanceStatus events), SetLatency. Calls, MaxCallsPerSecond and
// Throttled count what the server received; Instance and Instances show
// what was launched, with the parameters the client sent.
//
// Every answer waits Options.Latency (1ms by default) and is gzipped when
// the client accepts it. Both keep a race in the SDK from showing on
// loopback: smithy-go's request body answers WriteTo with io.EOF once the
// SDK has closed it, which it does when the response arrives; when that
// beats net/http's write loop, the loop closes the connection while the
// SDK still reads the answer ("use of closed network connection").
//
// This package is test support: it may import the standard library,
// pluginapi/userdata, and what it shares with gcesim:
// test/cloudsim/simhttp (its HTTP server's start, stop and gzip),
// test/cloudsim/simcells (the cell lifecycle) and test/cloudsim/simknobs
// (faults, rate limit, latency, counters);
// only its tests import the AWS SDK (its IMDS client too), so that the simulator checks the
// SDK's wire format instead of sharing its types.
package ec2sim
