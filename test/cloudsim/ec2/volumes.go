package ec2sim

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// EBS volumes: CreateVolume, DeleteVolume, DescribeVolumes, AttachVolume
// and DetachVolume, with EC2's volume states (creating → available ⇄
// in-use → deleting) and attachment states (attaching → attached →
// detaching → gone), computed when read from the injected clock and
// Options.VolumeDelay, as instance states are. The rules and error codes
// are those of the EC2 API reference (AttachVolume, DetachVolume,
// CreateVolume, DeleteVolume, DescribeVolumes) and errors-overview.html;
// the form keys and XML names those of the SDK's serializers and
// deserializers (ec2 v1.344.0: awsEc2query_serializeOpDocumentAttachVolumeInput,
// awsEc2query_deserializeDocumentVolume, …DocumentVolumeAttachment).
//
// Where the CellStarter is a simcells.DiskStarter, each volume is also a
// real disk: CreateVolume creates it (the volume stays creating until the
// disk exists), AttachVolume gives it to the instance's cell at the path
// udev makes for an EBS volume on a Nitro instance (nvmePath; attaching
// until it is there), DetachVolume takes it back (detaching, asked again,
// while the cell holds it mounted, as EC2 waits for the guest), and
// DeleteVolume deletes it (deleting until done).

// Volume states and attachment states, as EC2 names them.
const (
	volumeCreating  = "creating"
	volumeAvailable = "available"
	volumeInUse     = "in-use"
	volumeDeleting  = "deleting"
	volumeError     = "error"

	attachAttaching = "attaching"
	attachAttached  = "attached"
	attachDetaching = "detaching"
)

// EBS error codes (errors-overview.html).
const (
	codeVolumeNotFound         = "InvalidVolume.NotFound"
	codeVolumeMalformed        = "InvalidVolumeID.Malformed"
	codeVolumeInUse            = "VolumeInUse"
	codeIncorrectState         = "IncorrectState"
	codeZoneMismatch           = "InvalidVolume.ZoneMismatch"
	codeAttachmentLimit        = "AttachmentLimitExceeded"
	codeAttachmentNotFound     = "InvalidAttachment.NotFound"
	defaultVolumeType          = "gp2" // CreateVolume's default VolumeType
	maxVolumeDescribeResults   = 500   // DescribeVolumes' MaxResults range is 5–500
	nvmeByIDPrefix             = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_"
	rootDeviceReservedForImage = defaultInstanceRootName
)

// volumeSizes are the size ranges, in GiB, of each volume type
// (ebs/latest/userguide/ebs-volume-types.html; io2 Block Express to 64 TiB).
var volumeSizes = map[string][2]int{
	"gp2": {1, 16384}, "gp3": {1, 16384}, "io1": {4, 16384}, "io2": {4, 65536},
	"st1": {125, 16384}, "sc1": {125, 16384}, "standard": {1, 1024},
}

var (
	volumeIDPattern = regexp.MustCompile(`^vol-[0-9a-f]{8}([0-9a-f]{9})?$`)
	// devicePattern is the device names EC2 takes for an EBS volume on a
	// Linux instance (/dev/sd[a-z], /dev/xvd[a-z], and their two-letter
	// forms such as /dev/xvdba; ec2/latest/UserGuide/device_naming.html).
	devicePattern = regexp.MustCompile(`^/dev/(sd|xvd)[a-z]{1,2}$`)
)

// NVMePath is where an attached EBS volume appears on a Nitro instance:
// udev's by-id link from the NVMe controller's model and serial (the
// volume ID without its dash), which the EBS CSI node plugin also looks
// for. It is the path the simulator gives a DiskStarter.
func NVMePath(volumeID string) string {
	return nvmeByIDPrefix + strings.ReplaceAll(volumeID, "-", "")
}

// Volume is what the simulator knows of one EBS volume.
type Volume struct {
	ID          string
	Zone        string
	SizeGiB     int
	Type        string
	Encrypted   bool
	ClientToken string
	Tags        map[string]string
	// State is creating, available, in-use, deleting or error (deleted
	// volumes are forgotten).
	State string
	// Attachment is empty when the volume is not attached.
	Attachment VolumeAttachment
}

