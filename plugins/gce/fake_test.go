package gce

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCompute is a minimal Compute Engine REST server for the plugin's
// unit tests: the real SDK talks to it over HTTP (option.WithEndpoint,
// withoutAuthentication). It knows the methods the plugin calls, as
// Compute Engine documents them: instances insert (requestId replays,
// alreadyExists), get, delete, aggregatedList (label filter, pages) and
// getSerialPortOutput; zoneOperations.wait; machineTypes.aggregatedList;
// images get and getFromFamily; subnetworks.get. It answers errors both
// ways Compute Engine does: HTTP errors with a reason, and operations that
// end DONE with error.errors[]. The simulator for end-to-end tests is
// test/cloudsim/gce, in another module.
type fakeCompute struct {
	srv *httptest.Server

	mu         sync.Mutex
	instances  map[string]*fakeInstance // zone/name
	requests   map[string]string        // requestId → operation
	ops        map[string]map[string]any
	sold       map[string][]string // zone → machine types
	httpErrs   map[string][]fakeHTTPError
	opErrs     map[string][]fakeOpError
	calls      map[string]int
	bodies     map[string][]map[string]any // method → request bodies
	queries    map[string][]string         // method → raw queries
	authz      []string                    // Authorization headers, in order
	pageSize   int
	insertDone bool // insert answers a DONE operation (as a replay does)
	// waitsPending is how many zoneOperations.wait calls answer an
	// operation still RUNNING before the first that finishes it.
	waitsPending int
	// holdOps keeps every operation RUNNING, however it is asked for.
	holdOps bool
	nextOp  int
	nextID  int
	// disks are the disks that exist, zone/name → their zone.
	disks map[string]bool
}

type fakeInstance struct {
	body     map[string]any
	zone     string
	status   string
	created  time.Time
	deleting bool
	console  string
	disks    []map[string]any // attached disks (fakedisks_test.go)
}

type fakeHTTPError struct {
	status  int
	reason  string
	message string
}

type fakeOpError struct {
	code, message, metric string
	httpStatus            int
}

const (
	fakeProject = "kip-test"
	fakeRegion  = "us-central1"
	fakeSubnet  = "cells"
	fakeNetwork = "kip-vpc"
)

// newFakeCompute starts a fake with subnetwork cells in network kip-vpc,
// image kip-cell-1 (family kip-cell, x86_64) and kip-cell-arm-1 (family
// kip-cell-arm, ARM64), and a few machine types in us-central1-a and -b.
func newFakeCompute(t testing.TB) *fakeCompute {
	f := &fakeCompute{
		instances: map[string]*fakeInstance{},
		requests:  map[string]string{},
		ops:       map[string]map[string]any{},
		sold: map[string][]string{
			"us-central1-a": {"e2-small", "e2-medium", "n2-standard-2", "n1-standard-1", "g2-standard-4", "t2a-standard-1"},
			"us-central1-b": {"e2-small", "e2-medium", "n2-standard-2", "n1-standard-1"},
			"us-east1-b":    {"e2-small"},
		},
		httpErrs: map[string][]fakeHTTPError{},
		opErrs:   map[string][]fakeOpError{},
		calls:    map[string]int{},
		bodies:   map[string][]map[string]any{},
		queries:  map[string][]string{},
		disks:    map[string]bool{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCompute) URL() string { return f.srv.URL }

// failHTTP makes the next n calls of method answer an HTTP error.
func (f *fakeCompute) failHTTP(method string, status int, reason, message string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.httpErrs[method] = append(f.httpErrs[method], fakeHTTPError{status, reason, message})
	}
}

// failOp makes the next n inserts' operations end DONE with an error.
func (f *fakeCompute) failOp(code, message, metric string, httpStatus, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.opErrs["instances.insert"] = append(f.opErrs["instances.insert"], fakeOpError{code, message, metric, httpStatus})
	}
}

func (f *fakeCompute) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakeCompute) body(method string, i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[method][i]
}

func (f *fakeCompute) query(method string, i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[method][i]
}

// set changes an instance (zone/name) under the lock.
func (f *fakeCompute) set(id string, change func(*fakeInstance)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.instances[id])
}

// finishDeletes removes the instances being deleted, as Compute Engine
// does once their delete operation ends.
func (f *fakeCompute) finishDeletes() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, in := range f.instances {
		if in.deleting {
			delete(f.instances, id)
		}
	}
}

// route is one REST path the fake serves, by method name.
type route struct {
	method string // the API method, as Compute Engine and IAM name it
	verb   string
	re     *regexp.Regexp
}

