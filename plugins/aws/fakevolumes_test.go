package aws

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// The fake's EBS volumes: DescribeVolumes (VolumeId, the attachment.*
// filters the plugin uses), AttachVolume and DetachVolume with EC2's
// refusals (VolumeInUse even for the same instance, ZoneMismatch,
// IncorrectState, a device name in use, the attachment limit). An
// attachment is attaching until the next DescribeVolumes shows it, then
// attached; a detach is detaching until the next one, then gone; an
// instance that is shutting down or terminated loses its volumes. The
// simulator (test/cloudsim/ec2) models EBS fully; this is what the
// plugin's unit tests need.

type fakeVolume struct {
	id, zone       string
	instance       string // "" when not attached
	device, state  string // attachment state: attaching, attached, detaching
	polls          int
	deleteOnTermin bool
}

// fakeAttachmentLimit is how many volumes the fake attaches to one
// instance, unless a test sets attachLimit: a Nitro type's 28 shared
// attachments less its root volume and network interface.
const fakeAttachmentLimit = 26

// addVolume creates an available volume in zone and returns its ID.
func (f *fakeEC2) addVolume(zone string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("vol-%017x", f.nextID)
	if f.volumes == nil {
		f.volumes = map[string]*fakeVolume{}
	}
	f.volumes[id] = &fakeVolume{id: id, zone: zone}
	return id
}

// attachRoot attaches a volume as an instance's root volume (/dev/xvda),
// as RunInstances does.
func (f *fakeEC2) attachRoot(instance, volume string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.volumes[volume]
	v.instance, v.device, v.state, v.deleteOnTermin = instance, "/dev/xvda", "attached", true
}

// deleteVolume deletes a volume that is not attached; it is the
// conformance suite's DeleteVolume, which runs after the case's instances
// were terminated (and their volumes detached as the fake sees them).
func (f *fakeEC2) deleteVolume(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceVolumes()
	if v := f.volumes[id]; v != nil && v.instance != "" {
		return fmt.Errorf("volume %s is still attached to %s", id, v.instance)
	}
	delete(f.volumes, id)
	return nil
}

// settleVolumes moves every attachment one step, as a DescribeVolumes
// call does.
func (f *fakeEC2) settleVolumes() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceVolumes()
}

// failWith makes the next call of op answer code (HTTP 400) with message.
func (f *fakeEC2) failWith(op, code, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[op] = append(f.errs[op], fakeError{code: code, status: 400, message: message})
}

func (f *fakeEC2) volume(id string) fakeVolume {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.volumes[id]
}

type xVolumeAttachment struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xVolume struct {
	VolumeID    string              `xml:"volumeId"`
	Zone        string              `xml:"availabilityZone"`
	Status      string              `xml:"status"`
	Attachments []xVolumeAttachment `xml:"attachmentSet>item"`
}