// VolumeAttachment is a volume's attachment to an instance.
type VolumeAttachment struct {
	InstanceID string
	Device     string
	// State is attaching, attached or detaching.
	State string
	// Root is the attachment of an instance's root volume, which
	// RunInstances made.
	Root bool
}

// volume is the server's record of a volume, guarded by Server.mu.
type volume struct {
	seq         int64
	id          string
	zone        string
	sizeGiB     int
	vtype       string
	encrypted   bool
	token       string
	canonical   string
	tags        map[string]string
	createTime  time.Time
	availableAt time.Time // creating ends no earlier than this
	// visibleAt is when the other calls see the new volume (the
	// eventual-consistency delay, SetEventualConsistency).
	visibleAt time.Time
	// diskMade is false while a DiskStarter makes the disk; failed when it
	// could not (the volume's state is then error); created once the
	// volume is available.
	diskMade, failed, created bool
	deleting                  bool
	deleteAt                  time.Time // deleting ends no earlier than this
	deletedDisk               bool      // the DiskStarter deleted the disk (or there is none)
	att                       *attachment
	// lastOp is closed once the last DiskStarter call on the volume
	// returned: the calls on one disk run in the order the API asked.
	lastOp chan struct{}
}

// attachment is a volume's attachment to an instance.
type attachment struct {
	in         *instance
	device     string
	attachTime time.Time
	// root is the instance's root volume's attachment (/dev/xvda), made
	// by RunInstances, attached once the instance runs, and deleted with
	// the instance (DeleteOnTermination true).
	root      bool
	readyAt   time.Time // attaching ends no earlier than this
	diskDone  bool      // the DiskStarter attached the disk (or there is none)
	attached  bool
	detaching bool
	detachAt  time.Time // detaching ends no earlier than this
	freed     bool      // the DiskStarter detached the disk (or there is none)
}

// state is the attachment's EC2 state.
func (a *attachment) state() string {
	switch {
	case a.detaching:
		return attachDetaching
	case a.attached:
		return attachAttached
	}
	return attachAttaching
}

// state is the volume's EC2 state.
func (v *volume) state() string {
	switch {
	case v.deleting:
		return volumeDeleting
	case v.failed:
		return volumeError
	case !v.created:
		return volumeCreating
	case v.att != nil:
		return volumeInUse
	}
	return volumeAvailable
}

func (v *volume) snapshot() Volume {
	out := Volume{ID: v.id, Zone: v.zone, SizeGiB: v.sizeGiB, Type: v.vtype, Encrypted: v.encrypted, ClientToken: v.token,
		Tags: maps.Clone(v.tags), State: v.state()}
	if a := v.att; a != nil {
		out.Attachment = VolumeAttachment{InstanceID: a.in.id, Device: a.device, State: a.state(), Root: a.root}
	}
	return out
}

// diskStarter is the CellStarter when it gives cells real disks.
func (s *Server) diskStarter() (simcells.DiskStarter, bool) {
	ds, ok := s.opts.Cells.(simcells.DiskStarter)
	return ds, ok
}

// advanceVolume moves a volume and its attachment along their lifecycles
// up to now, and forgets it once deleted. The caller holds s.mu.
func (s *Server) advanceVolume(v *volume, now time.Time) {
	if !v.created && !v.failed && v.diskMade && !now.Before(v.availableAt) {
		v.created = true
	}
	if a := v.att; a != nil && a.root {
		s.advance(a.in, now)
		switch a.in.state {
		case statePending:
		case stateTerminated:
			delete(s.volumes, v.id)
		default:
			a.attached = true
		}
		return
	}
	if a := v.att; a != nil {
		s.advance(a.in, now)
		if !a.detaching && a.in.state != statePending && a.in.state != stateRunning {
			// EC2 detaches an instance's volumes when it terminates; their
			// DeleteOnTermination is false (AttachVolume's default), so
			// they become available again.
			s.startDetach(v, now)
		}
		if !a.attached && !a.detaching && a.diskDone && !now.Before(a.readyAt) {
			a.attached = true
		}
		// An ending instance's volumes are free once it is terminated,
		// whatever its cell did with the disks; a detach from a running
		// instance ends after the delay, once the cell let the disk go.
		if a.detaching && (a.in.state == stateTerminated || a.in.state == stateRunning && a.freed && !now.Before(a.detachAt)) {
			s.log.Info("volume detached", "volume", v.id, "instance", a.in.id, "device", a.device)
			v.att = nil
		}
	}
	if v.deleting && !now.Before(v.deleteAt) && v.deletedDisk {
		delete(s.volumes, v.id)
	}
}

