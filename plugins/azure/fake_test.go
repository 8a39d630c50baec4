package azure

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

// fakeARM is a minimal Azure Resource Manager for the plugin's unit tests:
// the real SDK talks to it over TLS (an httptest TLS server, its client
// as the transport, the server's URL as cloud.Configuration's Resource
// Manager endpoint). It knows the operations the plugin calls, on the wire
// as ARM serves them: a VM PUT answers 201 with Azure-AsyncOperation and
// Retry-After, the operation answers InProgress and then Succeeded or
// Failed with an error, and the SDK reads the VM last; a DELETE answers
// 202 with Location and Azure-AsyncOperation (204 for a missing VM);
// If-None-Match: * answers 412 for a VM that exists; lists page with
// nextLink; errors are {"error": {"code", "message"}} with Retry-After on
// 429. The simulator for end-to-end tests is test/cloudsim/azure.
type fakeARM struct {
	srv *httptest.Server

	mu  sync.Mutex
	vms map[string]*fakeVM // by name
	// disks are the managed disks of fakeRG, by name: their zone and the
	// VM they are attached to. A VM's PATCH attaches and detaches them at
	// once (the simulator models the operation).
	disks   map[string]*fakeDisk
	ops     map[string]*fakeOp
	skus    []map[string]any
	subnets []string // subnet resource IDs that exist
	nsgs    []string // network security group resource IDs that exist
	errs    map[string][]fakeError
	// lose is how many of the next calls of an operation are applied and
	// their answers lost (the connection closed).
	lose     map[string]int
	allocErr []fakeError // the next creates' operations fail so
	calls    map[string]int
	bodies   map[string][]map[string]any
	headers  map[string][]http.Header
	pageSize int
	// polls is how many polls of an operation answer InProgress before it
	// ends.
	polls  int
	nextOp int
	nextIP int
}

type fakeVM struct {
	body         map[string]any
	provisioning string // Creating, Succeeded, Failed, Deleting
	power        string // running, stopped, …; "" none yet
	failCode     string
	failMessage  string
	created      time.Time
	ip           string
}

type fakeDisk struct{ zone, vm string }

// addDisk makes a disk of fakeRG in zone and returns its resource ID.
func (f *fakeARM) addDisk(name, zone string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disks[name] = &fakeDisk{zone: zone}
	return fakeDiskID(name)
}

func fakeDiskID(name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/disks/%s", fakeSub, fakeRG, name)
}

// patch applies a VM's PATCH: its data disks (without those
// toBeDetached) become the VM's, at once; 200 with the VM.
func (f *fakeARM) patch(w http.ResponseWriter, name string, body map[string]any) {
	v := f.vms[name]
	if v == nil {
		writeError(w, notFound("Microsoft.Compute/virtualMachines/"+name, fakeRG))
		return
	}
	sp, _ := body["properties"].(map[string]any)["storageProfile"].(map[string]any)
	if sp != nil {
		var keep []any
		for _, d := range f.disks {
			if d.vm == name {
				d.vm = ""
			}
		}
		for _, it := range sp["dataDisks"].([]any) {
			dd := it.(map[string]any)
			id, _ := dd["managedDisk"].(map[string]any)["id"].(string)
			disk := f.disks[id[strings.LastIndex(id, "/")+1:]]
			if detach, _ := dd["toBeDetached"].(bool); detach || disk == nil {
				continue
			}
			disk.vm = name
			keep = append(keep, dd)
		}
		props := maps.Clone(v.body["properties"].(map[string]any))
		storage := maps.Clone(props["storageProfile"].(map[string]any))
		storage["dataDisks"] = keep
		props["storageProfile"] = storage
		v.body = maps.Clone(v.body)
		v.body["properties"] = props
	}
	writeJSON(w, 200, f.vmJSON(name, v, false))
}

type fakeOp struct {
	vm        string
	delete    bool
	pollsLeft int
	err       *fakeError
	done      bool
}

