package azuresim

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Provisioning states of a VM, as ARM writes them.
const (
	StateCreating  = "Creating"
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
	StateDeleting  = "Deleting"
	// StateUpdating is a VM whose data disks are attaching or detaching.
	StateUpdating = "Updating"
)

// Power states of a VM's instance view ("" while it has none).
const (
	PowerStarting    = "PowerState/starting"
	PowerRunning     = "PowerState/running"
	PowerStopping    = "PowerState/stopping"
	PowerStopped     = "PowerState/stopped"
	PowerDeallocated = "PowerState/deallocated"
)

// VM is what the server knows of a VM, as it is at the time it was read.
type VM struct {
	ResourceGroup string
	Name          string
	VMID          string
	Size          string
	Zone          string // "" for a regional VM
	// ProvisioningState and PowerState are the instance view's.
	ProvisioningState string
	PowerState        string
	Tags              map[string]string
	// Spot is priority Spot (or Low); EvictionPolicy Delete or Deallocate.
	Spot           bool
	EvictionPolicy string
	// Evicted is true once Evict reclaimed it.
	Evicted bool
	// Gone is true once a deleted VM no longer exists.
	Gone bool
	// Address is the NIC's private IP: the cell's address with a
	// CellStarter ("" until the cell started).
	Address string
	// PodAddress is the private IP of the NIC's first secondary IP
	// configuration, where it has one: the cell's pod address
	// (simcells.Addresses.Pod) when it has one, else an address of the
	// subnet ("" until the cell started).
	PodAddress string
	// NIC is the name of the NIC created from its
	// networkInterfaceConfigurations.
	NIC string
	// Bootstrap is its base64-decoded userData.
	Bootstrap []byte
	// AgentStarted is true once its cell's agent started; Silent when it
	// never will (SilenceAgents).
	AgentStarted, Silent bool
	Created              time.Time
	// Body is the VM resource the client sent, decoded from JSON.
	Body map[string]any
}

// vm is one VM created by a PUT; its states are computed when read.
type vm struct {
	key      vmKey
	rg, name string // as the first PUT spelled them
	seq      uint64
	vmID     string
	size     Size
	zone     string
	spot     bool
	eviction string
	tags     map[string]string
	body     map[string]any
	nicName  string
	// secondaries is how many secondary IP configurations its NIC has.
	secondaries int
	osDisk      string
	createdAt   time.Time
	allocAt     time.Time
	runningAt   time.Time
	// failure is the allocation failure its create ends with at allocAt
	// (nil: allocated).
	failure *armError
	// startFailed: its cell could not start; it is Failed with
	// OSProvisioningTimedOut from then.
	startFailed bool
	// replaced: a later PUT retried this Failed VM as a new record.
	replaced bool
	// etag counts its model's changes: ARM's VM etag, which If-Match
	// compares.
	etag int
	// disksBusy reports whether its data disks are attaching or
	// detaching (disks.go); the caller holds s.mu.
	disksBusy func(now time.Time) bool

	cell simcells.Cell

	// deleting: deleted or evicted (policy Delete); it is Deleting until
	// goneAt and until its cell stopped, then gone.
	deleting    bool
	goneAt      time.Time
	evicted     bool
	deallocated bool
}

// gone reports whether a deleted VM no longer exists.
func (v *vm) gone(now time.Time) bool {
	return v.replaced || v.deleting && v.cell.Stopped && !now.Before(v.goneAt) && !now.Before(v.cell.StoppedAt)
}

// failed is the error that made the VM Failed, or nil.
func (v *vm) failed(now time.Time) *armError {
	switch {
	case v.failure != nil && !now.Before(v.allocAt):
		return v.failure
	case v.startFailed:
		return &armError{Status: http.StatusOK, Code: CodeOSProvisioningTimedOut,
			Message: "OS Provisioning for VM '" + v.name + "' did not finish in the allotted time. The VM may still finish provisioning successfully."}
	}
	return nil
}

func (v *vm) provisioningState(now time.Time) string {
	switch {
	case v.deleting:
		return StateDeleting
	case v.failed(now) != nil:
		return StateFailed
	case v.failure != nil || now.Before(v.runningAt) || !v.cell.Started:
		return StateCreating
	case v.disksBusy != nil && v.disksBusy(now):
		return StateUpdating
	}
	return StateSucceeded
}

func (v *vm) powerState(now time.Time) string {
	switch {
	case v.deallocated:
		return PowerDeallocated
	case v.deleting && v.cell.Stopped:
		return PowerStopped
	case v.deleting:
		return PowerStopping
	case v.failed(now) != nil, now.Before(v.allocAt):
		return ""
	case v.provisioningState(now) == StateCreating:
		return PowerStarting
	}
	return PowerRunning
}

func (v *vm) snapshot(now time.Time) VM {
	return VM{
		ResourceGroup: v.rg, Name: v.name, VMID: v.vmID, Size: v.size.Name, Zone: v.zone,
		ProvisioningState: v.provisioningState(now), PowerState: v.powerState(now), Tags: maps.Clone(v.tags),
		Spot: v.spot, EvictionPolicy: v.eviction, Evicted: v.evicted, Gone: v.gone(now),
		Address: v.cell.Address, PodAddress: v.secondaryAddress(0), NIC: v.nicName, Bootstrap: v.cell.Bootstrap,
		AgentStarted: v.cell.AgentStarted, Silent: v.cell.Silent, Created: v.createdAt, Body: v.body,
	}
}

