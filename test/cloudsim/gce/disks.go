package gcesim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Zonal persistent disks, as the Compute Engine API reference documents
// them (disks and instances.attachDisk/detachDisk,
// https://cloud.google.com/compute/docs/reference/rest/v1/disks):
//
//   - disks.insert is a zonal operation; the disk is CREATING until it is
//     DONE, then READY. A blank disk without sizeGb is 500 GB ("create an
//     empty 500 GB data disk by omitting all properties").
//   - disks.delete is a zonal operation; the disk is DELETING until it is
//     DONE, then gone. A disk in use (users[] not empty) is refused at
//     once with 400 resourceInUseByAnotherResource.
//   - instances.attachDisk and instances.detachDisk are zonal operations
//     on the instance (operationType attachDisk, detachDisk; targetLink
//     the instance). What GCE checks before it accepts the call answers an
//     HTTP error (404 for a missing disk or instance, 400 invalid for a
//     disk of another zone or a device name in use, 400 resourceNotReady
//     for a disk that is not READY or an instance that is neither RUNNING
//     nor stopped); what it finds while attaching ends the operation DONE
//     with error.errors[]: RESOURCE_IN_USE_BY_ANOTHER_RESOURCE for a disk
//     attached READ_WRITE elsewhere (or READ_ONLY elsewhere when asked
//     READ_WRITE: "you cannot attach a disk in read-write mode to one
//     instance and read-only to others"), LIMIT_EXCEEDED past the machine
//     type's maximumPersistentDisks (the boot disk counts: 16 for
//     shared-core types, 128 for the others), UNSUPPORTED_OPERATION
//     "[pd-standard] features are not compatible for creating instance"
//     for a disk type the machine series cannot take (refusedDiskTypes).
//   - instances.get shows an attached disk in disks[] once the attach's
//     operation is DONE, and until the detach's is; a disk's users[] lists
//     its instances over the same span (an attach under way already
//     holds the disk: a second attach conflicts with it).
//   - A deleted instance lets go of its disks once it is TERMINATED; they
//     stay (autoDelete false), and a stopped instance keeps them.
//
// Regional disks, images, snapshots and the boot disk's own Disk resource
// are not simulated (the boot disk is only its instance's disks[0]).

// defaultDiskSizeGb is the size of a blank disk without sizeGb.
const defaultDiskSizeGb = 500

// diskTypes are the zonal persistent disk types offered.
var diskTypes = []string{"pd-standard", "pd-balanced", "pd-ssd", "pd-extreme"}

// refusedDiskTypes are the disk types of diskTypes a machine series (the
// machine type's name up to its first dash) cannot take, as Compute
// Engine's machine series pages list the disks each supports
// (https://cloud.google.com/compute/docs/general-purpose-machines): N4
// takes Hyperdisk only, no Persistent Disk at all; C3 takes pd-balanced and
// pd-ssd but neither pd-standard nor pd-extreme. attachDisk's operation
// then ends with UNSUPPORTED_OPERATION "[<type>] features are not
// compatible for creating instance", the error the PD CSI driver reads
// (kubernetes-sigs/gcp-compute-persistent-disk-csi-driver,
// pkg/gce-cloud-provider/compute/gce-compute.go; its PR 1212 shows it for
// pd-standard on c3-highcpu-4). The other series of the catalog take
// every type offered: pd-extreme's own limits (N2 with 64 vCPUs or more,
// M-series) are not modelled, and no Hyperdisk type is offered.
var refusedDiskTypes = map[string][]string{
	"n4": diskTypes,
	"c3": {"pd-standard", "pd-extreme"},
}

// takesDiskType reports whether machineType's series can take a disk of
// diskType.
func takesDiskType(machineType, diskType string) bool {
	series, _, _ := strings.Cut(machineType, "-")
	return !slices.Contains(refusedDiskTypes[series], diskType)
}

// DiskPath is the path of an attached disk on its instance: Google's
// guest udev rules link /dev/disk/by-id/google-<deviceName>, which is what
// the PD CSI driver's node plugin looks for.
func DiskPath(deviceName string) string { return "/dev/disk/by-id/google-" + deviceName }