type fakeError struct {
	status     int
	code       string
	message    string
	retryAfter string
}

const (
	fakeSub      = "00000000-0000-0000-0000-00000000c0de"
	fakeRG       = "kip-cells"
	fakeLocation = "eastus"
	fakeSubnetID = "/subscriptions/" + fakeSub + "/resourceGroups/kip-net/providers/Microsoft.Network/virtualNetworks/kip-vnet/subnets/cells"
	fakeNSGID    = "/subscriptions/" + fakeSub + "/resourceGroups/kip-net/providers/Microsoft.Network/networkSecurityGroups/cells"
)

// newFakeARM starts a fake with the subnet fakeSubnetID, the network
// security group fakeNSGID, and a few VM sizes
// in eastus: Standard_B2s and Standard_D2s_v3 in zones 1 to 3,
// Standard_D4s_v3 restricted in zone 3, Standard_E2s_v3 not available to
// the subscription.
func newFakeARM(t testing.TB) *fakeARM {
	f := &fakeARM{
		vms:     map[string]*fakeVM{},
		disks:   map[string]*fakeDisk{},
		ops:     map[string]*fakeOp{},
		subnets: []string{fakeSubnetID},
		nsgs:    []string{fakeNSGID},
		errs:    map[string][]fakeError{},
		lose:    map[string]int{},
		calls:   map[string]int{},
		bodies:  map[string][]map[string]any{},
		headers: map[string][]http.Header{},
		polls:   1,
	}
	zones := []any{"1", "2", "3"}
	sku := func(name, family string, restrictions ...any) map[string]any {
		return map[string]any{"resourceType": "virtualMachines", "name": name, "family": family, "locations": []any{fakeLocation},
			"locationInfo": []any{map[string]any{"location": fakeLocation, "zones": zones}}, "restrictions": restrictions}
	}
	f.skus = []map[string]any{
		sku("Standard_B2s", "standardBSFamily"),
		sku("Standard_D2s_v3", "standardDSv3Family"),
		sku("Standard_D4s_v3", "standardDSv3Family", map[string]any{"type": "Zone", "values": []any{fakeLocation},
			"restrictionInfo": map[string]any{"locations": []any{fakeLocation}, "zones": []any{"3"}}, "reasonCode": "NotAvailableForSubscription"}),
		sku("Standard_E2s_v3", "standardESv3Family", map[string]any{"type": "Location", "values": []any{fakeLocation},
			"restrictionInfo": map[string]any{"locations": []any{fakeLocation}}, "reasonCode": "NotAvailableForSubscription"}),
		{"resourceType": "disks", "name": "Premium_LRS", "locations": []any{fakeLocation}},
	}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeARM) URL() string { return f.srv.URL }

// fail makes the next n calls of operation op answer an error.
func (f *fakeARM) fail(op string, status int, code, message string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.errs[op] = append(f.errs[op], fakeError{status: status, code: code, message: message, retryAfter: "7"})
	}
}

// failAllocation makes the next n creates' operations fail with code.
func (f *fakeARM) failAllocation(code, message string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.allocErr = append(f.allocErr, fakeError{code: code, message: message})
	}
}

func (f *fakeARM) callCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeARM) body(op string, i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[op][i]
}

func (f *fakeARM) header(op string, i int) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[op][i]
}

// set changes a VM under the lock.
func (f *fakeARM) set(name string, change func(*fakeVM)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.vms[name])
}

// vm returns a copy of a VM's record, ok false when it does not exist.
func (f *fakeARM) vm(name string) (fakeVM, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vms[name]
	if !ok {
		return fakeVM{}, false
	}
	return *v, true
}

// evict evicts a Spot VM as Azure does with evictionPolicy Delete: it is
// Deleting now, and gone at finishDeletes.
func (f *fakeARM) evict(name string) {
	f.set(name, func(v *fakeVM) { v.provisioning, v.power = "Deleting", "stopping" })
}