// hasDisks reports whether volumes are real disks (a DiskStarter).
func (s *Server) hasDisks() bool {
	_, ok := s.diskStarter()
	return ok
}

// diskOp runs op on the DiskStarter in the background, asking again every
// interval while it fails and retry says so, then calls done under s.mu
// with its last error. Close cancels it.
func (s *Server) diskOp(what string, v *volume, retry bool, op func(context.Context, simcells.DiskStarter) error, done func(error)) {
	ds, ok := s.diskStarter()
	if !ok {
		return
	}
	prev, finished := v.lastOp, make(chan struct{})
	v.lastOp = finished
	s.diskWG.Add(1)
	go func() {
		defer s.diskWG.Done()
		defer close(finished)
		if prev != nil {
			<-prev
		}
		delay := 50 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(s.diskCtx, s.opts.CellStartTimeout)
			err := op(ctx, ds)
			cancel()
			if err == nil || !retry || s.diskCtx.Err() != nil {
				if err != nil {
					s.log.Warn("disk operation failed", "op", what, "volume", v.id, "error", err)
				}
				s.mu.Lock()
				done(err)
				s.mu.Unlock()
				return
			}
			s.log.Debug("disk operation failed; asking again", "op", what, "volume", v.id, "error", err)
			select {
			case <-s.diskCtx.Done():
			case <-time.After(delay):
			}
			delay = min(2*delay, time.Second)
		}
	}()
}

// volumesAttachedTo lists the volumes attached (in any attachment state)
// to an instance, in creation order. The caller holds s.mu.
func (s *Server) volumesAttachedTo(in *instance) []*volume {
	var out []*volume
	for _, v := range s.volumeOrder {
		if v.att != nil && v.att.in == in && s.volumes[v.id] == v {
			out = append(out, v)
		}
	}
	return out
}

// ---- CreateVolume ----

type xmlVolumeAttachment struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlVolume struct {
	VolumeID           string                `xml:"volumeId"`
	Size               int                   `xml:"size"`
	SnapshotID         string                `xml:"snapshotId"`
	AvailabilityZone   string                `xml:"availabilityZone"`
	AvailabilityZoneID string                `xml:"availabilityZoneId"`
	Status             string                `xml:"status"`
	CreateTime         string                `xml:"createTime"`
	Attachments        []xmlVolumeAttachment `xml:"attachmentSet>item"`
	Tags               []xmlTag              `xml:"tagSet>item"`
	VolumeType         string                `xml:"volumeType"`
	Encrypted          bool                  `xml:"encrypted"`
	MultiAttachEnabled bool                  `xml:"multiAttachEnabled"`
}

type createVolumeResponse struct {
	XMLName xml.Name `xml:"CreateVolumeResponse"`
	responseMeta
	xmlVolume
}

func (s *Server) xmlOfVolume(v *volume) xmlVolume {
	x := xmlVolume{
		VolumeID: v.id, Size: v.sizeGiB, AvailabilityZone: v.zone, AvailabilityZoneID: s.region.zoneIDs[v.zone],
		Status: v.state(), CreateTime: v.createTime.UTC().Format(timeLayout), Tags: xmlTags(v.tags),
		VolumeType: v.vtype, Encrypted: v.encrypted,
	}
	if a := v.att; a != nil {
		x.Attachments = []xmlVolumeAttachment{{VolumeID: v.id, InstanceID: a.in.id, Device: a.device, Status: a.state(),
			AttachTime: a.attachTime.UTC().Format(timeLayout), DeleteOnTermination: a.root}}
	}
	return x
}