var routes = []route{
	{"instances.insert", "POST", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances$`)},
	{"instances.get", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$`)},
	{"instances.delete", "DELETE", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$`)},
	{"instances.getSerialPortOutput", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)/serialPort$`)},
	{"instances.attachDisk", "POST", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)/attachDisk$`)},
	{"instances.detachDisk", "POST", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)/detachDisk$`)},
	{"instances.aggregatedList", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/aggregated/instances$`)},
	{"zoneOperations.wait", "POST", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)/wait$`)},
	{"zoneOperations.get", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)$`)},
	{"zoneOperations.list", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations$`)},
	{"machineTypes.aggregatedList", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/aggregated/machineTypes$`)},
	{"images.getFromFamily", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/global/images/family/([^/]+)$`)},
	{"images.get", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/global/images/([^/]+)$`)},
	{"subnetworks.get", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/regions/([^/]+)/subnetworks/([^/]+)$`)},
	{"regions.get", "GET", regexp.MustCompile(`^/compute/v1/projects/([^/]+)/regions/([^/]+)$`)},
}

func (f *fakeCompute) serve(w http.ResponseWriter, r *http.Request) {
	var rt route
	var m []string
	for _, c := range routes {
		if c.verb == r.Method {
			if m = c.re.FindStringSubmatch(r.URL.Path); m != nil {
				rt = c
				break
			}
		}
	}
	if m == nil {
		writeError(w, 404, "notFound", "the fake does not serve "+r.Method+" "+r.URL.Path)
		return
	}
	var body map[string]any
	if r.Body != nil {
		_ = json.NewDecoder(r.Body).Decode(&body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[rt.method]++
	f.bodies[rt.method] = append(f.bodies[rt.method], body)
	f.queries[rt.method] = append(f.queries[rt.method], r.URL.RawQuery)
	f.authz = append(f.authz, r.Header.Get("Authorization"))
	if errs := f.httpErrs[rt.method]; len(errs) > 0 {
		f.httpErrs[rt.method] = errs[1:]
		writeError(w, errs[0].status, errs[0].reason, errs[0].message)
		return
	}
	if m[1] != fakeProject && rt.method != "images.get" && rt.method != "images.getFromFamily" {
		writeError(w, 403, "forbidden", "project "+m[1]+" is not the fake's")
		return
	}
	if strings.HasPrefix(rt.method, "instances.") {
		f.serveInstances(w, r, rt.method, m, body)
	} else {
		f.serveOther(w, rt.method, m, r.URL.Query().Get("filter"))
	}
}

// insert creates the instance at once, as its operation's first wait will
// report, unless an injected operation error fails it. A requestId seen
// before answers its operation again, creating nothing.
func (f *fakeCompute) insert(w http.ResponseWriter, zone, requestID string, body map[string]any) {
	if name, ok := f.requests[requestID]; ok && requestID != "" {
		writeJSON(w, f.ops[name])
		return
	}
	name, _ := body["name"].(string)
	id := zone + "/" + name
	if f.instances[id] != nil {
		writeError(w, 409, "alreadyExists", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", fakeProject, zone, name))
		return
	}
	f.nextOp++
	opName := fmt.Sprintf("operation-%d", f.nextOp)
	op := map[string]any{"name": opName, "status": "RUNNING", "operationType": "insert", "zone": "https://www.googleapis.com/compute/v1/projects/" + fakeProject + "/zones/" + zone,
		"targetLink": fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/zones/%s/instances/%s", fakeProject, zone, name)}
	f.ops[opName] = op
	if requestID != "" {
		f.requests[requestID] = opName
	}
	if errs := f.opErrs["instances.insert"]; len(errs) > 0 {
		f.opErrs["instances.insert"] = errs[1:]
		e := map[string]any{"code": errs[0].code, "message": errs[0].message}
		if errs[0].metric != "" {
			e["errorDetails"] = []any{map[string]any{"quotaInfo": map[string]any{"metricName": errs[0].metric, "limitName": errs[0].metric + "-per-project-region", "dimensions": map[string]any{"region": fakeRegion}, "limit": 24}}}
		}
		op["pendingError"] = map[string]any{"errors": []any{e}}
		if errs[0].httpStatus != 0 {
			op["pendingStatus"] = errs[0].httpStatus
		}
	} else {
		f.nextID++
		f.instances[id] = &fakeInstance{body: body, zone: zone, status: "RUNNING", created: time.Date(2026, 1, 1, 0, 0, f.nextID, 0, time.UTC)}
	}
	if f.insertDone {
		f.finish(op)
	}
	writeJSON(w, op)
}

// finish ends an operation, with its pending error if it has one.
func (f *fakeCompute) finish(op map[string]any) {
	op["status"] = "DONE"
	if e, ok := op["pendingError"]; ok {
		op["error"] = e
		delete(op, "pendingError")
	}
	if s, ok := op["pendingStatus"]; ok {
		op["httpErrorStatusCode"] = s
		delete(op, "pendingStatus")
	}
}

func (f *fakeCompute) delete(w http.ResponseWriter, zone, name, requestID string) {
	if opName, ok := f.requests[requestID]; ok && requestID != "" {
		writeJSON(w, f.ops[opName])
		return
	}
	in := f.instances[zone+"/"+name]
	if in == nil {
		writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", fakeProject, zone, name))
		return
	}
	in.status, in.deleting = "STOPPING", true
	f.nextOp++
	opName := fmt.Sprintf("operation-%d", f.nextOp)
	op := map[string]any{"name": opName, "status": "RUNNING", "operationType": "delete"}
	f.ops[opName] = op
	if requestID != "" {
		f.requests[requestID] = opName
	}
	writeJSON(w, op)
}

var opNameTerm = regexp.MustCompile(`^\(name = "([^"]+)"\)$`)

var filterRE = regexp.MustCompile(`^labels\.([a-z][a-z0-9_-]*) = "([^"]*)"$`)

func (f *fakeCompute) aggregated(w http.ResponseWriter, filter, pageToken string) {
	var key, value string
	if filter != "" {
		m := filterRE.FindStringSubmatch(filter)
		if m == nil {
			writeError(w, 400, "invalid", "Invalid value for field 'filter': '"+filter+"'")
			return
		}
		key, value = m[1], m[2]
	}
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(f.instances)) {
		labels, _ := f.instances[id].body["labels"].(map[string]any)
		if key == "" || labels[key] == value {
			ids = append(ids, id)
		}
	}
	start, _ := strconv.Atoi(pageToken)
	end := len(ids)
	if f.pageSize > 0 {
		end = min(end, start+f.pageSize)
	}
	items := map[string]any{}
	for _, id := range ids[start:end] {
		in := f.instances[id]
		scope, _ := items["zones/"+in.zone].(map[string]any)
		if scope == nil {
			scope = map[string]any{"instances": []any{}}
			items["zones/"+in.zone] = scope
		}
		scope["instances"] = append(scope["instances"].([]any), f.instanceJSON(in))
	}
	items["zones/us-east1-b"] = map[string]any{"warning": map[string]any{"code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope 'zones/us-east1-b' on this page."}}
	out := map[string]any{"items": items}
	if end < len(ids) {
		out["nextPageToken"] = strconv.Itoa(end)
	}
	writeJSON(w, out)
}

// instanceJSON is an instance as Compute Engine answers it: the inserted
// body with the fields the server sets.
func (f *fakeCompute) instanceJSON(in *fakeInstance) map[string]any {
	out := maps.Clone(in.body)
	name, _ := out["name"].(string)
	out["id"] = strconv.Itoa(1000 + len(name))
	out["status"] = in.status
	out["zone"] = "https://www.googleapis.com/compute/v1/projects/" + fakeProject + "/zones/" + in.zone
	out["creationTimestamp"] = in.created.Format("2006-01-02T15:04:05.000-07:00")
	if mt, ok := out["machineType"].(string); ok && !strings.HasPrefix(mt, "https://") {
		out["machineType"] = "https://www.googleapis.com/compute/v1/projects/" + fakeProject + "/" + mt
	}
	if nics, ok := out["networkInterfaces"].([]any); ok && len(nics) > 0 {
		nic := maps.Clone(nics[0].(map[string]any))
		nic["networkIP"] = "10.128.0." + strconv.Itoa(2+len(name)%200)
		// An alias IP range "/32" becomes an address of the range.
		if ranges, ok := nic["aliasIpRanges"].([]any); ok && len(ranges) > 0 {
			nic["aliasIpRanges"] = []any{map[string]any{"ipCidrRange": "10.128.1." + strconv.Itoa(2+len(name)%200) + "/32"}}
		}
		out["networkInterfaces"] = []any{nic}
	}
	if shown := f.shownDisks(in); len(shown) > 0 {
		disks := append([]any{map[string]any{"boot": true, "deviceName": "persistent-disk-0", "index": 0, "mode": "READ_WRITE",
			"source": "https://www.googleapis.com/compute/v1/projects/" + fakeProject + "/zones/" + in.zone + "/disks/" + name}}, shown...)
		out["disks"] = disks
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers an error as Compute Engine does.
func writeError(w http.ResponseWriter, status int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "message": message,
		"errors": []any{map[string]any{"reason": reason, "message": message, "domain": "global"}},
	}})
}

// serveInstances answers the instances methods; f.mu is held.
func (f *fakeCompute) serveInstances(w http.ResponseWriter, r *http.Request, method string, m []string, body map[string]any) {
	q := r.URL.Query()
	switch method {
	case "instances.insert":
		f.insert(w, m[2], q.Get("requestId"), body)
	case "instances.get":
		in := f.instances[m[2]+"/"+m[3]]
		if in == nil {
			writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", m[1], m[2], m[3]))
			return
		}
		writeJSON(w, f.instanceJSON(in))
	case "instances.delete":
		f.delete(w, m[2], m[3], q.Get("requestId"))
	case "instances.getSerialPortOutput":
		in := f.instances[m[2]+"/"+m[3]]
		if in == nil {
			writeError(w, 404, "notFound", "instance not found")
			return
		}
		writeJSON(w, map[string]any{"contents": in.console, "start": "0", "next": strconv.Itoa(len(in.console))})
	case "instances.aggregatedList":
		f.aggregated(w, q.Get("filter"), q.Get("pageToken"))
	case "instances.attachDisk":
		f.attachDisk(w, m[2], m[3], body)
	case "instances.detachDisk":
		f.detachDisk(w, m[2], m[3], q.Get("deviceName"))
	}
}

// serveOther answers the other methods; f.mu is held.
func (f *fakeCompute) serveOther(w http.ResponseWriter, method string, m []string, filter string) {
	switch method {
	case "zoneOperations.wait", "zoneOperations.get":
		op := f.ops[m[3]]
		if op == nil {
			writeError(w, 404, "notFound", "no operation "+m[3])
			return
		}
		if f.holdOps || f.waitsPending > 0 && method == "zoneOperations.wait" {
			if !f.holdOps {
				f.waitsPending--
			}
			writeJSON(w, op)
			return
		}
		f.finish(op)
		writeJSON(w, op)
	case "zoneOperations.list":
		// Only the filter the plugin sends: names joined by OR.
		var items []any
		for term := range strings.SplitSeq(filter, " OR ") {
			n := opNameTerm.FindStringSubmatch(term)
			if n == nil {
				writeError(w, 400, "invalid", "Invalid value for field 'filter': '"+filter+"'")
				return
			}
			if op := f.ops[n[1]]; op != nil {
				if !f.holdOps {
					f.finish(op)
				}
				items = append(items, op)
			}
		}
		writeJSON(w, map[string]any{"items": items})
	case "machineTypes.aggregatedList":
		items := map[string]any{}
		for zone, types := range f.sold {
			var list []map[string]any
			for _, t := range types {
				list = append(list, map[string]any{"name": t, "zone": zone})
			}
			items["zones/"+zone] = map[string]any{"machineTypes": list}
		}
		writeJSON(w, map[string]any{"items": items})
	case "images.get", "images.getFromFamily":
		images := map[string]map[string]any{
			"kip-cell":     {"name": "kip-cell-1", "family": "kip-cell", "architecture": "X86_64"},
			"kip-cell-arm": {"name": "kip-cell-arm-1", "family": "kip-cell-arm", "architecture": "ARM64"},
		}
		for fam, img := range images {
			if m[1] == fakeProject && ((method == "images.getFromFamily" && m[2] == fam) || (method == "images.get" && m[2] == img["name"])) {
				img["selfLink"] = fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/global/images/%s", m[1], img["name"])
				writeJSON(w, img)
				return
			}
		}
		writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/global/images/%s' was not found", m[1], m[2]))
	case "regions.get":
		if m[2] != fakeRegion {
			writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/regions/%s' was not found", m[1], m[2]))
			return
		}
		var zones []string
		for _, z := range []string{"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"} {
			zones = append(zones, "https://www.googleapis.com/compute/v1/projects/"+m[1]+"/zones/"+z)
		}
		writeJSON(w, map[string]any{"name": m[2], "status": "UP", "zones": zones})
	case "subnetworks.get":
		if m[2] != fakeRegion || m[3] != fakeSubnet {
			writeError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/regions/%s/subnetworks/%s' was not found", m[1], m[2], m[3]))
			return
		}
		writeJSON(w, map[string]any{
			"name":     fakeSubnet,
			"selfLink": fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/regions/%s/subnetworks/%s", m[1], m[2], m[3]),
			"network":  fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/global/networks/%s", m[1], fakeNetwork),
		})
	}
}