// Disk is what the server knows of a disk, as it is at the time it was
// read.
type Disk struct {
	Name, Zone string
	ID         uint64
	SizeGb     int64
	Type       string // pd-balanced, …
	Status     string // CREATING, READY, DELETING
	// Users are the instances (zone/name) that hold it.
	Users []string
	Gone  bool
}

// disk is one inserted disk; its status is computed when read.
type disk struct {
	key      instanceKey
	seq      uint64
	id       uint64
	sizeGb   int64
	diskType string
	labels   map[string]string
	created  time.Time
	insert   *operation // READY once DONE
	remove   *operation // DELETING until DONE, then gone; nil before a delete

	lastAttach, lastDetach time.Time
}

func (d *disk) status(now time.Time) string {
	switch {
	case d.remove != nil:
		return "DELETING"
	case !d.insert.isDone(now):
		return "CREATING"
	}
	return "READY"
}

// visible reports whether get and list still return the disk.
func (d *disk) visible(now time.Time) bool { return d.remove == nil || !d.remove.isDone(now) }

// starterID is the disk's name for the DiskStarter: its ID, unique in the
// simulator (a name is unique only in its zone and may be reused).
func (d *disk) starterID() string { return strconv.FormatUint(d.id, 10) }

// attachment is a disk attached (or on its way) to an instance.
type attachment struct {
	disk       *disk
	deviceName string
	index      int
	mode       string // READ_WRITE, READ_ONLY
	attach     *operation
	detach     *operation // nil until a detach
}

// state is where the attachment stands at now: "attaching" until its
// attach is DONE, "gone" if that failed or the detach is DONE,
// "detaching" while a detach runs, else "attached".
func (a *attachment) state(now time.Time) string {
	switch {
	case !a.attach.isDone(now):
		return "attaching"
	case a.attach.failed() || a.detach != nil && a.detach.isDone(now):
		return "gone"
	case a.detach != nil:
		return "detaching"
	}
	return "attached"
}

// task is the DiskStarter's share of an operation, done in the
// background: the operation is DONE no earlier than at, and fails with err.
type task struct {
	done bool
	at   time.Time
	err  *opError
}

// isDone reports whether op is DONE at now.
func (op *operation) isDone(now time.Time) bool {
	t, ok := op.done()
	return ok && !now.Before(t)
}

// failed reports whether op ended, or will end, with an error.
func (op *operation) failed() bool { return op.err != nil || op.task != nil && op.task.err != nil }

// holdsDisks reports whether an instance still holds its disks: until it
// is TERMINATED after its delete.
func (in *instance) holdsDisks(now time.Time) bool {
	return !in.deleted || in.status(now) != "TERMINATED"
}

// liveDisks are the instance's attachments that are not gone. The caller
// holds s.mu.
func (in *instance) liveDisks(now time.Time) []*attachment {
	var out []*attachment
	for _, a := range in.disks {
		if a.state(now) != "gone" {
			out = append(out, a)
		}
	}
	return out
}

// holders are the instances that hold d at now, with the mode of each.
// The caller holds s.mu.
func (s *Server) holders(d *disk, now time.Time) map[*instance]string {
	out := map[*instance]string{}
	for _, in := range s.order {
		if !in.holdsDisks(now) {
			continue
		}
		for _, a := range in.liveDisks(now) {
			if a.disk == d {
				out[in] = a.mode
			}
		}
	}
	return out
}

// users are the self links of the instances d is attached to, as
// disks.get's users[] shows them (an attach under way not yet).
func (s *Server) users(d *disk, now time.Time) []string {
	var out []string
	for _, in := range s.order {
		if !in.holdsDisks(now) {
			continue
		}
		for _, a := range in.liveDisks(now) {
			if a.disk == d && a.state(now) != "attaching" {
				out = append(out, apiBase+s.instancePath(in.key.zone, in.key.name))
			}
		}
	}
	return out
}