// secondaryAddress is the private IP of the k-th secondary IP
// configuration of the VM's NIC, once the cell has its address: the
// cell's pod address for the first where the CellStarter gave one, else
// an address of 10.0.128.0/17 (the primary addresses without a
// CellStarter come from below it); "" when there is no such
// configuration.
func (v *vm) secondaryAddress(k int) string {
	if k >= v.secondaries || v.cell.Address == "" {
		return ""
	}
	if k == 0 && v.cell.PodAddress != "" {
		return v.cell.PodAddress
	}
	return fmt.Sprintf("10.0.%d.%d", 128+uint64(k)*8+v.seq/250, v.seq%250+4)
}

// live returns the VM named name in rg that exists, or nil. The caller
// holds s.mu.
func (s *Server) live(rg, name string, now time.Time) *vm {
	v := s.vms[keyOf(rg, name)]
	if v == nil || v.gone(now) {
		return nil
	}
	return v
}

// vmNamePattern is ARM's rule for a VM's name: 1 to 64 letters, digits,
// underscores, periods and hyphens, starting with a letter or digit and
// ending with a letter, digit or underscore.
var vmNamePattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?$`)

// computerNamePattern is a Linux computer name: 1 to 64 letters, digits,
// hyphens and periods, not only digits.
var computerNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$`)

// spec is what the simulator reads and checks of a PUT's body.
type spec struct {
	Location string            `json:"location"`
	Zones    []string          `json:"zones"`
	Tags     map[string]string `json:"tags"`
	Props    struct {
		Hardware struct {
			VMSize string `json:"vmSize"`
		} `json:"hardwareProfile"`
		Storage struct {
			Image  map[string]any `json:"imageReference"`
			OSDisk struct {
				CreateOption string `json:"createOption"`
				DeleteOption string `json:"deleteOption"`
			} `json:"osDisk"`
			DataDisks []dataDiskSpec `json:"dataDisks"`
		} `json:"storageProfile"`
		OS      *osProfileSpec `json:"osProfile"`
		Network struct {
			APIVersion string           `json:"networkApiVersion"`
			Configs    []nicConfigSpec  `json:"networkInterfaceConfigurations"`
			NICs       []map[string]any `json:"networkInterfaces"`
		} `json:"networkProfile"`
		Priority       string       `json:"priority"`
		EvictionPolicy string       `json:"evictionPolicy"`
		Billing        *billingSpec `json:"billingProfile"`
		UserData       string       `json:"userData"`
	} `json:"properties"`
}

// osProfileSpec is what the simulator checks of properties.osProfile.
type osProfileSpec struct {
	ComputerName  string `json:"computerName"`
	AdminUsername string `json:"adminUsername"`
	AdminPassword string `json:"adminPassword"`
	CustomData    string `json:"customData"`
	Linux         *struct {
		DisablePassword bool `json:"disablePasswordAuthentication"`
		SSH             struct {
			PublicKeys []any `json:"publicKeys"`
		} `json:"ssh"`
	} `json:"linuxConfiguration"`
}

// billingSpec is properties.billingProfile.
type billingSpec struct {
	MaxPrice *float64 `json:"maxPrice"`
}

// nicConfigSpec is one of networkProfile.networkInterfaceConfigurations.
type nicConfigSpec struct {
	Name  string `json:"name"`
	Props struct {
		Primary      *bool  `json:"primary"`
		DeleteOption string `json:"deleteOption"`
		NSG          *struct {
			ID string `json:"id"`
		} `json:"networkSecurityGroup"`
		IPConfigs []struct {
			Name  string `json:"name"`
			Props struct {
				Primary *bool `json:"primary"`
				Subnet  *struct {
					ID string `json:"id"`
				} `json:"subnet"`
			} `json:"properties"`
		} `json:"ipConfigurations"`
	} `json:"properties"`
}

// reservedTagChars are the characters ARM refuses in a tag's name.
const reservedTagChars = `<>%&\?/`

