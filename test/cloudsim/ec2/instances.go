package ec2sim

import (
	"cmp"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi/userdata"
	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Instance states and their EC2 codes.
const (
	statePending      = "pending"
	stateRunning      = "running"
	stateShuttingDown = "shutting-down"
	stateTerminated   = "terminated"
)

var stateCodes = map[string]int{statePending: 0, stateRunning: 16, stateShuttingDown: 32, stateTerminated: 48}

// State reasons, as EC2 words them.
const (
	ReasonUserShutdown    = "Client.UserInitiatedShutdown"
	ReasonSpotTermination = "Server.SpotInstanceTermination"
	ReasonInternalError   = "Server.InternalError"
)

var reasonMessages = map[string]string{
	ReasonUserShutdown:    "Client.UserInitiatedShutdown: User initiated shutdown",
	ReasonSpotTermination: "Server.SpotInstanceTermination: Spot instance termination",
	ReasonInternalError:   "Server.InternalError: Internal error on launch",
}

// BlockDevice is one BlockDeviceMapping of a RunInstances request.
type BlockDevice struct {
	DeviceName          string
	VolumeSizeGiB       int
	VolumeType          string
	DeleteOnTermination *bool
	Encrypted           *bool
	KMSKeyID            string
}

// ScheduledEvent is a scheduled event of an instance, as
// DescribeInstanceStatus reports it.
type ScheduledEvent struct {
	// ID is set by the server (instance-event-…).
	ID string
	// Code is instance-reboot, system-reboot, system-maintenance,
	// instance-retirement or instance-stop.
	Code        string
	Description string
	NotBefore   time.Time
	NotAfter    time.Time
}

// Instance is what the simulator knows about one instance: its state now
// and the parameters its RunInstances request carried.
type Instance struct {
	ID            string
	ReservationID string
	ClientToken   string
	ImageID       string
	InstanceType  string
	Zone          string
	SubnetID      string
	VPCID         string
	// State is pending, running, shutting-down or terminated.
	State string
	// StateReason is the stateReason code (Client.UserInitiatedShutdown,
	// Server.SpotInstanceTermination, Server.InternalError), if any.
	StateReason string
	// PrivateIP is the cell's address (or the subnet address when there
	// are no cells); empty until the cell has started.
	PrivateIP string
	// SecondaryIPs are the secondary private addresses of its network
	// interface (NetworkInterface.1.SecondaryPrivateIpAddressCount): the
	// first is the cell's pod address (simcells.Addresses.Pod) when it has
	// one, the others come from the subnet. Empty until the cell started.
	SecondaryIPs       []string
	LaunchTime         time.Time
	SecurityGroupIDs   []string
	IamInstanceProfile string // the ARN or name as requested
	Tags               map[string]string
	VolumeTags         map[string]string
	// UserData is the decoded user data; Bootstrap the kip bootstrap
	// document the cell was started with.
	UserData  []byte
	Bootstrap []byte
	Spot      bool
	// SpotInstanceType and SpotInterruptionBehavior are the requested
	// spot options.
	SpotInstanceType         string
	SpotInterruptionBehavior string
	SpotMaxPrice             string
	MetadataHTTPTokens       string
	MetadataHopLimit         int
	// MetadataTags is MetadataOptions.InstanceMetadataTags, enabled or
	// disabled (EC2's default).
	MetadataTags string
	// ShutdownBehavior is InstanceInitiatedShutdownBehavior, stop (EC2's
	// default) or terminate.
	ShutdownBehavior string
	CPUCredits       string
	BlockDevices     []BlockDevice
	Events           []ScheduledEvent
}

// instance is the server's record of one instance. Its fields are guarded
// by Server.mu.
type instance struct {
	seq           int64
	id            string
	reservationID string
	clientToken   string
	imageID       string
	itype         InstanceType
	image         Image
	subnet        *subnet
	groups        []string
	// secondaries is how many secondary private addresses the launch
	// asked for; subnetSecondaries are those taken from the subnet (all
	// but the cell's pod address, see secondaryIPs).
	secondaries       int
	subnetSecondaries []netip.Addr
	profile           string
	tags              map[string]string
	volumeTags        map[string]string
	userData          []byte
	bootstrap         []byte
	spot              bool
	spotType          string
	spotBehavior      string
	spotMaxPrice      string
	spotRequestID     string
	httpTokens        string
	hopLimit          int
	metadataTags      string
	shutdown          string
	cpuCredits        string
	blockDevices      []BlockDevice
	events            []ScheduledEvent

	launchTime time.Time
	readyAt    time.Time // launchTime + boot delay
	visibleAt  time.Time // launchTime + eventual-consistency delay

	state            string
	reason           string // stateReason code
	transitionReason string
	doneAt           time.Time // shutting-down ends no earlier than this
	terminatedAt     time.Time

	// cell is the instance's cell (its address, whether it and its agent
	// started and stopped), kept by s.cells; subnetAddr is the address
	// taken from the subnet when there is no CellStarter.
	cell       simcells.Cell
	subnetAddr netip.Addr

	// Instance metadata (imds.go): the IMDSv2 tokens handed out and when
	// they expire, the interruption notice and the rebalance
	// recommendation, once given.
	imdsTokens  map[string]time.Time
	spotAction  *spotAction
	rebalanceAt time.Time
}

// reservation is one RunInstances call, remembered for its client token.
type reservation struct {
	id        string
	canonical string
	instances []*instance
}

func (in *instance) snapshot() Instance {
	out := Instance{
		ID: in.id, ReservationID: in.reservationID, ClientToken: in.clientToken, ImageID: in.imageID,
		InstanceType: in.itype.Name, Zone: in.subnet.Zone, SubnetID: in.subnet.ID, VPCID: in.subnet.VPCID,
		State: in.state, StateReason: in.reason, PrivateIP: in.cell.Address, SecondaryIPs: in.secondaryIPs(), LaunchTime: in.launchTime,
		SecurityGroupIDs: slices.Clone(in.groups), IamInstanceProfile: in.profile,
		Tags: maps.Clone(in.tags), VolumeTags: maps.Clone(in.volumeTags),
		UserData: slices.Clone(in.userData), Bootstrap: slices.Clone(in.bootstrap),
		Spot: in.spot, SpotInstanceType: in.spotType, SpotInterruptionBehavior: in.spotBehavior, SpotMaxPrice: in.spotMaxPrice,
		MetadataHTTPTokens: in.httpTokens, MetadataHopLimit: in.hopLimit, MetadataTags: in.metadataTags, ShutdownBehavior: in.shutdown,
		CPUCredits:   in.cpuCredits,
		BlockDevices: slices.Clone(in.blockDevices), Events: slices.Clone(in.events),
	}
	return out
}

// cellAttr is the kip cell ID of the instance for logs, from its tags.
func (in *instance) cellAttr() string { return in.tags["kipcell.io/cell"] }

// advance moves the instance along its lifecycle up to now. The caller
// holds s.mu.
func (s *Server) advance(in *instance, now time.Time) {
	s.assignSecondaries(in)
	switch in.state {
	case statePending:
		if in.cell.Started && !now.Before(in.readyAt) {
			in.state = stateRunning
			s.log.Info("instance running", "instance", in.id, "cell", in.cellAttr(), "address", in.cell.Address)
			s.cells.AgentDueLocked(cellInstance{s, in}, now)
		}
	case stateRunning:
		s.cells.AgentDueLocked(cellInstance{s, in}, now)
	case stateShuttingDown:
		if in.cell.Stopped && !now.Before(in.doneAt) {
			in.state = stateTerminated
			in.terminatedAt = in.doneAt
			if in.cell.StoppedAt.After(in.doneAt) {
				in.terminatedAt = in.cell.StoppedAt
			}
			s.log.Info("instance terminated", "instance", in.id, "cell", in.cellAttr(), "reason", in.reason)
		}
	}
}

// assignSecondaries gives a started cell's instance the secondary private
// addresses its launch asked for: the cell's pod address first, where the
// CellStarter gave one (the address the cell routes to its pod), then
// addresses of the subnet. The caller holds s.mu.
func (s *Server) assignSecondaries(in *instance) {
	if !in.cell.Started || in.cell.Address == "" || in.state == stateTerminated {
		return
	}
	for len(in.secondaryIPs()) < in.secondaries {
		a, ok := in.subnet.allocate()
		if !ok {
			s.log.Warn("subnet has no address left for a secondary private address", "instance", in.id, "subnet", in.subnet.ID)
			return
		}
		in.subnetSecondaries = append(in.subnetSecondaries, a)
	}
}

// secondaryIPs are the instance's secondary private addresses, once its
// cell started: the cell's pod address first, where it has one (when the
// launch asked for any), then those taken from the subnet.
func (in *instance) secondaryIPs() []string {
	var out []string
	if in.secondaries > 0 && in.cell.PodAddress != "" {
		out = append(out, in.cell.PodAddress)
	}
	for _, a := range in.subnetSecondaries {
		out = append(out, a.String())
	}
	return out
}

// visible reports whether Describe calls see the instance now: after the
// eventual-consistency delay and until TerminatedVisible after it ended.
func (s *Server) visible(in *instance, now time.Time) bool {
	if now.Before(in.visibleAt) {
		return false
	}
	return in.state != stateTerminated || now.Before(in.terminatedAt.Add(s.opts.TerminatedVisible))
}

var (
	instanceIDPattern = regexp.MustCompile(`^i-[0-9a-f]{8}([0-9a-f]{9})?$`)
	groupIDPattern    = regexp.MustCompile(`^sg-[0-9a-f]{8}([0-9a-f]{9})?$`)
)

// lookup returns the visible instances named by ids, or the error EC2
// gives when one is malformed or does not exist. The caller holds s.mu.
func (s *Server) lookup(ids []string, now time.Time) ([]*instance, error) {
	var out []*instance
	var missing []string
	for _, id := range ids {
		if !instanceIDPattern.MatchString(id) {
			return nil, clientError(codeInstanceMalformed, "Invalid id: \"%s\"", id)
		}
		in := s.instances[id]
		if in == nil || !s.visible(in, now) {
			missing = append(missing, id)
			continue
		}
		s.advance(in, now)
		out = append(out, in)
	}
	switch len(missing) {
	case 0:
		return out, nil
	case 1:
		return nil, clientError(codeInstanceNotFound, "The instance ID '%s' does not exist", missing[0])
	default:
		return nil, clientError(codeInstanceNotFound, "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
}

// ---- RunInstances ----

type runRequest struct {
	count        int
	image        Image
	itype        InstanceType
	subnet       *subnet
	groups       []string
	secondaries  int
	profile      string
	tags         map[string]string
	volumeTags   map[string]string
	userData     []byte
	bootstrap    []byte
	spot         bool
	spotType     string
	spotBehavior string
	spotMaxPrice string
	httpTokens   string
	hopLimit     int
	metadataTags string
	shutdown     string
	cpuCredits   string
	blockDevices []BlockDevice
}

// parseRun validates a RunInstances request the way EC2 does, in roughly
// EC2's order (one parser per group of parameters), and returns what it
// asks for.
func (s *Server) parseRun(f form) (*runRequest, error) {
	req := &runRequest{}
	if err := parseCounts(f, req); err != nil {
		return nil, err
	}
	for _, parse := range []func(form, *runRequest) error{
		s.parseImageAndType, s.parsePlacement, parseProfile, s.parseUserData,
	} {
		if err := parse(f, req); err != nil {
			return nil, err
		}
	}
	var err error
	if req.tags, req.volumeTags, err = parseTagSpecs(f); err != nil {
		return nil, err
	}
	for _, parse := range []func(form, *runRequest) error{parseSpot, parseMetadataOptions, parseCredits, parseBlockDevices} {
		if err := parse(f, req); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// parseCounts reads MinCount and MaxCount: req.count is MaxCount.
func parseCounts(f form, req *runRequest) error {
	minCount, minSet, err := f.integer("MinCount")
	if err != nil {
		return err
	}
	maxCount, maxSet, err := f.integer("MaxCount")
	if err != nil {
		return err
	}
	switch {
	case !minSet:
		return clientError(codeMissingParameter, "The request must contain the parameter MinCount")
	case !maxSet:
		return clientError(codeMissingParameter, "The request must contain the parameter MaxCount")
	case minCount < 1 || maxCount < minCount:
		return clientError(codeInvalidParameter, "Value (%d) for parameter minCount is invalid. Expecting a value between 1 and maxCount (%d).", minCount, maxCount)
	case maxCount > maxInstancesPerRun:
		return clientError(codeInvalidParameter, "Value (%d) for parameter maxCount is invalid: at most %d instances per request in this simulator.", maxCount, maxInstancesPerRun)
	}
	req.count = maxCount
	return nil
}

// parseImageAndType reads ImageId and InstanceType, which must exist and
// agree on the architecture.
func (s *Server) parseImageAndType(f form, req *runRequest) error {
	imageID := f.get("ImageId")
	switch {
	case imageID == "":
		return clientError(codeMissingParameter, "The request must contain the parameter ImageId")
	case !strings.HasPrefix(imageID, "ami-"):
		return clientError(codeAMIMalformed, "Invalid id: \"%s\" (expecting \"ami-...\")", imageID)
	}
	im, ok := s.region.image(imageID)
	if !ok || im.State != "available" {
		return clientError(codeAMINotFound, "The image id '[%s]' does not exist", imageID)
	}
	req.image = im

	typeName := f.get("InstanceType")
	if typeName == "" {
		return clientError(codeMissingParameter, "The request must contain the parameter InstanceType")
	}
	t, ok := s.region.types[typeName]
	if !ok {
		return clientError(codeInvalidParameter, "Invalid value '%s' for InstanceType.", typeName)
	}
	if t.Arch != im.Arch {
		return clientError(codeInvalidParameter, "The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.", t.Arch, im.Arch)
	}
	req.itype = t
	return nil
}

// parsePlacement reads the zone, the subnet (the named one, the primary
// network interface's, or the zone's default), the security groups and
// the secondary addresses, in the instance type's zones only.
func (s *Server) parsePlacement(f form, req *runRequest) error {
	t := req.itype
	zone := f.get("Placement.AvailabilityZone")
	if zone != "" && !slices.Contains(s.region.zones, zone) {
		return clientError(codeInvalidParameter, "Invalid availability zone: [%s]", zone)
	}
	subnetID := f.get("SubnetId")
	req.groups = f.list("SecurityGroupId")
	if f.count("NetworkInterface") > 0 {
		ni, err := parseNetworkInterface(f, subnetID, req.groups, t)
		if err != nil {
			return err
		}
		subnetID, req.groups, req.secondaries = ni.subnetID, ni.groups, ni.secondaries
	}
	if id := subnetID; id != "" {
		if req.subnet = s.region.subnet(id); req.subnet == nil {
			return clientError(codeSubnetNotFound, "The subnet ID '%s' does not exist", id)
		}
		if zone != "" && zone != req.subnet.Zone {
			return clientError(codeInvalidCombination, "The specified subnet %s is in %s, not in the requested Availability Zone %s.", id, req.subnet.Zone, zone)
		}
	} else {
		for _, sn := range s.region.subnets {
			if sn.DefaultForAZ && (zone == "" || sn.Zone == zone) && (zone != "" || t.offered(sn.Zone)) {
				req.subnet = sn
				break
			}
		}
		if req.subnet == nil {
			return clientError("VPCIdNotSpecified", "No default VPC for this user. GroupName is only supported for EC2-Classic and default VPC.")
		}
	}
	if !t.offered(req.subnet.Zone) {
		return clientError(codeUnsupported, "Your requested instance type (%s) is not supported in your requested Availability Zone (%s). Please retry your request by not specifying an Availability Zone or choosing %s.",
			t.Name, req.subnet.Zone, strings.Join(s.region.zonesOffering(t), ", "))
	}

	for _, g := range req.groups {
		if !groupIDPattern.MatchString(g) {
			return clientError(codeGroupMalformed, "Invalid id: \"%s\"", g)
		}
	}
	if names := f.list("SecurityGroup"); len(names) > 0 {
		return clientError(codeInvalidCombination, "The parameter groupName cannot be used with the parameter subnet")
	}
	return nil
}

// parseProfile reads IamInstanceProfile (its ARN or its name).
func parseProfile(f form, req *runRequest) error {
	arn, name := f.get("IamInstanceProfile.Arn"), f.get("IamInstanceProfile.Name")
	switch {
	case arn != "" && name != "":
		return clientError(codeInvalidCombination, "The parameter 'iamInstanceProfile.name' may not be used in combination with 'iamInstanceProfile.arn'")
	case arn != "" && !strings.HasPrefix(arn, "arn:aws:iam::"):
		return clientError(codeInvalidParameter, "Value (%s) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN", arn)
	}
	req.profile = arn + name
	return nil
}

// parseUserData reads UserData and the kip bootstrap in it.
func (s *Server) parseUserData(f form, req *runRequest) error {
	if ud := f.get("UserData"); ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return clientError(codeInvalidParameter, "Invalid BASE64 encoding of user data.")
		}
		if len(raw) > maxUserDataBytes {
			return clientError(codeInvalidParameter, "User data is limited to %d bytes", maxUserDataBytes)
		}
		req.userData = raw
		if req.bootstrap, err = userdata.Bootstrap(raw); err != nil {
			// EC2 does not look into user data; the instance boots and its
			// cell gets no bootstrap.
			s.log.Warn("user data has no usable kip bootstrap", "error", err)
		}
	}
	return nil
}

// parseSpot reads InstanceMarketOptions.
func parseSpot(f form, req *runRequest) error {
	switch mt := f.get("InstanceMarketOptions.MarketType"); mt {
	case "":
	case "spot":
		req.spot = true
		req.spotType = f.get("InstanceMarketOptions.SpotOptions.SpotInstanceType")
		req.spotBehavior = f.get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior")
		req.spotMaxPrice = f.get("InstanceMarketOptions.SpotOptions.MaxPrice")
		if req.spotType == "" {
			req.spotType = "one-time"
		}
		if req.spotBehavior == "" {
			req.spotBehavior = "terminate"
		}
		if req.spotType == "one-time" && req.spotBehavior != "terminate" {
			return clientError(codeInvalidCombination, "The parameter instanceInterruptionBehavior '%s' is not supported for one-time spot requests", req.spotBehavior)
		}
	default:
		return clientError(codeInvalidParameter, "Value (%s) for parameter marketType is invalid.", mt)
	}
	return nil
}

// parseMetadataOptions reads MetadataOptions and
// InstanceInitiatedShutdownBehavior.
func parseMetadataOptions(f form, req *runRequest) error {
	req.httpTokens = f.get("MetadataOptions.HttpTokens")
	if req.httpTokens == "" {
		req.httpTokens = "optional"
	}
	if req.httpTokens != "optional" && req.httpTokens != "required" {
		return clientError(codeInvalidParameter, "Value (%s) for parameter httpTokens is invalid.", req.httpTokens)
	}
	hop, hopSet, err := f.integer("MetadataOptions.HttpPutResponseHopLimit")
	if err != nil {
		return err
	}
	if !hopSet {
		hop = 1
	}
	if hop < 1 || hop > 64 {
		return clientError(codeInvalidParameter, "Value (%d) for parameter httpPutResponseHopLimit is invalid. Expecting a value between 1 and 64.", hop)
	}
	req.hopLimit = hop
	switch req.metadataTags = cmp.Or(f.get("MetadataOptions.InstanceMetadataTags"), "disabled"); req.metadataTags {
	case "enabled", "disabled":
	default:
		return clientError(codeInvalidParameter, "Value (%s) for parameter instanceMetadataTags is invalid.", req.metadataTags)
	}
	switch req.shutdown = cmp.Or(f.get("InstanceInitiatedShutdownBehavior"), "stop"); req.shutdown {
	case "stop", "terminate":
	default:
		return clientError(codeInvalidParameter, "Value (%s) for parameter instanceInitiatedShutdownBehavior is invalid. Valid values are 'stop' and 'terminate'.", req.shutdown)
	}
	return nil
}

// parseCredits reads CreditSpecification (T instances only).
func parseCredits(f form, req *runRequest) error {
	t := req.itype
	if c := f.get("CreditSpecification.CpuCredits"); c != "" {
		if c != "standard" && c != "unlimited" {
			return clientError(codeInvalidParameter, "Value (%s) for parameter cpuCredits is invalid.", c)
		}
		if !strings.HasPrefix(t.Name, "t") {
			return clientError(codeInvalidParameter, "The parameter CreditSpecification is not supported for %s instances.", t.Name)
		}
		req.cpuCredits = c
	}
	return nil
}

// parseBlockDevices reads BlockDeviceMapping.
func parseBlockDevices(f form, req *runRequest) error {
	for i := 1; i <= f.count("BlockDeviceMapping"); i++ {
		p := "BlockDeviceMapping." + strconv.Itoa(i)
		bd := BlockDevice{DeviceName: f.get(p + ".DeviceName"), VolumeType: f.get(p + ".Ebs.VolumeType")}
		if bd.DeviceName == "" {
			return clientError(codeMissingParameter, "The request must contain the parameter blockDeviceMapping.%d.deviceName", i)
		}
		var err error
		if bd.VolumeSizeGiB, _, err = f.integer(p + ".Ebs.VolumeSize"); err != nil {
			return err
		}
		if bd.VolumeSizeGiB < 0 || bd.VolumeSizeGiB > 16384 {
			return clientError(codeInvalidParameter, "Volume of %d GiB is out of range (1 to 16384)", bd.VolumeSizeGiB)
		}
		for key, dst := range map[string]**bool{".Ebs.DeleteOnTermination": &bd.DeleteOnTermination, ".Ebs.Encrypted": &bd.Encrypted} {
			if f.has(p + key) {
				v, err := f.boolean(p + key)
				if err != nil {
					return err
				}
				*dst = &v
			}
		}
		// EC2 encrypts with a KMS key only when asked to encrypt: a key
		// alone is refused, not taken as a request for encryption.
		if bd.KMSKeyID = f.get(p + ".Ebs.KmsKeyId"); bd.KMSKeyID != "" && (bd.Encrypted == nil || !*bd.Encrypted) {
			return clientError(codeInvalidParameterDependency, "The parameter KmsKeyId requires the parameter Encrypted to be set.")
		}
		req.blockDevices = append(req.blockDevices, bd)
	}
	return nil
}

// networkInterface is what a RunInstances request asks of the instance's
// primary network interface (NetworkInterface.1).
type networkInterface struct {
	subnetID    string
	groups      []string
	secondaries int
}

// parseNetworkInterface reads NetworkInterface.N.*. EC2 takes the subnet
// and security groups either at the instance's level or in the network
// interfaces, never both. The simulator creates one interface, the
// primary (device index 0), with SubnetId, SecurityGroupId.N and
// SecondaryPrivateIpAddressCount; it refuses what it does not simulate
// (a second interface, an existing one, chosen addresses) rather than
// ignore it.
func parseNetworkInterface(f form, instanceSubnet string, instanceGroups []string, t InstanceType) (*networkInterface, error) {
	switch {
	case instanceSubnet != "":
		return nil, clientError(codeInvalidCombination, "Network interfaces and an instance-level subnet ID may not be specified on the same request")
	case len(instanceGroups) > 0:
		return nil, clientError(codeInvalidCombination, "Network interfaces and an instance-level security groups may not be specified on the same request")
	case f.count("NetworkInterface") > 1:
		return nil, clientError(codeUnsupported, "The simulator launches instances with one network interface (device index 0).")
	}
	const p = "NetworkInterface.1."
	idx, set, err := f.integer(p + "DeviceIndex")
	switch {
	case err != nil:
		return nil, err
	case !set:
		return nil, clientError(codeMissingParameter, "Each network interface requires a device index.")
	case idx != 0:
		return nil, clientError(codeUnsupported, "The simulator launches instances with one network interface, at device index 0, not %d.", idx)
	}
	for _, k := range []string{"NetworkInterfaceId", "PrivateIpAddress", "PrivateIpAddresses", "Ipv6AddressCount", "Ipv4PrefixCount"} {
		if f.has(p+k) || f.count(p+k) > 0 {
			return nil, clientError(codeUnsupported, "The simulator does not simulate networkInterface.%s.", k)
		}
	}
	ni := &networkInterface{subnetID: f.get(p + "SubnetId"), groups: f.list(p + "SecurityGroupId")}
	n, _, err := f.integer(p + "SecondaryPrivateIpAddressCount")
	switch {
	case err != nil:
		return nil, err
	case n < 0:
		return nil, clientError(codeInvalidParameter, "Value (%d) for parameter secondaryPrivateIpAddressCount is invalid. Expecting a positive value.", n)
	case 1+n > t.ipv4PerInterface():
		return nil, clientError("PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit: %s takes at most %d IPv4 addresses per network interface.", t.Name, t.ipv4PerInterface())
	}
	ni.secondaries = n
	return ni, nil
}

// parseTagSpecs reads TagSpecification.N.{ResourceType,Tag.M.{Key,Value}}.
func parseTagSpecs(f form) (instanceTags, volumeTags map[string]string, err error) {
	instanceTags, volumeTags = map[string]string{}, map[string]string{}
	for i := 1; i <= f.count("TagSpecification"); i++ {
		p := "TagSpecification." + strconv.Itoa(i)
		var dst map[string]string
		switch rt := f.get(p + ".ResourceType"); rt {
		case "instance":
			dst = instanceTags
		case "volume":
			dst = volumeTags
		case "network-interface", "spot-instances-request":
			dst = map[string]string{}
		default:
			return nil, nil, clientError(codeInvalidParameter, "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		for j := 1; j <= f.count(p+".Tag"); j++ {
			tp := p + ".Tag." + strconv.Itoa(j)
			k, v := f.get(tp+".Key"), f.get(tp+".Value")
			switch {
			case k == "" || len(k) > 128:
				return nil, nil, clientError(codeInvalidParameter, "Tag key must be between 1 and 128 characters, got %q", k)
			case len(v) > 256:
				return nil, nil, clientError(codeInvalidParameter, "Tag value for key %q exceeds 256 characters", k)
			case strings.HasPrefix(strings.ToLower(k), "aws:"):
				return nil, nil, clientError(codeInvalidParameter, "Tag keys starting with 'aws:' are reserved for internal use")
			}
			if _, dup := dst[k]; dup {
				return nil, nil, clientError(codeInvalidParameter, "Duplicate tag key '%s' specified.", k)
			}
			dst[k] = v
		}
		if len(dst) > maxTagsPerResource {
			return nil, nil, clientError(codeTagLimitExceeded, "The maximum number of tags per resource is %d", maxTagsPerResource)
		}
	}
	return instanceTags, volumeTags, nil
}

type xmlState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func stateOf(name string) xmlState { return xmlState{stateCodes[name], name} }

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	Tenancy            string `xml:"tenancy"`
}

type xmlGroup struct {
	GroupID string `xml:"groupId"`
}

type xmlProfile struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type xmlMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type xmlEBS struct {
	VolumeID            string `xml:"volumeId"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlBlockDevice struct {
	DeviceName string `xml:"deviceName"`
	Ebs        xmlEBS `xml:"ebs"`
}

type xmlMonitoring struct {
	State string `xml:"state"`
}

type xmlInstance struct {
	InstanceID            string             `xml:"instanceId"`
	ImageID               string             `xml:"imageId"`
	State                 xmlState           `xml:"instanceState"`
	PrivateDNSName        string             `xml:"privateDnsName"`
	DNSName               string             `xml:"dnsName"`
	Reason                string             `xml:"reason"`
	AmiLaunchIndex        int                `xml:"amiLaunchIndex"`
	InstanceType          string             `xml:"instanceType"`
	LaunchTime            string             `xml:"launchTime"`
	Placement             xmlPlacement       `xml:"placement"`
	Monitoring            xmlMonitoring      `xml:"monitoring"`
	SubnetID              string             `xml:"subnetId"`
	VpcID                 string             `xml:"vpcId"`
	PrivateIPAddress      string             `xml:"privateIpAddress,omitempty"`
	Groups                []xmlGroup         `xml:"groupSet>item"`
	NetworkInterfaces     []xmlInterface     `xml:"networkInterfaceSet>item"`
	StateReason           *xmlStateReason    `xml:"stateReason,omitempty"`
	Architecture          string             `xml:"architecture"`
	RootDeviceType        string             `xml:"rootDeviceType"`
	RootDeviceName        string             `xml:"rootDeviceName"`
	BlockDevices          []xmlBlockDevice   `xml:"blockDeviceMapping>item"`
	InstanceLifecycle     string             `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string             `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string             `xml:"virtualizationType"`
	ClientToken           string             `xml:"clientToken"`
	Tags                  []xmlTag           `xml:"tagSet>item"`
	Hypervisor            string             `xml:"hypervisor"`
	IamInstanceProfile    *xmlProfile        `xml:"iamInstanceProfile,omitempty"`
	EbsOptimized          bool               `xml:"ebsOptimized"`
	EnaSupport            bool               `xml:"enaSupport"`
	MetadataOptions       xmlMetadataOptions `xml:"metadataOptions"`
}

// xmlInterface is an instance's network interface as DescribeInstances
// shows it (networkInterfaceSet).
type xmlInterface struct {
	NetworkInterfaceID string              `xml:"networkInterfaceId"`
	SubnetID           string              `xml:"subnetId"`
	VpcID              string              `xml:"vpcId"`
	OwnerID            string              `xml:"ownerId"`
	Status             string              `xml:"status"`
	MacAddress         string              `xml:"macAddress"`
	PrivateIPAddress   string              `xml:"privateIpAddress"`
	PrivateDNSName     string              `xml:"privateDnsName"`
	SourceDestCheck    bool                `xml:"sourceDestCheck"`
	Groups             []xmlGroup          `xml:"groupSet>item"`
	Attachment         xmlAttachment       `xml:"attachment"`
	PrivateIPs         []xmlPrivateAddress `xml:"privateIpAddressesSet>item"`
	InterfaceType      string              `xml:"interfaceType"`
}

type xmlAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	DeviceIndex         int    `xml:"deviceIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlPrivateAddress struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

// networkInterface renders the instance's primary network interface,
// with its primary and secondary private addresses; nil before its cell
// has an address and after the instance ended (the interface is deleted
// with it). The caller holds s.mu.
func (s *Server) networkInterface(in *instance) *xmlInterface {
	if in.cell.Address == "" || in.state == stateTerminated {
		return nil
	}
	suffix := in.id[2:]
	x := &xmlInterface{
		NetworkInterfaceID: "eni-" + suffix, SubnetID: in.subnet.ID, VpcID: in.subnet.VPCID, OwnerID: s.region.account,
		Status: "in-use", MacAddress: "02:" + suffix[0:2] + ":" + suffix[2:4] + ":" + suffix[4:6] + ":" + suffix[6:8] + ":" + suffix[8:10],
		PrivateIPAddress: in.cell.Address, PrivateDNSName: privateDNSName(s.region.name, in.cell.Address), SourceDestCheck: true,
		Attachment: xmlAttachment{AttachmentID: "eni-attach-" + suffix, Status: "attached",
			AttachTime: in.launchTime.UTC().Truncate(time.Second).Format(timeLayout), DeleteOnTermination: true},
		InterfaceType: "interface",
	}
	for _, g := range in.groups {
		x.Groups = append(x.Groups, xmlGroup{g})
	}
	x.PrivateIPs = append(x.PrivateIPs, xmlPrivateAddress{in.cell.Address, x.PrivateDNSName, true})
	for _, a := range in.secondaryIPs() {
		x.PrivateIPs = append(x.PrivateIPs, xmlPrivateAddress{a, privateDNSName(s.region.name, a), false})
	}
	return x
}

// timeLayout is EC2's for times; launch times come whole seconds
// (".000Z"), so xmlOf truncates them.
const timeLayout = "2006-01-02T15:04:05.000Z"

// xmlOf renders an instance as DescribeInstances does. The caller holds
// s.mu.
func (s *Server) xmlOf(in *instance) xmlInstance {
	x := xmlInstance{
		InstanceID: in.id, ImageID: in.imageID, State: stateOf(in.state), Reason: in.transitionReason,
		InstanceType: in.itype.Name, LaunchTime: in.launchTime.UTC().Truncate(time.Second).Format(timeLayout),
		Placement:  xmlPlacement{AvailabilityZone: in.subnet.Zone, AvailabilityZoneID: s.region.zoneIDs[in.subnet.Zone], Tenancy: "default"},
		Monitoring: xmlMonitoring{"disabled"}, SubnetID: in.subnet.ID, VpcID: in.subnet.VPCID,
		PrivateIPAddress: in.cell.Address, Architecture: in.itype.Arch, RootDeviceType: "ebs", RootDeviceName: defaultInstanceRootName,
		VirtualizationType: "hvm", ClientToken: in.clientToken, Tags: xmlTags(in.tags), Hypervisor: "xen", EnaSupport: true,
		MetadataOptions: xmlMetadataOptions{State: "applied", HTTPTokens: in.httpTokens, HTTPPutResponseHopLimit: in.hopLimit, HTTPEndpoint: "enabled",
			InstanceMetadataTags: in.metadataTags},
	}
	if in.state == statePending {
		x.MetadataOptions.State = "pending"
	}
	if in.cell.Address != "" {
		x.PrivateDNSName = privateDNSName(s.region.name, in.cell.Address)
	}
	for _, g := range in.groups {
		x.Groups = append(x.Groups, xmlGroup{g})
	}
	if ni := s.networkInterface(in); ni != nil {
		x.NetworkInterfaces = []xmlInterface{*ni}
	}
	if in.reason != "" {
		x.StateReason = &xmlStateReason{in.reason, reasonMessages[in.reason]}
	}
	if in.spot {
		x.InstanceLifecycle, x.SpotInstanceRequestID = "spot", in.spotRequestID
	}
	if in.profile != "" {
		arn := in.profile
		if !strings.HasPrefix(arn, "arn:") {
			arn = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", s.region.account, in.profile)
		}
		x.IamInstanceProfile = &xmlProfile{Arn: arn, ID: "AIPA" + strings.ToUpper(in.id[2:])}
	}
	if in.state != statePending {
		x.BlockDevices = []xmlBlockDevice{{DeviceName: defaultInstanceRootName, Ebs: xmlEBS{
			VolumeID: "vol-" + in.id[2:], Status: "attached", AttachTime: in.launchTime.UTC().Format(timeLayout), DeleteOnTermination: true,
		}}}
		x.BlockDevices = append(x.BlockDevices, s.dataBlockDevices(in, s.now())...)
	}
	return x
}

// privateDNSName is EC2's private DNS name of an IPv4 address.
func privateDNSName(region, ip string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type runInstancesResponse struct {
	XMLName xml.Name `xml:"RunInstancesResponse"`
	responseMeta
	xmlReservation
}

// runInstances launches instances. It runs under s.mu; the cells start in
// the background.
func (s *Server) runInstances(f form) (response, error) {
	now := s.now()
	token := f.get("ClientToken")
	if len(token) > maxClientTokenLength {
		return nil, clientError(codeInvalidParameter, "Value (%s) for parameter clientToken is invalid. The length must be at most %d.", token, maxClientTokenLength)
	}
	// EC2 compares a repeated request's parameters "other than the Region
	// or Availability Zone" (ec2/latest/devguide/ec2-api-idempotency.html):
	// the same token with another zone answers the first instances, with
	// any other difference (a subnet, an instance type, a market) it is
	// IdempotentParameterMismatch. (A token is per Region; the simulator is
	// one Region, and keeps tokens for good, beyond EC2's 24 hours after
	// the instance ended.)
	canonical := f.canonical("ClientToken", "Placement.AvailabilityZone")
	if r := s.tokens[token]; token != "" && r != nil {
		if r.canonical != canonical {
			return nil, clientError(codeIdempotentMismatch, idempotentMismatchMsg)
		}
		s.log.Info("idempotent RunInstances: returning the earlier reservation", "client_token", token, "reservation", r.id)
		return s.reservationResponse(r, now), nil
	}
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	req, err := s.parseRun(f)
	if err != nil {
		return nil, err
	}
	zone := req.subnet.Zone
	if s.insufficient(req.itype.Name, zone) {
		return nil, &apiError{Status: http.StatusInternalServerError, Code: codeInsufficient, Message: fmt.Sprintf(
			"We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.",
			req.itype.Name, zone, req.itype.Name, strings.Join(slices.DeleteFunc(s.region.zonesOffering(req.itype), func(z string) bool { return z == zone || s.insufficient(req.itype.Name, z) }), ", "))}
	}

	r := &reservation{id: "r-" + randomHex(17), canonical: canonical}
	for range req.count {
		s.seq++
		in := &instance{
			seq: s.seq, id: "i-" + randomHex(17), reservationID: r.id, clientToken: token, imageID: req.image.ID,
			itype: req.itype, image: req.image, subnet: req.subnet, groups: req.groups, secondaries: req.secondaries, profile: req.profile,
			tags: maps.Clone(req.tags), volumeTags: maps.Clone(req.volumeTags), userData: req.userData, bootstrap: req.bootstrap,
			spot: req.spot, spotType: req.spotType, spotBehavior: req.spotBehavior, spotMaxPrice: req.spotMaxPrice,
			httpTokens: req.httpTokens, hopLimit: req.hopLimit, metadataTags: req.metadataTags, shutdown: req.shutdown,
			cpuCredits: req.cpuCredits, blockDevices: req.blockDevices,
			launchTime: now, readyAt: now.Add(s.bootDelay), visibleAt: now.Add(s.consistencyDelay), state: statePending,
		}
		in.cell = simcells.Cell{ID: in.id, Type: in.itype.Name, Bootstrap: in.bootstrap, LogAttr: in.cellAttr()}
		if in.spot {
			in.spotRequestID = "sir-" + randomHex(8)
		}
		s.instances[in.id] = in
		s.order = append(s.order, in)
		r.instances = append(r.instances, in)
		s.log.Info("instance launched", "instance", in.id, "cell", in.cellAttr(), "type", in.itype.Name, "zone", zone,
			"subnet", in.subnet.ID, "spot", in.spot, "client_token", token)
		s.startCell(in)
		s.addRootVolume(in)
	}
	if token != "" {
		s.tokens[token] = r
	}
	// The answer shows the instances as launched: pending, whatever the
	// cells have done meanwhile.
	resp := &runInstancesResponse{xmlReservation: xmlReservation{ReservationID: r.id, OwnerID: s.region.account}}
	for _, in := range r.instances {
		x := s.xmlOf(in)
		x.State, x.PrivateIPAddress, x.PrivateDNSName, x.NetworkInterfaces = stateOf(statePending), "", "", nil
		if in.cell.Started {
			x.PrivateIPAddress, x.PrivateDNSName = in.cell.Address, privateDNSName(s.region.name, in.cell.Address)
			if ni := s.networkInterface(in); ni != nil {
				x.NetworkInterfaces = []xmlInterface{*ni}
			}
		}
		resp.Instances = append(resp.Instances, x)
	}
	return resp, nil
}

// reservationResponse answers a repeated RunInstances with the instances
// of the first one, in their current state.
func (s *Server) reservationResponse(r *reservation, now time.Time) *runInstancesResponse {
	resp := &runInstancesResponse{xmlReservation: xmlReservation{ReservationID: r.id, OwnerID: s.region.account}}
	for _, in := range r.instances {
		s.advance(in, now)
		resp.Instances = append(resp.Instances, s.xmlOf(in))
	}
	return resp
}

// ---- DescribeInstances ----

var instanceFields = map[string]fieldFunc[*instance]{
	"instance-id":              func(in *instance) []string { return []string{in.id} },
	"instance-state-name":      func(in *instance) []string { return []string{in.state} },
	"instance-state-code":      func(in *instance) []string { return []string{strconv.Itoa(stateCodes[in.state])} },
	"client-token":             func(in *instance) []string { return []string{in.clientToken} },
	"instance-type":            func(in *instance) []string { return []string{in.itype.Name} },
	"availability-zone":        func(in *instance) []string { return []string{in.subnet.Zone} },
	"subnet-id":                func(in *instance) []string { return []string{in.subnet.ID} },
	"vpc-id":                   func(in *instance) []string { return []string{in.subnet.VPCID} },
	"image-id":                 func(in *instance) []string { return []string{in.imageID} },
	"reservation-id":           func(in *instance) []string { return []string{in.reservationID} },
	"private-ip-address":       func(in *instance) []string { return []string{in.cell.Address} },
	"architecture":             func(in *instance) []string { return []string{in.itype.Arch} },
	"instance-lifecycle":       func(in *instance) []string { return lifecycle(in) },
	"spot-instance-request-id": func(in *instance) []string { return []string{in.spotRequestID} },
	"instance.group-id":        func(in *instance) []string { return in.groups },
	"state-reason-code":        func(in *instance) []string { return []string{in.reason} },
}

func lifecycle(in *instance) []string {
	if in.spot {
		return []string{"spot"}
	}
	return nil
}

func instanceTags(in *instance) map[string]string { return in.tags }

type describeInstancesResponse struct {
	XMLName xml.Name `xml:"DescribeInstancesResponse"`
	responseMeta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

func (s *Server) describeInstances(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	ids := f.list("InstanceId")
	if len(ids) > 0 && f.has("MaxResults") {
		return nil, clientError(codeInvalidCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	filters := f.filters()
	if err := checkFilters(filters, instanceFields, true); err != nil {
		return nil, err
	}
	maxResults, after, err := pageParams(f)
	if err != nil {
		return nil, err
	}
	matched, err := s.selected(ids, now, func(in *instance) bool { return matchFilters(in, filters, instanceFields, instanceTags) })
	if err != nil {
		return nil, err
	}
	page, next := paginate(matched, func(in *instance) int64 { return in.seq }, maxResults, after)
	resp := &describeInstancesResponse{NextToken: next}
	for _, in := range page {
		n := len(resp.Reservations)
		if n == 0 || resp.Reservations[n-1].ReservationID != in.reservationID {
			resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: in.reservationID, OwnerID: s.region.account})
			n++
		}
		resp.Reservations[n-1].Instances = append(resp.Reservations[n-1].Instances, s.xmlOf(in))
	}
	return resp, nil
}

// ---- TerminateInstances ----

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	XMLName xml.Name `xml:"TerminateInstancesResponse"`
	responseMeta
	Changes []xmlStateChange `xml:"instancesSet>item"`
}

func (s *Server) terminateInstances(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	ids := f.list("InstanceId")
	if len(ids) == 0 {
		return nil, clientError(codeMissingParameter, "The request must contain the parameter InstanceId")
	}
	found, err := s.lookup(ids, now)
	if err != nil {
		return nil, err
	}
	resp := &terminateInstancesResponse{}
	for _, in := range found {
		prev := in.state
		if prev == statePending || prev == stateRunning {
			s.shutDown(in, ReasonUserShutdown, now)
			in.transitionReason = "User initiated (" + now.UTC().Format("2006-01-02 15:04:05") + " GMT)"
		}
		resp.Changes = append(resp.Changes, xmlStateChange{InstanceID: in.id, CurrentState: stateOf(in.state), PreviousState: stateOf(prev)})
	}
	return resp, nil
}

// shutDown starts the end of an instance. The caller holds s.mu.
func (s *Server) shutDown(in *instance, reason string, now time.Time) {
	in.state = stateShuttingDown
	in.reason = reason
	in.doneAt = now.Add(s.shutdownDelay)
	s.log.Info("instance shutting down", "instance", in.id, "cell", in.cellAttr(), "reason", reason)
	// EC2 detaches the volumes AttachVolume attached (DeleteOnTermination
	// false) as the instance ends.
	for _, v := range s.volumesAttachedTo(in) {
		if !v.att.detaching && !v.att.root {
			s.startDetach(v, now)
		}
	}
	s.stopCell(in)
}

// ---- DescribeInstanceStatus ----

type xmlStatusDetail struct {
	Name   string `xml:"name"`
	Status string `xml:"status"`
}

type xmlStatusSummary struct {
	Status  string            `xml:"status"`
	Details []xmlStatusDetail `xml:"details>item"`
}

type xmlEvent struct {
	InstanceEventID string `xml:"instanceEventId"`
	Code            string `xml:"code"`
	Description     string `xml:"description"`
	NotBefore       string `xml:"notBefore"`
	NotAfter        string `xml:"notAfter,omitempty"`
}

type xmlInstanceStatus struct {
	InstanceID         string           `xml:"instanceId"`
	AvailabilityZone   string           `xml:"availabilityZone"`
	AvailabilityZoneID string           `xml:"availabilityZoneId"`
	InstanceState      xmlState         `xml:"instanceState"`
	SystemStatus       xmlStatusSummary `xml:"systemStatus"`
	InstanceStatus     xmlStatusSummary `xml:"instanceStatus"`
	Events             []xmlEvent       `xml:"eventsSet>item"`
}

type describeInstanceStatusResponse struct {
	XMLName xml.Name `xml:"DescribeInstanceStatusResponse"`
	responseMeta
	Statuses  []xmlInstanceStatus `xml:"instanceStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

// statusOf is the status check result of an instance: ok once running.
func statusOf(in *instance) string {
	if in.state == stateRunning {
		return "ok"
	}
	return "not-applicable"
}

var statusFields = map[string]fieldFunc[*instance]{
	"availability-zone":   func(in *instance) []string { return []string{in.subnet.Zone} },
	"instance-state-name": func(in *instance) []string { return []string{in.state} },
	"instance-state-code": func(in *instance) []string { return []string{strconv.Itoa(stateCodes[in.state])} },
	"event.code": func(in *instance) []string {
		var out []string
		for _, e := range in.events {
			out = append(out, e.Code)
		}
		return out
	},
	"event.instance-event-id": func(in *instance) []string {
		var out []string
		for _, e := range in.events {
			out = append(out, e.ID)
		}
		return out
	},
	"instance-status.status": func(in *instance) []string { return []string{statusOf(in)} },
	"system-status.status":   func(in *instance) []string { return []string{statusOf(in)} },
}

func (s *Server) describeInstanceStatus(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	ids := f.list("InstanceId")
	if len(ids) > 0 && f.has("MaxResults") {
		return nil, clientError(codeInvalidCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	all, err := f.boolean("IncludeAllInstances")
	if err != nil {
		return nil, err
	}
	filters := f.filters()
	if err := checkFilters(filters, statusFields, false); err != nil {
		return nil, err
	}
	maxResults, after, err := pageParams(f)
	if err != nil {
		return nil, err
	}
	matched, err := s.selected(ids, now, func(in *instance) bool {
		return (all || in.state == stateRunning) && matchFilters(in, filters, statusFields, nil)
	})
	if err != nil {
		return nil, err
	}
	page, next := paginate(matched, func(in *instance) int64 { return in.seq }, maxResults, after)
	resp := &describeInstanceStatusResponse{NextToken: next}
	for _, in := range page {
		st := statusOf(in)
		x := xmlInstanceStatus{
			InstanceID: in.id, AvailabilityZone: in.subnet.Zone, AvailabilityZoneID: s.region.zoneIDs[in.subnet.Zone],
			InstanceState:  stateOf(in.state),
			SystemStatus:   xmlStatusSummary{Status: st},
			InstanceStatus: xmlStatusSummary{Status: st},
		}
		if st == "ok" {
			x.SystemStatus.Details = []xmlStatusDetail{{"reachability", "passed"}}
			x.InstanceStatus.Details = []xmlStatusDetail{{"reachability", "passed"}}
		}
		if in.state == stateRunning || in.state == statePending {
			for _, e := range in.events {
				xe := xmlEvent{InstanceEventID: e.ID, Code: e.Code, Description: e.Description, NotBefore: e.NotBefore.UTC().Format(timeLayout)}
				if !e.NotAfter.IsZero() {
					xe.NotAfter = e.NotAfter.UTC().Format(timeLayout)
				}
				x.Events = append(x.Events, xe)
			}
		}
		resp.Statuses = append(resp.Statuses, x)
	}
	return resp, nil
}

// selected returns, in launch order, the visible instances named by ids
// (every instance when ids is empty) that keep accepts, each advanced to
// its current state first. An unknown ID is InvalidInstanceID.NotFound.
func (s *Server) selected(ids []string, now time.Time, keep func(*instance) bool) ([]*instance, error) {
	candidates := s.order
	if len(ids) > 0 {
		var err error
		if candidates, err = s.lookup(ids, now); err != nil {
			return nil, err
		}
		slices.SortFunc(candidates, func(a, b *instance) int { return cmp.Compare(a.seq, b.seq) })
		candidates = slices.Compact(candidates)
	}
	var matched []*instance
	for _, in := range candidates {
		if !s.visible(in, now) {
			continue
		}
		s.advance(in, now)
		if keep(in) {
			matched = append(matched, in)
		}
	}
	return matched, nil
}