func (s *Server) diskPath(zone, name string) string {
	return fmt.Sprintf("projects/%s/zones/%s/disks/%s", s.opts.Project, zone, name)
}

// liveDisk returns the visible disk named name in zone, or nil. The
// caller holds s.mu.
func (s *Server) liveDisk(zone, name string, now time.Time) *disk {
	d := s.disks[instanceKey{zone, name}]
	if d == nil || !d.visible(now) {
		return nil
	}
	return d
}

// diskStarter is the CellStarter as a DiskStarter, or nil.
func (s *Server) diskStarter() simcells.DiskStarter {
	ds, _ := s.opts.Cells.(simcells.DiskStarter)
	return ds
}

// background runs fn (a DiskStarter's call) for op's task, then marks the
// task done (failed with the error fn returns as code, if any). The
// operation stays RUNNING until then.
func (s *Server) background(op *operation, what string, fn func(ctx context.Context) error) {
	op.task = &task{}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		err := fn(s.bgCtx)
		s.mu.Lock()
		defer s.mu.Unlock()
		op.task.done, op.task.at = true, s.now()
		if err != nil {
			s.log.Warn("disk operation failed on the cell", "operation", op.name, "what", what, "error", err)
			op.task.err = &opError{code: "INTERNAL_ERROR", message: fmt.Sprintf("Internal error while %s: %v", what, err), httpStatus: http.StatusInternalServerError, httpMessage: "INTERNAL SERVER ERROR"}
		}
	}()
}