// check validates a PUT's body as ARM and Compute do, and returns the
// VM's size, zone and NIC configuration.
func (s *Server) check(rg, name string, sp *spec) (Size, string, *nicConfigSpec, error) {
	if !vmNamePattern.MatchString(name) {
		return Size{}, "", nil, &armError{Status: http.StatusBadRequest, Code: "InvalidResourceName",
			Message: fmt.Sprintf("Resource name %s is invalid. The name can be up to 64 characters long. Valid characters include alphanumeric, underscore, hyphen and period (except at end).", name)}
	}
	switch {
	case sp.Location == "":
		return Size{}, "", nil, &armError{Status: http.StatusBadRequest, Code: "LocationRequired", Message: "The location property is required for this definition."}
	case !strings.EqualFold(strings.ReplaceAll(sp.Location, " ", ""), s.opts.Location):
		return Size{}, "", nil, &armError{Status: http.StatusBadRequest, Code: "LocationNotAvailableForResourceType",
			Message: fmt.Sprintf("The provided location '%s' is not available for resource type 'Microsoft.Compute/virtualMachines'. List of available regions for the resource type is '%s'.", sp.Location, s.opts.Location)}
	}
	for k := range sp.Tags {
		if strings.ContainsAny(k, reservedTagChars) {
			return Size{}, "", nil, &armError{Status: http.StatusBadRequest, Code: "InvalidTagNameCharacters",
				Message: fmt.Sprintf("The tag names '%s' have reserved characters '<,>,%%,&,\\,?,/' or control characters.", k)}
		}
	}
	if len(sp.Tags) > 50 {
		return Size{}, "", nil, &armError{Status: http.StatusBadRequest, Code: "InvalidTemplate", Message: "The number of tags exceeds the limit of 50."}
	}
	p := &sp.Props
	size, ok := s.sizes[strings.ToLower(p.Hardware.VMSize)]
	if !ok {
		return Size{}, "", nil, invalidParameter("vmSize", fmt.Sprintf("The value %s provided for the VM size is not valid. The valid sizes in the current region are listed by resourceSkus.", p.Hardware.VMSize))
	}
	zone := ""
	switch len(sp.Zones) {
	case 0:
	case 1:
		zone = sp.Zones[0]
		if !containsFold(s.opts.Zones, zone) {
			return Size{}, "", nil, invalidParameter("zones", fmt.Sprintf("The zone(s) '%s' for resource 'Microsoft.Compute/virtualMachines/%s' is not supported. The supported zones for location '%s' are '%s'", zone, name, s.opts.Location, strings.Join(s.opts.Zones, ",")))
		}
	default:
		return Size{}, "", nil, invalidParameter("zones", "A virtual machine can be placed in one availability zone only.")
	}
	if p.Storage.Image == nil {
		return Size{}, "", nil, invalidParameter("imageReference", "Required parameter 'imageReference' is missing (null).")
	}
	if c := p.Storage.OSDisk.CreateOption; c != "" && c != "FromImage" {
		return Size{}, "", nil, invalidParameter("osDisk.createOption", fmt.Sprintf("The simulator creates OS disks FromImage only, not %s.", c))
	}
	if err := checkOSProfile(name, p.OS); err != nil {
		return Size{}, "", nil, err
	}
	if err := checkPriority(p.Priority, p.EvictionPolicy, p.Billing); err != nil {
		return Size{}, "", nil, err
	}
	if p.UserData != "" {
		if b, err := base64.StdEncoding.DecodeString(p.UserData); err != nil || len(b) > 64<<10 {
			return Size{}, "", nil, invalidParameter("userData", "The value of parameter userData is invalid: it must be base64 of at most 64 KB.")
		}
	}
	nc, err := s.checkNetwork(rg, p.Network.APIVersion, p.Network.Configs, p.Network.NICs)
	return size, zone, nc, err
}

func containsFold(list []string, s string) bool {
	for _, it := range list {
		if strings.EqualFold(it, s) {
			return true
		}
	}
	return false
}

// checkOSProfile checks the OS profile as Compute does for a Linux VM
// created from an image.
func checkOSProfile(name string, os *osProfileSpec) error {
	if os == nil {
		return invalidParameter("osProfile", "Required parameter 'osProfile' is missing (null).")
	}
	computer := os.ComputerName
	if computer == "" {
		computer = name
	}
	if !computerNamePattern.MatchString(computer) || strings.Trim(computer, "0123456789") == "" {
		return invalidParameter("computerName", "Linux host name cannot exceed 64 characters in length or contain the following characters: ` ~ ! @ # $ % ^ & * ( ) = + _ [ ] { } \\ | ; : ' \" , < > / ?.")
	}
	if os.AdminUsername == "" {
		return invalidParameter("adminUsername", "Required parameter 'adminUsername' is missing (null).")
	}
	if os.Linux != nil && os.Linux.DisablePassword {
		if len(os.Linux.SSH.PublicKeys) == 0 {
			return invalidParameter("linuxConfiguration", "Authentication using either SSH or by user name and password must be enabled in Linux profile.")
		}
	} else if os.AdminPassword == "" {
		return invalidParameter("adminPassword", "Required parameter 'adminPassword' is missing (null).")
	}
	if os.CustomData != "" {
		if _, err := base64.StdEncoding.DecodeString(os.CustomData); err != nil {
			return invalidParameter("customData", "Custom data in OSProfile must be in Base64 encoding and with a maximum length of 87380 characters.")
		}
	}
	return nil
}