func (s *Server) createVolume(f form) (response, error) {
	now := s.now()
	token := f.get("ClientToken")
	if len(token) > maxClientTokenLength {
		return nil, clientError(codeInvalidParameter, "Value (%s) for parameter clientToken is invalid. The length must be at most %d.", token, maxClientTokenLength)
	}
	// CreateVolume is idempotent on ClientToken as RunInstances is
	// (ec2-api-idempotency.html): the same token with the same parameters
	// answers the first volume, with others IdempotentParameterMismatch.
	canonical := f.canonical("ClientToken")
	if v := s.volumeTokens[token]; token != "" && v != nil {
		if v.canonical != canonical {
			return nil, clientError(codeIdempotentMismatch, idempotentMismatchMsg)
		}
		s.advanceVolume(v, now)
		return &createVolumeResponse{xmlVolume: s.xmlOfVolume(v)}, nil
	}
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	zone := f.get("AvailabilityZone")
	switch {
	case zone == "" && f.get("AvailabilityZoneId") == "":
		return nil, clientError(codeMissingParameter, "The request must contain the parameter availabilityZone or availabilityZoneId")
	case zone == "":
		return nil, clientError(codeUnsupported, "The simulator takes AvailabilityZone, not AvailabilityZoneId.")
	case !slices.Contains(s.region.zones, zone):
		return nil, clientError(codeInvalidParameter, "Invalid availability zone: [%s]", zone)
	case f.get("SnapshotId") != "":
		return nil, clientError(codeUnsupported, "The simulator does not create volumes from snapshots.")
	}
	vtype := f.get("VolumeType")
	if vtype == "" {
		vtype = defaultVolumeType
	}
	sizes, ok := volumeSizes[vtype]
	if !ok {
		return nil, clientError(codeInvalidParameter, "Value (%s) for parameter volumeType is invalid. Valid volume types: [standard, io1, io2, gp2, sc1, st1, gp3]", vtype)
	}
	size, set, err := f.integer("Size")
	switch {
	case err != nil:
		return nil, err
	case !set:
		return nil, clientError(codeMissingParameter, "The request must contain the parameter size or snapshotId")
	case size < sizes[0] || size > sizes[1]:
		return nil, clientError(codeInvalidParameter, "Volume of %dGiB is out of range for volume type %s: it must be from %d to %d GiB.", size, vtype, sizes[0], sizes[1])
	}
	encrypted, err := f.boolean("Encrypted")
	if err != nil {
		return nil, err
	}
	tags, err := parseVolumeTagSpecs(f)
	if err != nil {
		return nil, err
	}
	s.seq++
	v := &volume{
		seq: s.seq, id: "vol-" + randomHex(17), zone: zone, sizeGiB: size, vtype: vtype, encrypted: encrypted,
		token: token, canonical: canonical, tags: tags, createTime: now, availableAt: now.Add(s.volumeDelay), visibleAt: now.Add(s.consistencyDelay),
		diskMade: true, deletedDisk: true,
	}
	s.volumes[v.id] = v
	s.volumeOrder = append(s.volumeOrder, v)
	if token != "" {
		s.volumeTokens[token] = v
	}
	s.log.Info("volume created", "volume", v.id, "zone", zone, "size_gib", size, "type", vtype, "client_token", token)
	if s.hasDisks() {
		v.diskMade, v.deletedDisk = false, false
		s.diskOp("CreateDisk", v, false, func(ctx context.Context, ds simcells.DiskStarter) error {
			return ds.CreateDisk(ctx, v.id, int64(size)<<30)
		}, func(err error) {
			v.diskMade, v.failed = err == nil, err != nil
			v.deletedDisk = err != nil
		})
	}
	// The answer shows the volume as created: creating.
	x := s.xmlOfVolume(v)
	x.Status = volumeCreating
	return &createVolumeResponse{xmlVolume: x}, nil
}