// retryDetach calls DetachDisk until it succeeds or the server closes: a
// disk still mounted in the cell stays detaching, as GCE waits for the
// guest.
func retryDetach(ds simcells.DiskStarter, instanceID, diskID string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for {
			err := ds.DetachDisk(ctx, instanceID, diskID)
			if err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// readBody decodes a JSON request body.
func readBody(q request) (map[string]any, error) {
	raw, err := io.ReadAll(io.LimitReader(q.r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, &apiError{Status: http.StatusBadRequest, Reason: "parseError", Message: "This API does not support parsing form-encoded input."}
	}
	return body, nil
}

// diskTypePattern reads a disk type's zone and name out of its full or
// partial URL.
var diskTypePattern = regexp.MustCompile(`^(?:.*/)?zones/([^/]+)/diskTypes/([^/]+)$`)

// insertDisk answers disks.insert.
func (s *Server) insertDisk(q request) (any, error) {
	zone := q.zone()
	rid, err := requestID(q)
	if err != nil {
		return nil, err
	}
	body, err := readBody(q)
	if err != nil {
		return nil, err
	}
	name, _ := body["name"].(string)
	if !namePattern.MatchString(name) {
		return nil, invalid("resource.name", name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'")
	}
	size := int64(defaultDiskSizeGb)
	if v, ok := body["sizeGb"]; ok {
		// proto3 JSON writes an int64 as a string.
		str := fmt.Sprint(v)
		if size, err = strconv.ParseInt(str, 10, 64); err != nil || size < 1 || size > 65536 {
			return nil, invalid("resource.sizeGb", str, "Disk size must be between 1 GB and 65536 GB.")
		}
	}
	diskType := "pd-standard"
	if t, _ := body["type"].(string); t != "" {
		m := diskTypePattern.FindStringSubmatch(t)
		if m == nil || m[1] != zone || !slices.Contains(diskTypes, m[2]) {
			return nil, invalid("resource.type", t, fmt.Sprintf("Disk type '%s' does not exist in zone '%s'.", t, zone))
		}
		diskType = m[2]
	}
	for _, f := range []string{"sourceImage", "sourceSnapshot", "sourceDisk", "replicaZones"} {
		if _, ok := body[f]; ok {
			return nil, invalid("resource."+f, fmt.Sprint(body[f]), "The GCE simulator makes blank zonal disks only.")
		}
	}
	labels, err := parseLabels(body["labels"])
	if err != nil {
		return nil, err
	}

	return s.operation(rid, func(now time.Time) (any, error) {
		if s.liveDisk(zone, name, now) != nil {
			return nil, alreadyExists(s.diskPath(zone, name))
		}
		s.diskSeq++
		d := &disk{key: instanceKey{zone, name}, seq: s.diskSeq, id: newID(), sizeGb: size, diskType: diskType, labels: labels, created: now}
		d.insert = s.newOperation(zone, "insert", apiBase+s.diskPath(zone, name), d.id, rid, now, now.Add(s.opDelay), nil)
		if ds := s.diskStarter(); ds != nil {
			id, bytes := d.starterID(), size<<30
			s.background(d.insert, "creating the disk", func(ctx context.Context) error { return ds.CreateDisk(ctx, id, bytes) })
		}
		s.disks[d.key] = d
		s.diskOrder = append(s.diskOrder, d)
		s.log.Info("disk inserted", "disk", name, "zone", zone, "size_gb", size, "type", diskType)
		return s.operationJSON(d.insert, now), nil
	})
}

// getDisk answers disks.get.
func (s *Server) getDisk(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := s.liveDisk(q.zone(), q.args[1], now)
	if d == nil {
		return nil, notFound(s.diskPath(q.zone(), q.args[1]))
	}
	return s.diskJSON(d, now), nil
}

// diskFields are the fields a disks list filter may name.
var diskFields = map[string]bool{"name": true, "status": true, "zone": true, "sizeGb": true}

// listDisks answers disks.list.
func (s *Server) listDisks(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	zone := q.zone()
	p, err := paginate(q, s.diskOrder, diskFields,
		func(d *disk) uint64 { return d.seq },
		func(d *disk) bool { return d.key.zone == zone && d.visible(now) },
		func(d *disk) func(string) (string, bool) {
			return func(f string) (string, bool) {
				switch f {
				case "name":
					return d.key.name, true
				case "status":
					return d.status(now), true
				case "zone":
					return d.key.zone, true
				case "sizeGb":
					return strconv.FormatInt(d.sizeGb, 10), true
				}
				return "", false
			}
		})
	if err != nil {
		return nil, err
	}
	return listJSON(s, "compute#diskList", "zones/"+zone+"/disks", p, func(d *disk) any { return s.diskJSON(d, now) }), nil
}

// deleteDisk answers disks.delete.
func (s *Server) deleteDisk(q request) (any, error) {
	zone, name := q.zone(), q.args[1]
	rid, err := requestID(q)
	if err != nil {
		return nil, err
	}
	return s.operation(rid, func(now time.Time) (any, error) {
		d := s.liveDisk(zone, name, now)
		if d == nil {
			return nil, notFound(s.diskPath(zone, name))
		}
		for in := range s.holders(d, now) {
			return nil, &apiError{Status: http.StatusBadRequest, Reason: "resourceInUseByAnotherResource",
				Message: fmt.Sprintf("The disk resource '%s' is already being used by '%s'", s.diskPath(zone, name), s.instancePath(in.key.zone, in.key.name))}
		}
		if st := d.status(now); st != "READY" {
			return nil, notReady(s.diskPath(zone, name))
		}
		d.remove = s.newOperation(zone, "delete", apiBase+s.diskPath(zone, name), d.id, rid, now, now.Add(s.opDelay), nil)
		if ds := s.diskStarter(); ds != nil {
			id := d.starterID()
			s.background(d.remove, "deleting the disk", func(ctx context.Context) error { return ds.DeleteDisk(ctx, id) })
		}
		s.log.Info("disk deleted", "disk", name, "zone", zone)
		return s.operationJSON(d.remove, now), nil
	})
}

// notReady is GCE's 400 for a resource busy with another operation.
func notReady(path string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Reason: "resourceNotReady", Message: fmt.Sprintf("The resource '%s' is not ready", path)}
}

// diskJSON renders d as GCE does.
func (s *Server) diskJSON(d *disk, now time.Time) map[string]any {
	out := map[string]any{
		"kind": "compute#disk", "id": strconv.FormatUint(d.id, 10), "name": d.key.name,
		"zone": s.zoneURL(d.key.zone), "sizeGb": strconv.FormatInt(d.sizeGb, 10),
		"type":   s.zoneURL(d.key.zone) + "/diskTypes/" + d.diskType,
		"status": d.status(now), "creationTimestamp": formatTime(d.created),
		"selfLink": apiBase + s.diskPath(d.key.zone, d.key.name), "physicalBlockSizeBytes": "4096",
	}
	if len(d.labels) > 0 {
		out["labels"] = d.labels
	}
	if users := s.users(d, now); len(users) > 0 {
		out["users"] = users
	}
	if !d.lastAttach.IsZero() {
		out["lastAttachTimestamp"] = formatTime(d.lastAttach)
	}
	if !d.lastDetach.IsZero() {
		out["lastDetachTimestamp"] = formatTime(d.lastDetach)
	}
	return out
}

// diskSourcePattern reads an attachDisk source: a disk's full or partial
// URL (projects/p/zones/z/disks/d, zones/z/disks/d), zonal or regional.
var diskSourcePattern = regexp.MustCompile(`^(?:.*/)?(?:projects/([^/]+)/)?(zones|regions)/([^/]+)/disks/([^/]+)$`)

// maxDisks is the machine type's maximumPersistentDisks (machineTypeJSON).
func (s *Server) maxDisks(zone, machineType string) int {
	if t, ok, _ := s.machineType(zone, machineType); ok && t.SharedCPU {
		return 16
	}
	return 128
}

// attachDisk answers instances.attachDisk.
func (s *Server) attachDisk(q request) (any, error) {
	zone, name := q.zone(), q.args[1]
	rid, err := requestID(q)
	if err != nil {
		return nil, err
	}
	body, err := readBody(q)
	if err != nil {
		return nil, err
	}
	ar, err := parseAttachDisk(q, body)
	if err != nil {
		return nil, err
	}
	source, m, mode, deviceName, project := ar.source, ar.m, ar.mode, ar.deviceName, ar.project

	return s.operation(rid, func(now time.Time) (any, error) {
		in := s.live(zone, name, now)
		if in == nil {
			return nil, notFound(s.instancePath(zone, name))
		}
		if m[2] == "regions" {
			return nil, invalid("resource.source", source, "The GCE simulator does not simulate regional disks.")
		}
		diskZone, diskName := m[3], m[4]
		if project != s.opts.Project {
			return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/disks/%s", project, diskZone, diskName))
		}
		if diskZone != zone {
			return nil, invalid("resource.source", source, fmt.Sprintf("Disk must be in the same zone as the instance ('%s').", zone))
		}
		d := s.liveDisk(diskZone, diskName, now)
		if d == nil {
			return nil, notFound(s.diskPath(diskZone, diskName))
		}
		if d.status(now) != "READY" {
			return nil, notReady(s.diskPath(diskZone, diskName))
		}
		// GCE attaches to a running instance and to a stopped one (TERMINATED,
		// not deleted); one on its way up or down is busy.
		if st := in.status(now); st != "RUNNING" && (st != "TERMINATED" || in.deleted) {
			return nil, notReady(s.instancePath(zone, name))
		}
		live := in.liveDisks(now)
		index := 1 // 0 is the boot disk
		for slices.ContainsFunc(live, func(a *attachment) bool { return a.index == index }) {
			index++
		}
		if deviceName == "" {
			// GCE's default is persistent-disk-<index>.
			deviceName = fmt.Sprintf("persistent-disk-%d", index)
		}
		if deviceName == bootDeviceName(in) || slices.ContainsFunc(live, func(a *attachment) bool { return a.deviceName == deviceName }) {
			return nil, invalid("resource.deviceName", deviceName, fmt.Sprintf("Device name '%s' is already in use on instance '%s'.", deviceName, name))
		}
		link := apiBase + s.instancePath(zone, name)
		refuse := func(e *opError) (any, error) {
			s.log.Info("attachDisk refused", "instance", name, "zone", zone, "disk", diskName, "code", e.code)
			op := s.newOperation(zone, "attachDisk", link, in.id, rid, now, now.Add(s.opDelay), e)
			return s.operationJSON(op, now), nil
		}
		for other, otherMode := range s.holders(d, now) {
			if other == in || mode == "READ_WRITE" || otherMode == "READ_WRITE" {
				return refuse(&opError{
					code:       "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
					message:    fmt.Sprintf("The disk resource '%s' is already being used by '%s'", s.diskPath(diskZone, diskName), s.instancePath(other.key.zone, other.key.name)),
					httpStatus: http.StatusBadRequest, httpMessage: "BAD REQUEST",
				})
			}
		}
		if !takesDiskType(in.machineType, d.diskType) {
			return refuse(&opError{
				code:       "UNSUPPORTED_OPERATION",
				message:    fmt.Sprintf("[%s] features are not compatible for creating instance.", d.diskType),
				httpStatus: http.StatusBadRequest, httpMessage: "BAD REQUEST",
			})
		}
		if limit := s.maxDisks(zone, in.machineType); len(live)+1 >= limit {
			return refuse(&opError{
				code:       "LIMIT_EXCEEDED",
				message:    fmt.Sprintf("Exceeded limit 'maximum_persistent_disks' on resource '%s'. Limit: %d.0", name, limit),
				httpStatus: http.StatusBadRequest, httpMessage: "BAD REQUEST",
			})
		}
		a := &attachment{disk: d, deviceName: deviceName, index: index, mode: mode}
		a.attach = s.newOperation(zone, "attachDisk", link, in.id, rid, now, now.Add(s.opDelay), nil)
		if ds := s.diskStarter(); ds != nil && in.cell.Started && !in.cell.Stopped {
			cell, id, path, ro := in.cell.ID, d.starterID(), DiskPath(deviceName), mode == "READ_ONLY"
			s.background(a.attach, "attaching the disk", func(ctx context.Context) error { return ds.AttachDisk(ctx, cell, id, path, ro) })
		}
		in.disks = append(in.disks, a)
		d.lastAttach = now
		s.log.Info("disk attached", "instance", name, "zone", zone, "disk", diskName, "device_name", deviceName, "mode", mode)
		return s.operationJSON(a.attach, now), nil
	})
}

// attachDiskArgs are the checked fields of an attachDisk body: the source,
// its diskSourcePattern match m, the mode, the device name (empty: GCE
// chooses) and the disk's project.
type attachDiskArgs struct {
	source, mode, deviceName, project string
	m                                 []string
}

// parseAttachDisk checks an attachDisk body, as GCE checks it before it
// looks at the instance or the disk.
func parseAttachDisk(q request, body map[string]any) (*attachDiskArgs, error) {
	source, _ := body["source"].(string)
	m := diskSourcePattern.FindStringSubmatch(source)
	if m == nil {
		return nil, invalid("resource.source", source, "The URL is malformed.")
	}
	mode, _ := body["mode"].(string)
	if mode == "" {
		mode = "READ_WRITE"
	}
	if mode != "READ_WRITE" && mode != "READ_ONLY" {
		return nil, invalid("resource.mode", mode, "Must be READ_WRITE or READ_ONLY.")
	}
	if boot, _ := body["boot"].(bool); boot {
		return nil, invalid("resource.boot", "true", "The GCE simulator attaches data disks only.")
	}
	if t, _ := body["type"].(string); t != "" && t != "PERSISTENT" {
		return nil, invalid("resource.type", t, "Only persistent disks can be attached to a running instance.")
	}
	deviceName, _ := body["deviceName"].(string)
	if deviceName != "" && !namePattern.MatchString(deviceName) {
		return nil, invalid("resource.deviceName", deviceName, "Must be a match of regex '[a-z]([-a-z0-9]*[a-z0-9])?'")
	}
	project := m[1]
	if project == "" {
		project = q.project
	}
	return &attachDiskArgs{source: source, m: m, mode: mode, deviceName: deviceName, project: project}, nil
}

// bootDeviceName is the device name of the instance's boot disk.
func bootDeviceName(in *instance) string {
	if n, _ := firstItem(in.body, "disks")["deviceName"].(string); n != "" {
		return n
	}
	return "persistent-disk-0"
}

// detachDisk answers instances.detachDisk.
func (s *Server) detachDisk(q request) (any, error) {
	zone, name := q.zone(), q.args[1]
	rid, err := requestID(q)
	if err != nil {
		return nil, err
	}
	deviceName := q.r.URL.Query().Get("deviceName")
	if deviceName == "" {
		return nil, &apiError{Status: http.StatusBadRequest, Reason: "required", Message: "Required field 'deviceName' not specified"}
	}
	return s.operation(rid, func(now time.Time) (any, error) {
		in := s.live(zone, name, now)
		if in == nil {
			return nil, notFound(s.instancePath(zone, name))
		}
		i := slices.IndexFunc(in.liveDisks(now), func(a *attachment) bool { return a.deviceName == deviceName })
		if i < 0 {
			return nil, invalid("deviceName", deviceName, fmt.Sprintf("No attached disk found with device name '%s'", deviceName))
		}
		a := in.liveDisks(now)[i]
		if a.state(now) != "attached" {
			// An attach or a detach of it is under way.
			return nil, notReady(s.instancePath(zone, name))
		}
		a.detach = s.newOperation(zone, "detachDisk", apiBase+s.instancePath(zone, name), in.id, rid, now, now.Add(s.opDelay), nil)
		if ds := s.diskStarter(); ds != nil && in.cell.Started && !in.cell.Stopped {
			s.background(a.detach, "detaching the disk", retryDetach(ds, in.cell.ID, a.disk.starterID()))
		}
		a.disk.lastDetach = now
		s.log.Info("disk detaching", "instance", name, "zone", zone, "disk", a.disk.key.name, "device_name", deviceName)
		return s.operationJSON(a.detach, now), nil
	})
}

// releaseDisks takes the disks of a deleted instance from its cell, in the
// background (GCE lets go of them as the instance stops). The caller holds
// s.mu.
func (s *Server) releaseDisks(in *instance, now time.Time) {
	ds := s.diskStarter()
	if ds == nil || !in.cell.Started {
		return
	}
	for _, a := range in.liveDisks(now) {
		detach := retryDetach(ds, in.cell.ID, a.disk.starterID())
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			if err := detach(s.bgCtx); err != nil {
				s.log.Warn("detaching a deleted instance's disk", "instance", in.key.name, "error", err)
			}
		}()
	}
}

// attachedDisksJSON is the instance's disks[]: its boot disk as the insert
// gave it, then every disk attached or detaching.
func (s *Server) attachedDisksJSON(in *instance, now time.Time) []any {
	boot := map[string]any{
		"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE", "boot": true, "index": 0,
		"deviceName": bootDeviceName(in), "autoDelete": true, "interface": "SCSI",
		"source": s.zoneURL(in.key.zone) + "/disks/" + in.key.name,
	}
	if ad, ok := firstItem(in.body, "disks")["autoDelete"].(bool); ok {
		boot["autoDelete"] = ad
	}
	out := []any{boot}
	for _, a := range in.disks {
		if st := a.state(now); st != "attached" && st != "detaching" {
			continue
		}
		out = append(out, map[string]any{
			"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": a.mode, "index": a.index,
			"deviceName": a.deviceName, "autoDelete": false, "boot": false, "interface": "SCSI",
			"source":     apiBase + s.diskPath(a.disk.key.zone, a.disk.key.name),
			"diskSizeGb": strconv.FormatInt(a.disk.sizeGb, 10),
		})
	}
	return out
}

// Disk returns what the server knows of the disk named name in zone.
func (s *Server) Disk(zone, name string) (Disk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.disks[instanceKey{zone, name}]
	if d == nil {
		return Disk{}, false
	}
	now := s.now()
	out := Disk{Name: name, Zone: zone, ID: d.id, SizeGb: d.sizeGb, Type: d.diskType, Status: d.status(now), Gone: !d.visible(now)}
	for in := range s.holders(d, now) {
		out.Users = append(out.Users, in.key.zone+"/"+in.key.name)
	}
	slices.Sort(out.Users)
	return out, true
}