// checkPriority checks priority, evictionPolicy and billingProfile as
// Compute does.
func checkPriority(priority, eviction string, billing *billingSpec) error {
	spot := priority == "Spot" || priority == "Low"
	switch priority {
	case "", "Regular", "Spot", "Low":
	default:
		return invalidParameter("priority", fmt.Sprintf("The value '%s' of parameter 'priority' is invalid: Regular, Low or Spot.", priority))
	}
	switch {
	case eviction != "" && eviction != "Delete" && eviction != "Deallocate":
		return invalidParameter("evictionPolicy", fmt.Sprintf("The value '%s' of parameter 'evictionPolicy' is invalid: Delete or Deallocate.", eviction))
	case eviction != "" && !spot:
		return invalidParameter("evictionPolicy", "Eviction policy can be set only on Azure Spot Virtual Machines.")
	}
	if billing != nil && billing.MaxPrice != nil {
		if !spot {
			return invalidParameter("billingProfile", "Max price can be set only on Azure Spot Virtual Machines.")
		}
		if mp := *billing.MaxPrice; mp != -1 && mp <= 0 {
			return invalidParameter("billingProfile.maxPrice", fmt.Sprintf("Max price %v is invalid: it must be -1 or greater than zero.", mp))
		}
	}
	return nil
}

// checkNetwork checks the network profile: the simulator models one
// NIC created from networkInterfaceConfigurations (the primary one), on
// a subnet that exists, with a network security group that exists.
func (s *Server) checkNetwork(rg, apiVersion string, configs []nicConfigSpec, refs []map[string]any) (*nicConfigSpec, error) {
	switch {
	case len(refs) > 0:
		return nil, invalidParameter("networkInterfaces", "The simulator creates NICs from networkInterfaceConfigurations only; networkInterfaces references are not modelled.")
	case len(configs) == 0:
		return nil, invalidParameter("networkProfile", "Required parameter 'networkProfile' is missing (null).")
	case apiVersion == "":
		return nil, invalidParameter("networkProfile.networkApiVersion", "networkApiVersion must be set when networkInterfaceConfigurations are specified.")
	}
	nc := &configs[0]
	for i := range configs {
		if configs[i].Props.Primary != nil && *configs[i].Props.Primary {
			nc = &configs[i]
		}
	}
	if nc.Name == "" || len(nc.Props.IPConfigs) == 0 || nc.Props.IPConfigs[0].Name == "" {
		return nil, invalidParameter("networkInterfaceConfigurations", "A network interface configuration needs a name and an ipConfiguration with a name.")
	}
	if d := nc.Props.DeleteOption; d != "" && d != "Delete" && d != "Detach" {
		return nil, invalidParameter("deleteOption", fmt.Sprintf("The value '%s' of parameter 'deleteOption' is invalid: Delete or Detach.", d))
	}
	nicID := s.resourceID(rg, "Microsoft.Network/networkInterfaces", nc.Name)
	primaries, names := 0, map[string]bool{}
	for _, ic := range nc.Props.IPConfigs {
		if ic.Name == "" || names[strings.ToLower(ic.Name)] {
			return nil, invalidParameter("ipConfigurations", fmt.Sprintf("The ipConfigurations of network interface configuration %s need names, each its own.", nc.Name))
		}
		names[strings.ToLower(ic.Name)] = true
		sub := ic.Props.Subnet
		if sub == nil || sub.ID == "" {
			return nil, invalidParameter("subnet", "Required parameter 'subnet' of ipConfiguration is missing (null).")
		}
		if _, ok := s.subnetByID(sub.ID); !ok {
			return nil, invalidReference(sub.ID, nicID)
		}
		if ic.Props.Primary != nil && *ic.Props.Primary {
			primaries++
		}
	}
	// One IP configuration is the primary whatever it says; of several,
	// exactly one says so.
	if n := len(nc.Props.IPConfigs); n > 1 && primaries != 1 {
		return nil, &armError{Status: http.StatusBadRequest, Code: "NetworkInterfaceMustHaveOneOneIPConfigAsPrimary",
			Message: fmt.Sprintf("Network Interface %s specifies multiple IPConfigurations but %d of the IPConfigurations are specified as Primary.", nc.Name, primaries)}
	}
	if nsg := nc.Props.NSG; nsg != nil && !s.securityGroupExists(nsg.ID) {
		return nil, invalidReference(nsg.ID, nicID)
	}
	return nc, nil
}

// invalidReference is Network's 400 for a resource a request names that
// does not exist.
func invalidReference(id, by string) *armError {
	return &armError{Status: http.StatusBadRequest, Code: "InvalidResourceReference",
		Message: fmt.Sprintf("Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.", id, by)}
}

func (s *Server) securityGroupExists(id string) bool {
	for _, g := range s.opts.SecurityGroups {
		if strings.EqualFold(s.SecurityGroupID(g), id) {
			return true
		}
	}
	return false
}

// readSpec reads a PUT's body: the raw JSON object and what the
// simulator checks of it.
func readSpec(r *http.Request) (map[string]any, *spec, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the request body: %w", err)
	}
	var body map[string]any
	var sp spec
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, nil, &armError{Status: http.StatusBadRequest, Code: "InvalidRequestContent", Message: "The request content was invalid and could not be deserialized: " + err.Error()}
	}
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, nil, &armError{Status: http.StatusBadRequest, Code: "InvalidRequestContent", Message: "The request content was invalid and could not be deserialized: " + err.Error()}
	}
	return body, &sp, nil
}