// parseVolumeTagSpecs reads CreateVolume's TagSpecification.N, whose
// resource type must be volume.
func parseVolumeTagSpecs(f form) (map[string]string, error) {
	for i := 1; i <= f.count("TagSpecification"); i++ {
		if rt := f.get("TagSpecification." + strconv.Itoa(i) + ".ResourceType"); rt != "volume" {
			return nil, clientError(codeInvalidParameter, "'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}
	_, tags, err := parseTagSpecs(f)
	return tags, err
}

// ---- DeleteVolume ----

type deleteVolumeResponse struct {
	XMLName xml.Name `xml:"DeleteVolumeResponse"`
	responseMeta
	Return bool `xml:"return"`
}

// lookupVolume returns the volume id names, advanced to now, or EC2's
// error for a malformed or unknown ID. The caller holds s.mu.
func (s *Server) lookupVolume(id string, now time.Time) (*volume, error) {
	switch {
	case id == "":
		return nil, clientError(codeMissingParameter, "The request must contain the parameter volumeId")
	case !volumeIDPattern.MatchString(id):
		return nil, clientError(codeVolumeMalformed, "Invalid id: \"%s\"", id)
	}
	v := s.volumes[id]
	if v != nil {
		s.advanceVolume(v, now)
	}
	// A volume just created may not be visible yet: EC2 answers NotFound
	// (ec2/latest/devguide/eventual-consistency.html).
	if v = s.volumes[id]; v == nil || now.Before(v.visibleAt) {
		return nil, clientError(codeVolumeNotFound, "The volume '%s' does not exist.", id)
	}
	return v, nil
}

func (s *Server) deleteVolume(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	v, err := s.lookupVolume(f.get("VolumeId"), now)
	if err != nil {
		return nil, err
	}
	switch st := v.state(); st {
	case volumeInUse:
		return nil, clientError(codeVolumeInUse, "Volume %s is currently attached to %s", v.id, v.att.in.id)
	case volumeDeleting:
		// A repeated DeleteVolume of a volume being deleted succeeds.
		return &deleteVolumeResponse{Return: true}, nil
	case volumeCreating:
		return nil, clientError(codeIncorrectState, "The volume '%s' is 'creating'", v.id)
	}
	v.deleting, v.deleteAt = true, now.Add(s.volumeDelay)
	s.log.Info("volume deleting", "volume", v.id)
	if s.hasDisks() && !v.deletedDisk {
		s.diskOp("DeleteDisk", v, true, func(ctx context.Context, ds simcells.DiskStarter) error {
			return ds.DeleteDisk(ctx, v.id)
		}, func(error) { v.deletedDisk = true })
	}
	return &deleteVolumeResponse{Return: true}, nil
}

// ---- DescribeVolumes ----

var volumeFields = map[string]fieldFunc[*volume]{
	"volume-id":         func(v *volume) []string { return []string{v.id} },
	"status":            func(v *volume) []string { return []string{v.state()} },
	"availability-zone": func(v *volume) []string { return []string{v.zone} },
	"volume-type":       func(v *volume) []string { return []string{v.vtype} },
	"size":              func(v *volume) []string { return []string{strconv.Itoa(v.sizeGiB)} },
	"encrypted":         func(v *volume) []string { return []string{strconv.FormatBool(v.encrypted)} },
	"attachment.instance-id": func(v *volume) []string {
		if v.att == nil {
			return nil
		}
		return []string{v.att.in.id}
	},
	"attachment.status": func(v *volume) []string {
		if v.att == nil {
			return nil
		}
		return []string{v.att.state()}
	},
	"attachment.device": func(v *volume) []string {
		if v.att == nil {
			return nil
		}
		return []string{v.att.device}
	},
	"attachment.delete-on-termination": func(v *volume) []string {
		if v.att == nil {
			return nil
		}
		return []string{strconv.FormatBool(v.att.root)}
	},
}

func volumeTags(v *volume) map[string]string { return v.tags }

type describeVolumesResponse struct {
	XMLName xml.Name `xml:"DescribeVolumesResponse"`
	responseMeta
	Volumes   []xmlVolume `xml:"volumeSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (s *Server) describeVolumes(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	ids := f.list("VolumeId")
	if len(ids) > 0 && f.has("MaxResults") {
		return nil, clientError(codeInvalidCombination, "The parameter volumeSet cannot be used with the parameter maxResults")
	}
	if n, set, _ := f.integer("MaxResults"); set && n > maxVolumeDescribeResults {
		return nil, clientError(codeInvalidParameter, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", n, minMaxResults, maxVolumeDescribeResults)
	}
	filters := f.filters()
	if err := checkFilters(filters, volumeFields, true); err != nil {
		return nil, err
	}
	maxResults, after, err := pageParams(f)
	if err != nil {
		return nil, err
	}
	candidates := slices.Clone(s.volumeOrder)
	if len(ids) > 0 {
		candidates = candidates[:0]
		var missing []string
		for _, id := range ids {
			v, err := s.lookupVolume(id, now)
			var ae *apiError
			if errors.As(err, &ae) && ae.Code == codeVolumeNotFound {
				missing = append(missing, id)
				continue
			}
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, v)
		}
		if len(missing) > 0 {
			return nil, clientError(codeVolumeNotFound, "The volume '%s' does not exist.", strings.Join(missing, "', '"))
		}
		slices.SortFunc(candidates, func(a, b *volume) int { return int(a.seq - b.seq) })
		candidates = slices.Compact(candidates)
	}
	var matched []*volume
	for _, v := range candidates {
		s.advanceVolume(v, now)
		if s.volumes[v.id] == v && !now.Before(v.visibleAt) && matchFilters(v, filters, volumeFields, volumeTags) {
			matched = append(matched, v)
		}
	}
	s.compactVolumes()
	page, next := paginate(matched, func(v *volume) int64 { return v.seq }, maxResults, after)
	resp := &describeVolumesResponse{NextToken: next}
	for _, v := range page {
		resp.Volumes = append(resp.Volumes, s.xmlOfVolume(v))
	}
	return resp, nil
}

// compactVolumes drops deleted volumes from the creation order. The
// caller holds s.mu.
func (s *Server) compactVolumes() {
	s.volumeOrder = slices.DeleteFunc(s.volumeOrder, func(v *volume) bool { return s.volumes[v.id] != v })
}

// ---- AttachVolume ----

type attachVolumeResponse struct {
	XMLName xml.Name `xml:"AttachVolumeResponse"`
	responseMeta
	xmlVolumeAttachment
}

func (s *Server) attachVolume(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	device, instanceID := f.get("Device"), f.get("InstanceId")
	switch {
	case device == "":
		return nil, clientError(codeMissingParameter, "The request must contain the parameter device")
	case instanceID == "":
		return nil, clientError(codeMissingParameter, "The request must contain the parameter instanceId")
	}
	v, err := s.lookupVolume(f.get("VolumeId"), now)
	if err != nil {
		return nil, err
	}
	found, err := s.lookup([]string{instanceID}, now)
	if err != nil {
		return nil, err
	}
	in := found[0]
	switch {
	case v.att != nil:
		// Also when it is attached to this very instance: EC2 attaches a
		// volume once, and a repeated AttachVolume is refused.
		return nil, clientError(codeVolumeInUse, "%s is already attached to an instance", v.id)
	case v.state() != volumeAvailable:
		return nil, clientError(codeIncorrectState, "The volume '%s' is not 'available'.", v.id)
	case in.state != stateRunning:
		// EC2 attaches to running and stopped instances; the simulator's
		// instances are never stopped.
		return nil, clientError(codeIncorrectState, "Instance '%s' is not 'running'.", in.id)
	case v.zone != in.subnet.Zone:
		return nil, clientError(codeZoneMismatch, "The volume '%s' is not in the same availability zone as instance '%s'", v.id, in.id)
	case !devicePattern.MatchString(device):
		return nil, clientError(codeInvalidParameter, "Value (%s) for parameter device is invalid. %s is not a valid EBS device name.", device, device)
	}
	attached := s.volumesAttachedTo(in)
	if device == rootDeviceReservedForImage || slices.ContainsFunc(attached, func(o *volume) bool { return o.att.device == device }) {
		return nil, clientError(codeInvalidParameter, "Invalid value '%s' for unixDevice. Attachment point %s is already in use", device, device)
	}
	if len(attached) >= in.itype.volumeSlots() {
		return nil, clientError(codeAttachmentLimit, "You have reached the maximum number of attachments (%d, its root volume and network interface included) for instance %s of type %s.",
			in.itype.volumeSlots()+1, in.id, in.itype.Name)
	}
	a := &attachment{in: in, device: device, attachTime: now, readyAt: now.Add(s.volumeDelay), diskDone: true, freed: true}
	v.att = a
	s.log.Info("volume attaching", "volume", v.id, "instance", in.id, "cell", in.cellAttr(), "device", device)
	if s.hasDisks() {
		a.diskDone, a.freed = false, false
		s.diskOp("AttachDisk", v, false, func(ctx context.Context, ds simcells.DiskStarter) error {
			return ds.AttachDisk(ctx, in.id, v.id, NVMePath(v.id), false)
		}, func(err error) {
			// An attachment whose disk never came stays attaching, as an
			// EBS attachment can; a detach ends it.
			if err == nil && v.att == a {
				a.diskDone = true
			}
		})
	}
	return &attachVolumeResponse{xmlVolumeAttachment: xmlVolumeAttachment{VolumeID: v.id, InstanceID: in.id, Device: device,
		Status: attachAttaching, AttachTime: now.UTC().Format(timeLayout)}}, nil
}

// ---- DetachVolume ----

type detachVolumeResponse struct {
	XMLName xml.Name `xml:"DetachVolumeResponse"`
	responseMeta
	xmlVolumeAttachment
}

func (s *Server) detachVolume(f form) (response, error) {
	if err := f.dryRun(); err != nil {
		return nil, err
	}
	now := s.now()
	// Force is accepted: the simulator's guests always let go when asked
	// (its DiskStarter is asked until the cell does), so a forced detach
	// behaves as another.
	if _, err := f.boolean("Force"); err != nil {
		return nil, err
	}
	v, err := s.lookupVolume(f.get("VolumeId"), now)
	if err != nil {
		return nil, err
	}
	instanceID, device := f.get("InstanceId"), f.get("Device")
	if instanceID != "" {
		if _, err := s.lookup([]string{instanceID}, now); err != nil {
			return nil, err
		}
	}
	a := v.att
	switch {
	case a == nil:
		return nil, clientError(codeIncorrectState, "Volume '%s' is in the '%s' state.", v.id, v.state())
	case (instanceID != "" && a.in.id != instanceID) || (device != "" && a.device != device):
		return nil, clientError(codeAttachmentNotFound, "Attachment point %s for volume '%s' on instance '%s' does not exist.",
			device, v.id, instanceID)
	case a.detaching:
		return nil, clientError(codeIncorrectState, "Volume '%s' is in the 'detaching' state.", v.id)
	case a.root:
		// EC2 detaches a root volume from a stopped instance only, and
		// the simulator's instances never stop.
		return nil, clientError(codeIncorrectState, "Unable to detach root volume '%s' from instance '%s'", v.id, a.in.id)
	}
	s.startDetach(v, now)
	return &detachVolumeResponse{xmlVolumeAttachment: xmlVolumeAttachment{VolumeID: v.id, InstanceID: a.in.id, Device: a.device,
		Status: attachDetaching, AttachTime: a.attachTime.UTC().Format(timeLayout)}}, nil
}

// startDetach begins a volume's detach: detaching for the volume delay at
// least, and until the DiskStarter has taken the disk from the cell. The
// caller holds s.mu.
func (s *Server) startDetach(v *volume, now time.Time) {
	a := v.att
	a.detaching, a.detachAt = true, now.Add(s.volumeDelay)
	s.log.Info("volume detaching", "volume", v.id, "instance", a.in.id, "cell", a.in.cellAttr(), "device", a.device)
	if s.hasDisks() && !a.freed {
		s.diskOp("DetachDisk", v, true, func(ctx context.Context, ds simcells.DiskStarter) error {
			return ds.DetachDisk(ctx, a.in.id, v.id)
		}, func(err error) {
			// Given up only at Close; a terminated instance's disks are
			// gone with its cell.
			a.freed = err == nil || a.in.state == stateTerminated
		})
	}
}

// ---- blockDeviceMapping of DescribeInstances ----

// dataBlockDevices are the volumes attached to an instance as
// DescribeInstances shows them after its root volume. The caller holds
// s.mu.
func (s *Server) dataBlockDevices(in *instance, now time.Time) []xmlBlockDevice {
	var out []xmlBlockDevice
	for _, v := range s.volumesAttachedTo(in) {
		s.advanceVolume(v, now)
		if a := v.att; a != nil && a.in == in && !a.root {
			out = append(out, xmlBlockDevice{DeviceName: a.device, Ebs: xmlEBS{VolumeID: v.id, Status: a.state(),
				AttachTime: a.attachTime.UTC().Format(timeLayout)}})
		}
	}
	return out
}

// addRootVolume records the root volume RunInstances makes for an
// instance: vol-<the instance ID's digits>, as DescribeInstances' root
// blockDeviceMapping names it, sized and typed by the launch's mapping
// for the root device (8 GiB gp2 without one), tagged with the launch's
// volume tags. It is no disk of the DiskStarter: the cell is the
// instance's root. The caller holds s.mu.
func (s *Server) addRootVolume(in *instance) {
	v := &volume{
		seq: in.seq, id: "vol-" + in.id[2:], zone: in.subnet.Zone, sizeGiB: 8, vtype: defaultVolumeType, tags: maps.Clone(in.volumeTags),
		createTime: in.launchTime, availableAt: in.launchTime, visibleAt: in.visibleAt, diskMade: true, created: true, deletedDisk: true,
	}
	for _, bd := range in.blockDevices {
		if bd.DeviceName == defaultInstanceRootName {
			v.sizeGiB = cmp.Or(bd.VolumeSizeGiB, v.sizeGiB)
			v.vtype = cmp.Or(bd.VolumeType, v.vtype)
			v.encrypted = bd.Encrypted != nil && *bd.Encrypted
		}
	}
	v.att = &attachment{in: in, device: defaultInstanceRootName, attachTime: in.launchTime, root: true, diskDone: true, freed: true}
	s.volumes[v.id] = v
	s.volumeOrder = append(s.volumeOrder, v)
}

// ---- knobs and inspection ----

// SetVolumeDelay sets how long volumes created, attached, detached and
// deleted from now on stay creating, attaching, detaching and deleting
// at least (Options.VolumeDelay).
func (s *Server) SetVolumeDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.volumeDelay = d
}

// Volumes returns every volume not deleted, the instances' root volumes
// included (Attachment.Root), in creation order, in its current state.
func (s *Server) Volumes() []Volume {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []Volume
	for _, v := range slices.Clone(s.volumeOrder) {
		s.advanceVolume(v, now)
		if s.volumes[v.id] == v {
			out = append(out, v.snapshot())
		}
	}
	s.compactVolumes()
	return out
}

// stopDiskOps cancels the DiskStarter calls that retry and waits for
// every call under way.
func (s *Server) stopDiskOps() {
	s.diskStop()
	s.diskWG.Wait()
}

// deleteDisks deletes the disks of the volumes left, once their cells
// have stopped, so that a test leaves no disk behind.
func (s *Server) deleteDisks() error {
	ds, ok := s.diskStarter()
	if !ok {
		return nil
	}
	s.mu.Lock()
	var ids []string
	for _, v := range s.volumeOrder {
		if !v.deletedDisk {
			ids = append(ids, v.id)
		}
	}
	s.mu.Unlock()
	var errs []string
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.CellStartTimeout)
		if err := ds.DeleteDisk(ctx, id); err != nil {
			errs = append(errs, fmt.Sprintf("deleting the disk of volume %s: %v", id, err))
		}
		cancel()
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
