package gce

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The fake's persistent disks: disks made by addDisk (the fake serves no
// disks.insert: the plugin does not call it), attached and detached by
// instances.attachDisk and detachDisk, whose operations are DONE on their
// first wait or list (never with holdOps), with Compute Engine's refusals.
// As on Compute Engine, the instance shows a disk once its attach's
// operation is DONE and until its detach's is, and an attach under way
// already holds the disk. The simulator, test/cloudsim/gce, models the
// rest: disk states, timings, limits.

// addDisk makes the disk name in zone and returns its PD CSI handle.
func (f *fakeCompute) addDisk(zone, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disks[zone+"/"+name] = true
	return fmt.Sprintf("projects/%s/zones/%s/disks/%s", fakeProject, zone, name)
}

// removeDisk deletes a disk, refusing one in use as Compute Engine does.
func (f *fakeCompute) removeDisk(handle string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if user := f.diskUser(handle, ""); user != "" {
		return fmt.Errorf("disk %s is in use by %s", handle, user)
	}
	zone, name := diskZoneName(handle)
	delete(f.disks, zone+"/"+name)
	return nil
}

func diskZoneName(source string) (zone, name string) {
	i := strings.Index(source, "/zones/")
	if i < 0 {
		return "", ""
	}
	zone, name, _ = strings.Cut(source[i+len("/zones/"):], "/disks/")
	return zone, name
}

// diskUser is an instance other than except (zone/name) that holds the
// disk READ_WRITE, or holds it at all when except asks READ_WRITE
// (anyMode), or "". A deleted instance holds nothing. f.mu is held.
func (f *fakeCompute) diskUser(source, except string, anyMode ...bool) string {
	zone, name := diskZoneName(source)
	for id, in := range f.instances {
		if id == except || in.deleting {
			continue
		}
		for _, d := range in.disks {
			if f.opIsDone(d["_detach"]) {
				continue
			}
			dz, dn := diskZoneName(d["source"].(string))
			if dz == zone && dn == name && (len(anyMode) > 0 && anyMode[0] || d["mode"] == "READ_WRITE") {
				return id
			}
		}
	}
	return ""
}

// opDone answers a DONE operation of type on the instance, failed with
// code and message if code is not empty.
func (f *fakeCompute) opDone(w http.ResponseWriter, opType, code, message string) string {
	f.nextOp++
	name := fmt.Sprintf("operation-%d", f.nextOp)
	op := map[string]any{"name": name, "status": "RUNNING", "operationType": opType}
	if code != "" {
		op["pendingError"] = map[string]any{"errors": []any{map[string]any{"code": code, "message": message}}}
		op["pendingStatus"] = 400
	}
	f.ops[name] = op
	writeJSON(w, op)
	return name
}

// opIsDone reports whether the operation named name (a string) is DONE.
func (f *fakeCompute) opIsDone(name any) bool {
	n, _ := name.(string)
	op := f.ops[n]
	return op != nil && op["status"] == "DONE"
}

// shownDisks are the attached disks the instance shows. f.mu is held.
func (f *fakeCompute) shownDisks(in *fakeInstance) []any {
	var out []any
	for _, d := range in.disks {
		if f.opIsDone(d["_attach"]) && !f.opIsDone(d["_detach"]) {
			shown := map[string]any{}
			for k, v := range d {
				if !strings.HasPrefix(k, "_") {
					shown[k] = v
				}
			}
			out = append(out, shown)
		}
	}
	return out
}

func (f *fakeCompute) attachDisk(w http.ResponseWriter, zone, name string, body map[string]any) {
	in := f.instances[zone+"/"+name]
	if in == nil || in.deleting {
		writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", fakeProject, zone, name))
		return
	}
	source, _ := body["source"].(string)
	dz, dn := diskZoneName(source)
	if !f.disks[dz+"/"+dn] {
		writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/disks/%s' was not found", fakeProject, dz, dn))
		return
	}
	if dz != zone {
		writeError(w, 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.source': '%s'. Disk must be in the same zone as the instance.", source))
		return
	}
	device, _ := body["deviceName"].(string)
	if slices.ContainsFunc(in.disks, func(d map[string]any) bool { return d["deviceName"] == device && !f.opIsDone(d["_detach"]) }) {
		writeError(w, 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.deviceName': '%s'. Device name '%s' is already in use.", device, device))
		return
	}
	mode, _ := body["mode"].(string)
	if user := f.diskUser(source, "", mode == "READ_WRITE"); user != "" {
		uz, un, _ := strings.Cut(user, "/")
		f.opDone(w, "attachDisk", "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
			fmt.Sprintf("The disk resource 'projects/%s/zones/%s/disks/%s' is already being used by 'projects/%s/zones/%s/instances/%s'", fakeProject, dz, dn, fakeProject, uz, un))
		return
	}
	in.disks = append(in.disks, map[string]any{
		"deviceName": device, "mode": mode, "index": len(in.disks) + 1, "autoDelete": false,
		"source":  fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/zones/%s/disks/%s", fakeProject, dz, dn),
		"_attach": f.opDone(w, "attachDisk", "", ""),
	})
}

func (f *fakeCompute) detachDisk(w http.ResponseWriter, zone, name, device string) {
	in := f.instances[zone+"/"+name]
	if in == nil {
		writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", fakeProject, zone, name))
		return
	}
	i := slices.IndexFunc(in.disks, func(d map[string]any) bool { return d["deviceName"] == device && !f.opIsDone(d["_detach"]) })
	if i < 0 || !f.opIsDone(in.disks[i]["_attach"]) {
		writeError(w, 400, "invalid", fmt.Sprintf("Invalid value for field 'deviceName': '%s'. No attached disk found with device name '%s'", device, device))
		return
	}
	if in.disks[i]["_detach"] != nil {
		writeError(w, 400, "resourceNotReady", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' is not ready", fakeProject, zone, name))
		return
	}
	in.disks[i]["_detach"] = f.opDone(w, "detachDisk", "", "")
}