// putVM answers VirtualMachines_CreateOrUpdate. A new VM is 201 with
// provisioningState Creating and an Azure-AsyncOperation to poll; a PUT of
// a VM that exists and succeeded updates its tags (200, an operation that
// succeeded); a Failed VM is created again; one being created is 409
// Conflict and one being deleted 409 OperationNotAllowed. Quota and
// SkuNotAvailable refuse the PUT itself (409); an allocation failure ends
// the operation Failed.
func (s *Server) putVM(q request) (*answer, error) {
	body, sp, err := readSpec(q.r)
	if err != nil {
		return nil, err
	}
	size, zone, nc, err := s.check(q.rg, q.name, sp)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.settleDisksLocked(now)
	old := s.live(q.rg, q.name, now)
	if err := ifMatch(q.r, old); err != nil {
		return nil, err
	}
	if old != nil && q.r.Header.Get("If-None-Match") == "*" {
		// A create-only PUT: ARM refuses it for a VM that exists, in any
		// state.
		return nil, &armError{Status: http.StatusPreconditionFailed, Code: CodePreconditionFailed,
			Message: "The condition specified using HTTP conditional header(s) is not met."}
	}
	if old != nil {
		switch old.provisioningState(now) {
		case StateCreating:
			return nil, &armError{Status: http.StatusConflict, Code: CodeConflict,
				Message: fmt.Sprintf("Operation 'PUT' is not allowed on VM '%s' since the VM is being created. Retry the operation after the VM is created.", old.name)}
		case StateDeleting:
			return nil, &armError{Status: http.StatusConflict, Code: CodeOperationNotAllowed,
				Message: fmt.Sprintf("Operation 'PUT' is not allowed on VM '%s' since the VM is marked for deletion. You can only retry the Delete operation (or wait for an ongoing one to complete).", old.name)}
		case StateUpdating:
			return nil, conflictingUpdate()
		case StateSucceeded:
			return s.updateVM(q, old, sp, size, zone, now)
		}
		// Failed: the PUT creates it again, as ARM retries a failed create.
	}
	if len(sp.Props.Storage.DataDisks) > 0 {
		return nil, invalidParameter("dataDisks", "The simulator attaches data disks to a VM that exists (a later PUT or PATCH), not at its create.")
	}
	if err := s.refusal(size, zone, sp); err != nil {
		s.log.Info("PUT refused", "vm", q.name, "size", size.Name, "zone", zone, "code", err.Code)
		return nil, err
	}
	v := s.create(q, body, sp, size, zone, nc, old, now)
	op := s.newOperation("create", v, now)
	// ARM answers a create with the VM Creating, whatever follows.
	return &answer{status: createdStatus(old), header: s.lroHeader(q.r, op, false), body: withState(s.vmJSON(v, now, false, false), StateCreating)}, nil
}

// createdStatus is 201 for a new VM, 200 for one created again.
func createdStatus(old *vm) int {
	if old != nil {
		return http.StatusOK
	}
	return http.StatusCreated
}

// updateVM answers a PUT of a VM that succeeded: its tags change; the
// properties a VM cannot change are 409 PropertyChangeNotAllowed.
func (s *Server) updateVM(q request, v *vm, sp *spec, size Size, zone string, now time.Time) (*answer, error) {
	spot := sp.Props.Priority == "Spot" || sp.Props.Priority == "Low"
	for prop, changed := range map[string]bool{"zones": zone != v.zone, "priority": spot != v.spot, "hardwareProfile.vmSize": size.Name != v.size.Name} {
		if changed {
			return nil, &armError{Status: http.StatusConflict, Code: "PropertyChangeNotAllowed",
				Message: fmt.Sprintf("Changing property '%s' is not allowed.", prop), Target: prop}
		}
	}
	// The whole model is PUT: the data disks it lists are the VM's.
	change, err := s.planDisks(v, sp.Props.Storage.DataDisks, now)
	if err != nil {
		return nil, err
	}
	v.tags = maps.Clone(sp.Tags)
	return s.update(q, v, change, now), nil
}

// update applies a VM update that passed its checks: its data disks'
// change under a new operation, which ends when they have attached or
// detached; the VM's etag changes. The caller holds s.mu.
func (s *Server) update(q request, v *vm, change *diskChange, now time.Time) *answer {
	v.etag++
	op := &operation{id: newGUID(), kind: "update", vm: v, startedAt: now}
	if !change.empty() {
		op.pending = func(now time.Time) bool { return !s.diskOpSettled(op, now) }
		s.applyDisks(v, change, op, now)
	}
	s.operations[op.id] = op
	op.settle(now)
	return &answer{status: http.StatusOK, header: s.lroHeader(q.r, op, false), body: withState(s.vmJSON(v, now, false, false), StateUpdating)}
}

// conflictingUpdate is Compute's answer to a VM update while another is
// under way.
func conflictingUpdate() *armError {
	return &armError{Status: http.StatusConflict, Code: CodeConflict, Message: "The request failed due to conflict with a concurrent request."}
}

// ifMatch checks a PUT's or PATCH's If-Match against the VM's etag: 412
// PreconditionFailed when they differ, or when there is no VM. "*"
// matches any VM.
func ifMatch(r *http.Request, v *vm) error {
	want := r.Header.Get("If-Match")
	if want == "" {
		return nil
	}
	if v == nil || want != "*" && want != v.etagValue() {
		return &armError{Status: http.StatusPreconditionFailed, Code: CodePreconditionFailed,
			Message: "The condition specified using HTTP conditional header(s) is not met."}
	}
	return nil
}