// finishDeletes removes the VMs being deleted.
func (f *fakeARM) finishDeletes() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, v := range f.vms {
		if v.provisioning == "Deleting" {
			delete(f.vms, name)
		}
	}
}

// route is one path the fake serves, named by ARM's operation ID (as
// role.json's test and the simulator name them).
type route struct {
	op   string
	verb string
	re   *regexp.Regexp
}

const (
	subPath = `^/subscriptions/([^/]+)`
	rgPath  = subPath + `/resourceGroups/([^/]+)`
)

var routes = []route{
	{"VirtualMachines_CreateOrUpdate", "PUT", regexp.MustCompile(rgPath + `/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)},
	{"VirtualMachines_Get", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)},
	{"VirtualMachines_Update", "PATCH", regexp.MustCompile(rgPath + `/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)},
	{"Disks_Get", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Compute/disks/([^/]+)$`)},
	{"VirtualMachines_Delete", "DELETE", regexp.MustCompile(rgPath + `/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)},
	{"VirtualMachines_List", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Compute/virtualMachines$`)},
	{"Operations_Get", "GET", regexp.MustCompile(subPath + `/providers/Microsoft\.Compute/locations/([^/]+)/operations/([^/]+)$`)},
	{"OperationResults_Get", "GET", regexp.MustCompile(subPath + `/providers/Microsoft\.Compute/locations/([^/]+)/operationResults/([^/]+)$`)},
	{"ResourceSkus_List", "GET", regexp.MustCompile(subPath + `/providers/Microsoft\.Compute/skus$`)},
	{"NetworkInterfaces_List", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Network/networkInterfaces$`)},
	{"NetworkInterfaces_Get", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Network/networkInterfaces/([^/]+)$`)},
	{"Subnets_Get", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Network/virtualNetworks/([^/]+)/subnets/([^/]+)$`)},
	{"NetworkSecurityGroups_Get", "GET", regexp.MustCompile(rgPath + `/providers/Microsoft\.Network/networkSecurityGroups/([^/]+)$`)},
}