type xDescribeVolumes struct {
	XMLName   xml.Name  `xml:"DescribeVolumesResponse"`
	Volumes   []xVolume `xml:"volumeSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

func (v *fakeVolume) xml() xVolume {
	x := xVolume{VolumeID: v.id, Zone: v.zone, Status: "available"}
	if v.instance != "" {
		x.Status = "in-use"
		x.Attachments = []xVolumeAttachment{{v.id, v.instance, v.device, v.state, v.deleteOnTermin}}
	}
	return x
}

// advanceVolumes moves attachments along: attaching → attached,
// detaching → gone, and a volume of an ending instance detached.
func (f *fakeEC2) advanceVolumes() {
	for _, v := range f.volumes {
		if v.instance == "" {
			continue
		}
		if i := f.instances[v.instance]; i != nil && (i.state == "shutting-down" || i.state == "terminated") {
			v.instance, v.device, v.state = "", "", ""
			continue
		}
		v.polls++
		switch {
		case v.state == "attaching" && v.polls > 1:
			v.state = "attached"
		case v.state == "detaching" && v.polls > 1:
			v.instance, v.device, v.state = "", "", ""
		}
	}
}

func (f *fakeEC2) describeVolumes(form url.Values) (any, *fakeError) {
	ids := list(form, "VolumeId")
	fs := filters(form)
	var match []*fakeVolume
	for _, id := range ids {
		v := f.volumes[id]
		if v == nil {
			return nil, &fakeError{code: "InvalidVolume.NotFound", message: fmt.Sprintf("The volume '%s' does not exist.", id)}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.volumes)) {
		v := f.volumes[id]
		if len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		ok := true
		for name, values := range fs {
			switch name {
			case "attachment.instance-id":
				ok = ok && v.instance != "" && slices.Contains(values, v.instance)
			default:
				return nil, &fakeError{code: "InvalidParameterValue", message: "the fake does not know filter " + name}
			}
		}
		if ok {
			match = append(match, v)
		}
	}
	lo, hi, next := f.page(form, len(match))
	resp := xDescribeVolumes{NextToken: next}
	for _, v := range match[lo:hi] {
		resp.Volumes = append(resp.Volumes, v.xml())
	}
	f.advanceVolumes()
	return resp, nil
}

type xAttachVolume struct {
	XMLName xml.Name `xml:"AttachVolumeResponse"`
	xVolumeAttachment
}

func (f *fakeEC2) attachVolume(form url.Values) (any, *fakeError) {
	v := f.volumes[form.Get("VolumeId")]
	if v == nil {
		return nil, &fakeError{code: "InvalidVolume.NotFound", message: fmt.Sprintf("The volume '%s' does not exist.", form.Get("VolumeId"))}
	}
	i := f.instances[form.Get("InstanceId")]
	if i == nil {
		return nil, &fakeError{code: "InvalidInstanceID.NotFound", message: fmt.Sprintf("The instance ID '%s' does not exist", form.Get("InstanceId"))}
	}
	device := form.Get("Device")
	var onInstance int
	for _, o := range f.volumes {
		if o.instance == i.id {
			onInstance++
			if o.device == device {
				return nil, &fakeError{code: "InvalidParameterValue", message: fmt.Sprintf("Invalid value '%s' for unixDevice. Attachment point %s is already in use", device, device)}
			}
		}
	}
	limit := fakeAttachmentLimit
	if f.attachLimit > 0 {
		limit = f.attachLimit
	}
	switch {
	case v.instance != "":
		return nil, &fakeError{code: "VolumeInUse", message: v.id + " is already attached to an instance"}
	case i.state != "running":
		return nil, &fakeError{code: "IncorrectState", message: fmt.Sprintf("Instance '%s' is not 'running'.", i.id)}
	case v.zone != i.zone:
		return nil, &fakeError{code: "InvalidVolume.ZoneMismatch", message: fmt.Sprintf("The volume '%s' is not in the same availability zone as instance '%s'", v.id, i.id)}
	case !strings.HasPrefix(device, "/dev/"):
		return nil, &fakeError{code: "InvalidParameterValue", message: fmt.Sprintf("Value (%s) for parameter device is invalid.", device)}
	case onInstance >= limit:
		return nil, &fakeError{code: "AttachmentLimitExceeded", message: "You have reached the maximum number of attachments for instance " + i.id}
	}
	v.instance, v.device, v.state, v.polls = i.id, device, "attaching", 0
	return xAttachVolume{xVolumeAttachment: xVolumeAttachment{v.id, i.id, device, "attaching", false}}, nil
}

type xDetachVolume struct {
	XMLName xml.Name `xml:"DetachVolumeResponse"`
	xVolumeAttachment
}

func (f *fakeEC2) detachVolume(form url.Values) (any, *fakeError) {
	v := f.volumes[form.Get("VolumeId")]
	switch {
	case v == nil:
		return nil, &fakeError{code: "InvalidVolume.NotFound", message: fmt.Sprintf("The volume '%s' does not exist.", form.Get("VolumeId"))}
	case v.instance == "" || v.state == "detaching":
		state := "available"
		if v.instance != "" {
			state = "detaching"
		}
		return nil, &fakeError{code: "IncorrectState", message: fmt.Sprintf("Volume '%s' is in the '%s' state.", v.id, state)}
	case form.Get("InstanceId") != "" && form.Get("InstanceId") != v.instance:
		return nil, &fakeError{code: "InvalidAttachment.NotFound", message: "no such attachment"}
	}
	v.state, v.polls = "detaching", 0
	return xDetachVolume{xVolumeAttachment: xVolumeAttachment{v.id, v.instance, v.device, "detaching", false}}, nil
}