// etagValue is the VM's ETag, as ARM writes it (a quoted number).
func (v *vm) etagValue() string { return fmt.Sprintf("%q", fmt.Sprint(v.etag)) }

// patchSpec is what the simulator reads of a VM PATCH
// (VirtualMachineUpdate): its tags and data disks, each only when sent.
type patchSpec struct {
	Tags  *map[string]string `json:"tags"`
	Props struct {
		Storage *struct {
			DataDisks *[]dataDiskSpec `json:"dataDisks"`
		} `json:"storageProfile"`
		Hardware *struct {
			VMSize string `json:"vmSize"`
		} `json:"hardwareProfile"`
	} `json:"properties"`
	Zones []string `json:"zones"`
}

// patchVM answers VirtualMachines_Update (PATCH): the tags and the data
// disks it sends replace the VM's (a list sent is the whole list, as with
// PUT); what it leaves out stays. It is 200 with the VM Updating and an
// Azure-AsyncOperation that ends once the disks attached and detached. A
// VM that does not exist is 404; one being created, updated or deleted
// is 409 as for PUT; If-Match is checked against the VM's etag.
func (s *Server) patchVM(q request) (*answer, error) {
	raw, err := io.ReadAll(io.LimitReader(q.r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	var sp patchSpec
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, &armError{Status: http.StatusBadRequest, Code: "InvalidRequestContent", Message: "The request content was invalid and could not be deserialized: " + err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.settleDisksLocked(now)
	v := s.live(q.rg, q.name, now)
	if v == nil {
		return nil, notFound("Microsoft.Compute/virtualMachines", q.rg, q.name)
	}
	if err := ifMatch(q.r, v); err != nil {
		return nil, err
	}
	switch v.provisioningState(now) {
	case StateCreating, StateUpdating:
		return nil, conflictingUpdate()
	case StateDeleting:
		return nil, &armError{Status: http.StatusConflict, Code: CodeOperationNotAllowed,
			Message: fmt.Sprintf("Operation 'PATCH' is not allowed on VM '%s' since the VM is marked for deletion. You can only retry the Delete operation (or wait for an ongoing one to complete).", v.name)}
	case StateFailed:
		return nil, &armError{Status: http.StatusConflict, Code: CodeOperationNotAllowed,
			Message: fmt.Sprintf("Operation 'PATCH' is not allowed on VM '%s' since its provisioning failed.", v.name)}
	}
	if h := sp.Props.Hardware; h != nil && h.VMSize != "" && !strings.EqualFold(h.VMSize, v.size.Name) {
		return nil, &armError{Status: http.StatusConflict, Code: "PropertyChangeNotAllowed", Target: "hardwareProfile.vmSize", Message: "The simulator does not resize VMs."}
	}
	if sp.Zones != nil && (len(sp.Zones) != 1 || sp.Zones[0] != v.zone) {
		return nil, &armError{Status: http.StatusConflict, Code: "PropertyChangeNotAllowed", Target: "zones", Message: "Changing property 'zones' is not allowed."}
	}
	change := &diskChange{}
	if st := sp.Props.Storage; st != nil && st.DataDisks != nil {
		if change, err = s.planDisks(v, *st.DataDisks, now); err != nil {
			return nil, err
		}
	}
	if sp.Tags != nil {
		for k := range *sp.Tags {
			if strings.ContainsAny(k, reservedTagChars) {
				return nil, &armError{Status: http.StatusBadRequest, Code: "InvalidTagNameCharacters",
					Message: fmt.Sprintf("The tag names '%s' have reserved characters '<,>,%%,&,\\,?,/' or control characters.", k)}
			}
		}
		v.tags = maps.Clone(*sp.Tags)
	}
	return s.update(q, v, change, now), nil
}

// withState sets the provisioningState of a VM's JSON.
func withState(vm map[string]any, state string) map[string]any {
	vm["properties"].(map[string]any)["provisioningState"] = state
	return vm
}

// create records a new VM (replacing a Failed one), its NIC, and starts
// its cell and its metadata service (imds.go) unless its allocation
// fails. The caller holds s.mu.
func (s *Server) create(q request, body map[string]any, sp *spec, size Size, zone string, nc *nicConfigSpec, old *vm, now time.Time) *vm {
	s.seq++
	v := &vm{
		key: keyOf(q.rg, q.name), rg: q.rg, name: q.name, seq: s.seq, vmID: newGUID(), size: size, zone: zone,
		spot: sp.Props.Priority == "Spot" || sp.Props.Priority == "Low", tags: maps.Clone(sp.Tags), body: body,
		nicName: nc.Name, osDisk: fmt.Sprintf("%s_OsDisk_1_%s", q.name, strings.ReplaceAll(newGUID(), "-", "")),
		createdAt: now, allocAt: now.Add(s.allocDelay), runningAt: now.Add(s.allocDelay + s.bootDelay),
	}
	if old != nil {
		old.replaced = true
		v.vmID, v.rg, v.name = old.vmID, old.rg, old.name
		s.cells.StopLocked(cellVM{s, old})
		// Its metadata stops now, before this VM's is served where the
		// CellStarter may want it: at the same socket.
		s.stopIMDS(old)
	}
	if v.spot {
		v.eviction = sp.Props.EvictionPolicy
		if v.eviction == "" {
			v.eviction = "Deallocate"
		}
	}
	bootstrap, _ := base64.StdEncoding.DecodeString(sp.Props.UserData)
	v.cell = simcells.Cell{ID: q.name, Type: size.Name, Bootstrap: bootstrap, LogAttr: sp.Tags["kip-cell"]}
	if code, short := s.allocFails.Short(size.Name, zone); short {
		v.failure = allocationError(code)
	}
	v.disksBusy = func(now time.Time) bool { return s.vmDisksBusy(v, now) }
	s.vms[v.key] = v
	s.order = append(s.order, v)
	s.addNIC(v, nc)
	s.log.Info("VM created", "vm", q.name, "size", size.Name, "zone", zone, "spot", v.spot, "allocation", allocationLog(v.failure))
	if v.failure == nil {
		if !s.cells.HasStarter() {
			v.cell.Address = fmt.Sprintf("10.0.%d.%d", s.seq/250, s.seq%250+4)
		}
		s.startIMDS(v)
		s.cells.StartLocked(cellVM{s, v})
	}
	return v
}

func allocationLog(e *armError) string {
	if e == nil {
		return "ok"
	}
	return e.Code
}

// getVM answers VirtualMachines_Get ($expand=instanceView or userData).
func (s *Server) getVM(q request) (*answer, error) {
	expand := strings.ToLower(q.r.URL.Query().Get("$expand"))
	if expand != "" && expand != "instanceview" && expand != "userdata" {
		return nil, invalidParameter("$expand", fmt.Sprintf("The value '%s' of parameter '$expand' is invalid: instanceView or userData.", expand))
	}
	return s.readVM(q, func(v *vm, now time.Time) any {
		return s.vmJSON(v, now, expand == "instanceview", expand == "userdata")
	})
}

// getInstanceView answers VirtualMachines_InstanceView.
func (s *Server) getInstanceView(q request) (*answer, error) {
	return s.readVM(q, s.instanceView)
}

// readVM answers with render of the VM q names, or 404.
func (s *Server) readVM(q request, render func(*vm, time.Time) any) (*answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	v := s.live(q.rg, q.name, now)
	if v == nil {
		return nil, notFound("Microsoft.Compute/virtualMachines", q.rg, q.name)
	}
	return answerOK(render(v, now)), nil
}

// deleteVM answers VirtualMachines_Delete: 202 with Location and
// Azure-AsyncOperation, the VM Deleting for the shutdown delay and until
// its cell stopped, then gone with its NIC (deleteOption Delete) and OS
// disk; 204 for a VM that does not exist. Deleting a VM being created
// cancels its create.
func (s *Server) deleteVM(q request) (*answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	v := s.live(q.rg, q.name, now)
	if v == nil {
		return &answer{status: http.StatusNoContent}, nil
	}
	s.beginDelete(v, now)
	op := s.newOperation("delete", v, now)
	return &answer{status: http.StatusAccepted, header: s.lroHeader(q.r, op, true)}, nil
}

// beginDelete starts deleting a VM that is not being deleted: its create,
// if still running, ends Canceled. The caller holds s.mu.
func (s *Server) beginDelete(v *vm, now time.Time) {
	if v.deleting {
		return
	}
	for _, op := range s.operations {
		if op.vm == v && op.kind == "create" {
			op.settle(now)
			if op.final == "" {
				op.final, op.err = "Canceled", &armError{Code: "OperationCanceled", Message: "The operation was canceled: the VM is being deleted."}
				op.endedAt = now
			}
		}
	}
	v.deleting, v.goneAt = true, now.Add(s.shutdownDelay)
	// Its data disks are detached (deleteOption Detach): free once it is
	// gone and the machine let them go.
	s.detachAllLocked(v, now)
	s.cells.StopLocked(cellVM{s, v})
	s.log.Info("VM deleting", "vm", v.name, "cell", v.cell.LogAttr)
}

// vmJSON renders v as ARM does: what the client sent, with what ARM fills
// in, the instance view and userData only when expanded.
func (s *Server) vmJSON(v *vm, now time.Time, withView, withUserData bool) map[string]any {
	s.cells.AgentDueLocked(cellVM{s, v}, now)
	s.settleDisksLocked(now)
	out := maps.Clone(v.body)
	out["etag"] = v.etagValue()
	id := s.resourceID(v.rg, "Microsoft.Compute/virtualMachines", v.name)
	out["id"], out["name"], out["type"], out["location"] = id, v.name, "Microsoft.Compute/virtualMachines", s.opts.Location
	if v.zone != "" {
		out["zones"] = []string{v.zone}
	}
	if len(v.tags) > 0 {
		out["tags"] = v.tags
	} else {
		delete(out, "tags")
	}
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	out["properties"] = props
	props["vmId"] = v.vmID
	props["provisioningState"] = v.provisioningState(now)
	props["timeCreated"] = formatTime(v.createdAt)
	props["hardwareProfile"] = map[string]any{"vmSize": v.size.Name}
	if !withUserData {
		delete(props, "userData")
	}
	if osp, ok := props["osProfile"].(map[string]any); ok {
		osp = maps.Clone(osp)
		delete(osp, "adminPassword") // ARM never returns secrets
		delete(osp, "customData")
		props["osProfile"] = osp
	}
	if sp, ok := props["storageProfile"].(map[string]any); ok {
		sp = maps.Clone(sp)
		disk, _ := sp["osDisk"].(map[string]any)
		disk = maps.Clone(disk)
		if disk == nil {
			disk = map[string]any{}
		}
		disk["name"], disk["osType"] = v.osDisk, "Linux"
		disk["managedDisk"] = map[string]any{"id": s.resourceID(v.rg, "Microsoft.Compute/disks", v.osDisk), "storageAccountType": "Premium_LRS"}
		disk["createOption"] = "FromImage"
		if disk["deleteOption"] == nil {
			disk["deleteOption"] = "Detach"
		}
		sp["osDisk"] = disk
		sp["dataDisks"] = s.dataDisksJSON(v)
		props["storageProfile"] = sp
	}
	if np, ok := props["networkProfile"].(map[string]any); ok {
		np = maps.Clone(np)
		nicRef := map[string]any{"id": s.resourceID(v.rg, "Microsoft.Network/networkInterfaces", v.nicName), "properties": map[string]any{"primary": true}}
		if n := s.nics[keyOf(v.rg, v.nicName)]; n != nil {
			nicRef["properties"] = map[string]any{"primary": true, "deleteOption": n.deleteOption()}
		}
		np["networkInterfaces"] = []any{nicRef}
		props["networkProfile"] = np
	}
	if withView {
		props["instanceView"] = s.instanceView(v, now)
	}
	return out
}

// instanceView is a VM's instance view: its provisioning and power
// states as statuses, as ARM writes them.
func (s *Server) instanceView(v *vm, now time.Time) any {
	state := v.provisioningState(now)
	status := map[string]any{"code": "ProvisioningState/" + strings.ToLower(state), "level": "Info", "displayStatus": state}
	switch state {
	case StateSucceeded:
		status["displayStatus"], status["time"] = "Provisioning succeeded", formatTime(v.runningAt)
	case StateFailed:
		e := v.failed(now)
		status["code"] = "ProvisioningState/failed/" + e.Code
		status["level"], status["displayStatus"], status["message"] = "Error", "Provisioning failed", e.Message
		status["time"] = formatTime(v.allocAt)
	}
	statuses := []any{status}
	if ps := v.powerState(now); ps != "" {
		statuses = append(statuses, map[string]any{"code": ps, "level": "Info", "displayStatus": powerDisplay[ps]})
	}
	out := map[string]any{
		"computerName": v.name, "osName": "ubuntu", "osVersion": "24.04", "hyperVGeneration": "V2",
		"statuses": statuses,
	}
	if osp, _ := v.body["properties"].(map[string]any)["osProfile"].(map[string]any); osp != nil {
		if c, _ := osp["computerName"].(string); c != "" {
			out["computerName"] = c
		}
	}
	if v.spot && v.evicted {
		out["statuses"] = append(statuses, map[string]any{"code": "PowerState/evicted", "level": "Info", "displayStatus": "VM evicted"})
	}
	return out
}

var powerDisplay = map[string]string{
	PowerStarting: "VM starting", PowerRunning: "VM running", PowerStopping: "VM stopping",
	PowerStopped: "VM stopped", PowerDeallocated: "VM deallocated",
}

// listVMs answers VirtualMachines_List: the resource group's VMs, in PUT
// order, $expand=instanceView adding their instance views.
func (s *Server) listVMs(q request) (*answer, error) { return s.vmPage(q, q.rg, false) }

// listAllVMs answers VirtualMachines_ListAll: every VM of the
// subscription, with instance views for statusOnly=true or
// $expand=instanceView.
func (s *Server) listAllVMs(q request) (*answer, error) { return s.vmPage(q, "", true) }

func (s *Server) vmPage(q request, rg string, all bool) (*answer, error) {
	v := q.r.URL.Query()
	expand := strings.ToLower(v.Get("$expand"))
	if expand != "" && expand != "instanceview" {
		return nil, invalidParameter("$expand", fmt.Sprintf("The value '%s' of parameter '$expand' is invalid: instanceView.", v.Get("$expand")))
	}
	if f := v.Get("$filter"); f != "" && !strings.HasPrefix(strings.TrimSpace(f), "virtualMachineScaleSet/id eq ") {
		return nil, invalidParameter("$filter", fmt.Sprintf("The filter '%s' is not supported: virtual machines are filtered by virtualMachineScaleSet/id only.", f))
	}
	withView := expand == "instanceview" || all && strings.EqualFold(v.Get("statusOnly"), "true")
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var items []listed
	for _, it := range s.order {
		if it.gone(now) || rg != "" && !strings.EqualFold(it.rg, rg) || v.Get("$filter") != "" {
			continue
		}
		items = append(items, listed{it.seq, s.vmJSON(it, now, withView, false)})
	}
	return s.pageOf(q, items)
}

// newGUID is a random GUID, as ARM's IDs.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