func (f *fakeARM) serve(w http.ResponseWriter, r *http.Request) {
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
		writeError(w, fakeError{status: 404, code: "NoRegisteredProviderFound", message: "the fake does not serve " + r.Method + " " + r.URL.Path})
		return
	}
	var body map[string]any
	if r.Body != nil {
		_ = json.NewDecoder(r.Body).Decode(&body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[rt.op]++
	f.bodies[rt.op] = append(f.bodies[rt.op], body)
	f.headers[rt.op] = append(f.headers[rt.op], r.Header.Clone())
	switch {
	case r.URL.Query().Get("api-version") == "":
		writeError(w, fakeError{status: 400, code: "MissingApiVersionParameter", message: "The api-version query parameter (?api-version=) is required for all requests."})
		return
	case !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "):
		writeError(w, fakeError{status: 401, code: "AuthenticationFailed", message: "no bearer token"})
		return
	}
	if errs := f.errs[rt.op]; len(errs) > 0 {
		f.errs[rt.op] = errs[1:]
		writeError(w, errs[0])
		return
	}
	if f.lose[rt.op] > 0 {
		f.lose[rt.op]--
		defer loseAnswer(w)
		w = httptest.NewRecorder()
	}
	if m[1] != fakeSub && rt.op != "Subnets_Get" {
		writeError(w, fakeError{status: 404, code: "SubscriptionNotFound", message: "The subscription '" + m[1] + "' could not be found."})
		return
	}
	switch rt.op {
	case "VirtualMachines_CreateOrUpdate":
		f.put(w, r, m[3], body)
	case "VirtualMachines_Get":
		f.getVM(w, r, m)
	case "VirtualMachines_Delete":
		f.delete(w, m[3])
	case "VirtualMachines_Update":
		f.patch(w, m[3], body)
	case "Disks_Get":
		f.getDisk(w, m)
	case "VirtualMachines_List":
		var items []any
		for _, name := range slices.Sorted(maps.Keys(f.vms)) {
			items = append(items, f.vmJSON(name, f.vms[name], r.URL.Query().Get("$expand") == "instanceView"))
		}
		f.page(w, r, items)
	case "Operations_Get", "OperationResults_Get":
		f.poll(w, rt.op, m[3])
	case "ResourceSkus_List":
		items := make([]any, 0, len(f.skus))
		for _, s := range f.skus {
			items = append(items, s)
		}
		f.page(w, r, items)
	default:
		f.serveNetwork(w, r, rt.op, m)
	}
}

// getVM answers VirtualMachines_Get; f.mu is held.
func (f *fakeARM) getVM(w http.ResponseWriter, r *http.Request, m []string) {
	// A VM goes on being created whoever looks: a GET moves its
	// create on as a poll does.
	for _, o := range f.ops {
		if o.vm == m[3] && !o.delete && !o.done {
			f.step(o)
		}
	}
	v := f.vms[m[3]]
	if v == nil || m[2] != fakeRG {
		writeError(w, notFound("Microsoft.Compute/virtualMachines/"+m[3], m[2]))
		return
	}
	writeJSON(w, 200, f.vmJSON(m[3], v, r.URL.Query().Get("$expand") == "instanceView"))
}

// getDisk answers Disks_Get; f.mu is held.
func (f *fakeARM) getDisk(w http.ResponseWriter, m []string) {
	d := f.disks[m[3]]
	if d == nil || m[2] != fakeRG {
		writeError(w, notFound("Microsoft.Compute/disks/"+m[3], m[2]))
		return
	}
	out := map[string]any{"id": fakeDiskID(m[3]), "name": m[3], "properties": map[string]any{"diskState": "Unattached"}}
	if d.zone != "" {
		out["zones"] = []any{d.zone}
	}
	if d.vm != "" {
		out["managedBy"] = fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", fakeSub, fakeRG, d.vm)
	}
	writeJSON(w, 200, out)
}

// serveNetwork answers the Microsoft.Network operations; f.mu is held.
func (f *fakeARM) serveNetwork(w http.ResponseWriter, r *http.Request, op string, m []string) {
	switch op {
	case "NetworkInterfaces_Get":
		vm, ok := strings.CutSuffix(m[3], "-nic")
		v := f.vms[vm]
		if !ok || v == nil {
			writeError(w, notFound("Microsoft.Network/networkInterfaces/"+m[3], m[2]))
			return
		}
		writeJSON(w, 200, f.nicJSON(vm, v))
	case "NetworkInterfaces_List":
		var items []any
		for _, name := range slices.Sorted(maps.Keys(f.vms)) {
			items = append(items, f.nicJSON(name, f.vms[name]))
		}
		f.page(w, r, items)
	case "Subnets_Get":
		if !slices.Contains(f.subnets, r.URL.Path) {
			writeError(w, notFound("Microsoft.Network/virtualNetworks/"+m[3]+"/subnets/"+m[4], m[2]))
			return
		}
		writeJSON(w, 200, map[string]any{"id": r.URL.Path, "name": m[4], "properties": map[string]any{"addressPrefix": "10.1.0.0/16", "provisioningState": "Succeeded"}})
	case "NetworkSecurityGroups_Get":
		if !slices.Contains(f.nsgs, r.URL.Path) {
			writeError(w, notFound("Microsoft.Network/networkSecurityGroups/"+m[3], m[2]))
			return
		}
		writeJSON(w, 200, map[string]any{"id": r.URL.Path, "name": m[3], "properties": map[string]any{"provisioningState": "Succeeded"}})
	}
}

// loseAnswer closes the connection of an answer not written, as a network
// that loses it does.
func loseAnswer(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func notFound(resource, rg string) fakeError {
	return fakeError{status: 404, code: "ResourceNotFound", message: fmt.Sprintf("The Resource '%s' under resource group '%s' was not found.", resource, rg)}
}

// page answers a list, pageSize items a page, with nextLink.
func (f *fakeARM) page(w http.ResponseWriter, r *http.Request, items []any) {
	start, _ := strconv.Atoi(r.URL.Query().Get("$skiptoken"))
	end := len(items)
	if f.pageSize > 0 {
		end = min(end, start+f.pageSize)
	}
	out := map[string]any{"value": append([]any{}, items[start:end]...)}
	if end < len(items) {
		q := r.URL.Query()
		q.Set("$skiptoken", strconv.Itoa(end))
		out["nextLink"] = "https://" + r.Host + r.URL.Path + "?" + q.Encode()
	}
	writeJSON(w, 200, out)
}

// put creates a VM: 201 with its operation. If-None-Match: * answers 412
// for a VM that exists; a VM being created or deleted answers 409.
func (f *fakeARM) put(w http.ResponseWriter, r *http.Request, name string, body map[string]any) {
	if v := f.vms[name]; v != nil {
		switch {
		case r.Header.Get("If-None-Match") == "*":
			writeError(w, fakeError{status: 412, code: "PreconditionFailed", message: "The resource already exists: If-None-Match: * refuses to update it."})
		case v.provisioning == "Creating" || v.provisioning == "Deleting":
			writeError(w, fakeError{status: 409, code: "OperationNotAllowed", message: "Operation 'Create' is not allowed on VM '" + name + "' since the VM is " + strings.ToLower(v.provisioning) + "."})
		default:
			v.body = body
			writeJSON(w, 200, f.vmJSON(name, v, false))
		}
		return
	}
	f.nextIP++
	v := &fakeVM{body: body, provisioning: "Creating", created: time.Date(2026, 1, 1, 0, 0, f.nextIP, 0, time.UTC), ip: fmt.Sprintf("10.1.0.%d", 3+f.nextIP)}
	f.vms[name] = v
	op := &fakeOp{vm: name, pollsLeft: f.polls}
	if len(f.allocErr) > 0 {
		op.err = &f.allocErr[0]
		f.allocErr = f.allocErr[1:]
	}
	id := f.newOp(op)
	w.Header().Set("Azure-AsyncOperation", f.opURL(r, "operations", id))
	w.Header().Set("Retry-After", "0")
	writeJSON(w, 201, f.vmJSON(name, v, false))
}

// delete starts a VM's deletion: 202 with Location and
// Azure-AsyncOperation; 204 for a VM that does not exist.
func (f *fakeARM) delete(w http.ResponseWriter, name string) {
	v := f.vms[name]
	if v == nil {
		w.WriteHeader(204)
		return
	}
	v.provisioning = "Deleting"
	id := f.newOp(&fakeOp{vm: name, delete: true, pollsLeft: f.polls})
	w.Header().Set("Location", f.opURL(nil, "operationResults", id))
	w.Header().Set("Azure-AsyncOperation", f.opURL(nil, "operations", id))
	w.Header().Set("Retry-After", "0")
	w.WriteHeader(202)
}

func (f *fakeARM) newOp(op *fakeOp) string {
	f.nextOp++
	id := fmt.Sprintf("op-%d", f.nextOp)
	f.ops[id] = op
	return id
}

func (f *fakeARM) opURL(_ *http.Request, kind, id string) string {
	return fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/%s/%s?api-version=2026-04-01", f.srv.URL, fakeSub, fakeLocation, kind, id)
}

// poll answers an operation: InProgress while polls are left, then its
// end, applied to the VM once.
func (f *fakeARM) poll(w http.ResponseWriter, op, id string) {
	o := f.ops[id]
	if o == nil {
		writeError(w, fakeError{status: 404, code: "NotFound", message: "no operation " + id})
		return
	}
	if !f.step(o) {
		w.Header().Set("Retry-After", "0")
		if op == "OperationResults_Get" {
			w.WriteHeader(202)
			return
		}
		writeJSON(w, 200, map[string]any{"name": id, "status": "InProgress"})
		return
	}
	if op == "OperationResults_Get" {
		w.WriteHeader(204)
		return
	}
	if o.err != nil && !o.delete {
		writeJSON(w, 200, map[string]any{"name": id, "status": "Failed", "error": map[string]any{"code": o.err.code, "message": o.err.message}})
		return
	}
	writeJSON(w, 200, map[string]any{"name": id, "status": "Succeeded"})
}

// step moves an operation on by one look (a poll, or a GET of its VM): it
// stays in progress while polls are left, then ends, its end applied to
// the VM once. It reports whether the operation has ended.
func (f *fakeARM) step(o *fakeOp) bool {
	if o.done {
		return true
	}
	if o.pollsLeft > 0 {
		o.pollsLeft--
		return false
	}
	o.done = true
	v := f.vms[o.vm]
	switch {
	case o.delete:
		delete(f.vms, o.vm)
		for _, d := range f.disks {
			if d.vm == o.vm {
				d.vm = ""
			}
		}
	case v == nil:
	case o.err != nil:
		v.provisioning, v.failCode, v.failMessage = "Failed", o.err.code, o.err.message
	default:
		v.provisioning, v.power = "Succeeded", "running"
	}
	return true
}

// vmJSON is a VM as ARM answers it: the PUT's body with the fields ARM
// sets, and the instance view when asked for.
func (f *fakeARM) vmJSON(name string, v *fakeVM, instanceView bool) map[string]any {
	out := maps.Clone(v.body)
	out["name"] = name
	out["id"] = fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", fakeSub, fakeRG, name)
	out["type"] = "Microsoft.Compute/virtualMachines"
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	props["provisioningState"] = v.provisioning
	props["timeCreated"] = v.created.Format(time.RFC3339)
	props["vmId"] = "11111111-2222-3333-4444-" + fmt.Sprintf("%012d", len(name))
	delete(props, "userData") // ARM answers userData only with $expand=userData
	if instanceView {
		statuses := []any{map[string]any{"code": "ProvisioningState/" + strings.ToLower(v.provisioning), "level": "Info"}}
		if v.provisioning == "Failed" {
			statuses[0] = map[string]any{"code": "ProvisioningState/failed/" + v.failCode, "level": "Error", "message": v.failMessage}
		}
		if v.power != "" {
			statuses = append(statuses, map[string]any{"code": "PowerState/" + v.power, "level": "Info"})
		}
		props["instanceView"] = map[string]any{"computerName": name, "statuses": statuses}
	}
	out["properties"] = props
	return out
}

// nicJSON is the inline NIC ARM creates with a VM.
func (f *fakeARM) nicJSON(vm string, v *fakeVM) map[string]any {
	prefix := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/", fakeSub, fakeRG)
	return map[string]any{
		"name": vm + "-nic", "id": prefix + "Microsoft.Network/networkInterfaces/" + vm + "-nic",
		"properties": map[string]any{
			"primary":        true,
			"virtualMachine": map[string]any{"id": prefix + "Microsoft.Compute/virtualMachines/" + vm},
			"ipConfigurations": []any{map[string]any{"name": "ipconfig1", "properties": map[string]any{
				"primary": true, "privateIPAddress": v.ip, "subnet": map[string]any{"id": fakeSubnetID},
			}}, map[string]any{"name": "ipconfig-pod", "properties": map[string]any{
				"primary": false, "privateIPAddress": strings.Replace(v.ip, "10.1.0.", "10.1.1.", 1), "subnet": map[string]any{"id": fakeSubnetID},
			}}},
		},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers an error as ARM does.
func writeError(w http.ResponseWriter, e fakeError) {
	if e.status == 429 && e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	w.Header().Set("x-ms-failure-cause", "gateway")
	writeJSON(w, e.status, map[string]any{"error": map[string]any{"code": e.code, "message": e.message}})
}
