package aws

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/plugins/aws/catalog"
)

// fakeEC2 is a minimal EC2 Query-protocol (form POST in, XML out) and ECR
// JSON 1.1 server for the plugin's unit tests: the real SDK talks to it
// over HTTP. It knows the operations in ec2API and ecrAPI, the filters the
// plugin uses, ClientToken idempotency, pagination and injected errors.
// The full simulator for end-to-end tests lives in test/cloudsim/ec2, in
// another module.
type fakeEC2 struct {
	srv *httptest.Server

	mu        sync.Mutex
	instances map[string]*fakeInstance
	tokens    map[string]string // ClientToken → instance ID
	subnets   []fakeSubnet
	images    []fakeImage
	offered   map[string][]string          // type → zones; nil: every type everywhere
	events    map[string][]fakeStatusEvent // instance → scheduled events
	errs      map[string][]fakeError       // operation → errors to answer, in order
	calls     map[string]int
	forms     map[string][]url.Values // operation → requests
	pageSize  int                     // answers pages of at most this many (0: MaxResults)
	hide      map[string]int          // instance → DescribeInstances calls it is still absent from
	bootPolls int                     // DescribeInstances calls a new instance stays pending
	nextID    int
	ecrToken  int

	volumes     map[string]*fakeVolume // fakevolumes_test.go
	attachLimit int                    // volumes per instance; 0: fakeAttachmentLimit
}

type fakeInstance struct {
	id, typ, zone, subnet, image, token string
	state, reasonCode, reasonMessage    string
	lifecycle, ip                       string
	secondaries                         bool // one secondary private address: 10.1.x.y
	tags                                map[string]string
	launched                            time.Time
	polls                               int
	form                                url.Values
}

type fakeSubnet struct {
	id, vpc, zone string
	free          int
	tags          map[string]string
}

type fakeImage struct {
	id, owner, name, arch, created, rootDevice string
}

type fakeStatusEvent struct {
	id, code, description string
	notBefore             time.Time
}

type fakeError struct {
	code    string
	status  int
	message string
}

const (
	fakeVPC    = "vpc-0a"
	fakeOwner  = "123456789012"
	fakeAMI    = "ami-0a1"
	fakeARMAMI = "ami-0b2"
)

// newFakeEC2 starts a fake with two subnets (us-east-1a, us-east-1b) in
// fakeVPC, an amd64 and an arm64 image, and every type offered everywhere.
func newFakeEC2(t testing.TB) *fakeEC2 {
	f := &fakeEC2{
		instances: map[string]*fakeInstance{},
		tokens:    map[string]string{},
		subnets: []fakeSubnet{
			{id: "subnet-0a", vpc: fakeVPC, zone: "us-east-1a", free: 200},
			{id: "subnet-0b", vpc: fakeVPC, zone: "us-east-1b", free: 100},
		},
		images: []fakeImage{
			{id: fakeAMI, owner: fakeOwner, name: "kip-cell-amd64-1", arch: "x86_64", created: "2026-01-01T00:00:00.000Z", rootDevice: "/dev/xvda"},
			{id: fakeARMAMI, owner: fakeOwner, name: "kip-cell-arm64-1", arch: "arm64", created: "2026-01-01T00:00:00.000Z", rootDevice: "/dev/xvda"},
		},
		events: map[string][]fakeStatusEvent{},
		errs:   map[string][]fakeError{},
		calls:  map[string]int{},
		forms:  map[string][]url.Values{},
		hide:   map[string]int{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEC2) URL() string { return f.srv.URL }

// fail makes the next n calls of op answer code with HTTP status.
func (f *fakeEC2) fail(op, code string, status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.errs[op] = append(f.errs[op], fakeError{code: code, status: status, message: "injected " + code})
	}
}

func (f *fakeEC2) callCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeEC2) requests(op string) []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.forms[op])
}

func (f *fakeEC2) instance(id string) fakeInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.instances[id]
}

// setState moves an instance to state, with a state reason.
func (f *fakeEC2) setState(id, state, reasonCode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.instances[id]
	i.state, i.reasonCode, i.reasonMessage = state, reasonCode, reasonCode
}

// setLaunched sets an instance's launch time.
func (f *fakeEC2) setLaunched(id string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[id].launched = at.UTC()
}

// add creates an instance directly, as another tool (or cluster) would.
func (f *fakeEC2) add(state string, tags map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("i-%017x", f.nextID)
	f.instances[id] = &fakeInstance{id: id, typ: "m5.large", zone: "us-east-1a", state: state, tags: tags,
		ip: fmt.Sprintf("10.0.%d.%d", f.nextID/250, f.nextID%250+1), launched: time.Now().UTC()}
	return id
}

func (f *fakeEC2) serve(w http.ResponseWriter, r *http.Request) {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		f.serveECR(w, target)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := r.PostForm.Get("Action")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	f.forms[op] = append(f.forms[op], r.PostForm)
	if q := f.errs[op]; len(q) > 0 {
		f.errs[op] = q[1:]
		writeEC2Error(w, q[0].status, q[0].code, q[0].message)
		return
	}
	form := r.PostForm
	var resp any
	var err *fakeError
	switch op {
	case "RunInstances":
		resp, err = f.runInstances(form)
	case "DescribeInstances":
		resp, err = f.describeInstances(form)
	case "TerminateInstances":
		resp, err = f.terminateInstances(form)
	case "DescribeSubnets":
		resp, err = f.describeSubnets(form)
	case "DescribeImages":
		resp, err = f.describeImages(form)
	case "DescribeInstanceTypeOfferings":
		resp, err = f.describeOfferings(form)
	case "DescribeInstanceStatus":
		resp, err = f.describeStatus(form)
	case "GetConsoleOutput":
		resp, err = f.getConsoleOutput(form)
	case "DescribeVolumes":
		resp, err = f.describeVolumes(form)
	case "AttachVolume":
		resp, err = f.attachVolume(form)
	case "DetachVolume":
		resp, err = f.detachVolume(form)
	default:
		err = &fakeError{code: "InvalidAction", message: "the fake does not know " + op}
	}
	if err != nil {
		writeEC2Error(w, cmpStatus(err.status), err.code, err.message)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_ = xml.NewEncoder(w).Encode(resp)
}

func cmpStatus(s int) int {
	if s == 0 {
		return http.StatusBadRequest
	}
	return s
}

func writeEC2Error(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	var msg strings.Builder
	_ = xml.EscapeText(&msg, []byte(message))
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fake</RequestID></Response>`, code, msg.String())
}

// ---- forms ----

// list returns prefix.1, prefix.2, ... until one is missing.
func list(form url.Values, prefix string) []string {
	var out []string
	for n := 1; ; n++ {
		v, ok := form[prefix+"."+strconv.Itoa(n)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// filters returns Filter.N.Name → values.
func filters(form url.Values) map[string][]string {
	out := map[string][]string{}
	for n := 1; ; n++ {
		p := "Filter." + strconv.Itoa(n)
		name := form.Get(p + ".Name")
		if name == "" {
			return out
		}
		out[name] = list(form, p+".Value")
	}
}

// page cuts items to one page: NextToken is the offset.
func (f *fakeEC2) page(form url.Values, n int) (lo, hi int, next string) {
	lo, _ = strconv.Atoi(form.Get("NextToken"))
	size := n
	if m, err := strconv.Atoi(form.Get("MaxResults")); err == nil && m > 0 {
		size = m
	}
	if f.pageSize > 0 {
		size = min(size, f.pageSize)
	}
	hi = min(lo+size, n)
	if hi < n {
		next = strconv.Itoa(hi)
	}
	return lo, hi, next
}

// ---- instances ----

type xState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xInstance struct {
	InstanceID   string   `xml:"instanceId"`
	ImageID      string   `xml:"imageId"`
	State        xState   `xml:"instanceState"`
	StateReason  *xReason `xml:"stateReason,omitempty"`
	PrivateIP    string   `xml:"privateIpAddress,omitempty"`
	Interfaces   []xNIC   `xml:"networkInterfaceSet>item"`
	InstanceType string   `xml:"instanceType"`
	LaunchTime   string   `xml:"launchTime"`
	Lifecycle    string   `xml:"instanceLifecycle,omitempty"`
	Zone         string   `xml:"placement>availabilityZone"`
	SubnetID     string   `xml:"subnetId,omitempty"`
	ClientToken  string   `xml:"clientToken,omitempty"`
	Tags         []xTag   `xml:"tagSet>item"`
}

type xNIC struct {
	DeviceIndex int           `xml:"attachment>deviceIndex"`
	Addresses   []xNICAddress `xml:"privateIpAddressesSet>item"`
}

type xNICAddress struct {
	Address string `xml:"privateIpAddress"`
	Primary bool   `xml:"primary"`
}

func (i *fakeInstance) xml() xInstance {
	x := xInstance{InstanceID: i.id, ImageID: i.image, State: xState{stateCodes[i.state], i.state}, InstanceType: i.typ,
		LaunchTime: i.launched.Format(time.RFC3339), Lifecycle: i.lifecycle, Zone: i.zone, SubnetID: i.subnet, ClientToken: i.token}
	if i.state == "running" {
		x.PrivateIP = i.ip
		nic := xNIC{DeviceIndex: 0, Addresses: []xNICAddress{{i.ip, true}}}
		if i.secondaries {
			nic.Addresses = append(nic.Addresses, xNICAddress{"10.1" + strings.TrimPrefix(i.ip, "10.0"), false})
		}
		x.Interfaces = []xNIC{nic}
	}
	if i.reasonCode != "" {
		x.StateReason = &xReason{i.reasonCode, i.reasonMessage}
	}
	for _, k := range sortedKeys(i.tags) {
		x.Tags = append(x.Tags, xTag{k, i.tags[k]})
	}
	return x
}

type xRunInstances struct {
	XMLName   xml.Name    `xml:"RunInstancesResponse"`
	Instances []xInstance `xml:"instancesSet>item"`
}

// fingerprint is the form without what may differ between two identical
// requests (signing and the like do not reach the form).
func fingerprint(form url.Values) string {
	keys := slices.Sorted(maps.Keys(form))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, form[k])
	}
	return b.String()
}

func (f *fakeEC2) runInstances(form url.Values) (any, *fakeError) {
	token := form.Get("ClientToken")
	if id, ok := f.tokens[token]; ok && token != "" {
		i := f.instances[id]
		if fingerprint(i.form) != fingerprint(form) {
			return nil, &fakeError{code: "IdempotentParameterMismatch", message: "different parameters for token " + token}
		}
		return xRunInstances{Instances: []xInstance{i.xml()}}, nil
	}
	// The subnet and groups go on the network interface or on the
	// instance, never both (InvalidParameterCombination, as EC2).
	subnet := form.Get("SubnetId")
	if form.Has("NetworkInterface.1.DeviceIndex") {
		if subnet != "" || form.Has("SecurityGroupId.1") {
			return nil, &fakeError{code: "InvalidParameterCombination", message: "Network interfaces and an instance-level subnet ID or security groups may not be specified on the same request"}
		}
		subnet = form.Get("NetworkInterface.1.SubnetId")
	}
	var zone string
	for _, s := range f.subnets {
		if s.id == subnet {
			zone = s.zone
		}
	}
	if zone == "" {
		return nil, &fakeError{code: "InvalidSubnetID.NotFound", message: fmt.Sprintf("The subnet ID '%s' does not exist", subnet)}
	}
	typ := form.Get("InstanceType")
	if zones, ok := f.offered[typ]; f.offered != nil && (!ok || !slices.Contains(zones, zone)) {
		return nil, &fakeError{code: "Unsupported", message: fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", typ, zone)}
	}
	f.nextID++
	i := &fakeInstance{
		id: fmt.Sprintf("i-%017x", f.nextID), typ: typ, zone: zone, subnet: subnet, image: form.Get("ImageId"),
		token: token, state: "pending", ip: fmt.Sprintf("10.0.%d.%d", f.nextID/250, f.nextID%250+1),
		secondaries: form.Get("NetworkInterface.1.SecondaryPrivateIpAddressCount") == "1",
		tags:        map[string]string{}, launched: time.Now().UTC(), form: form,
	}
	if form.Get("InstanceMarketOptions.MarketType") == "spot" {
		i.lifecycle = "spot"
	}
	for n := 1; ; n++ {
		p := "TagSpecification." + strconv.Itoa(n)
		rt := form.Get(p + ".ResourceType")
		if rt == "" {
			break
		}
		if rt != "instance" {
			continue
		}
		for m := 1; ; m++ {
			k, ok := form[p+".Tag."+strconv.Itoa(m)+".Key"]
			if !ok {
				break
			}
			i.tags[k[0]] = form.Get(p + ".Tag." + strconv.Itoa(m) + ".Value")
		}
	}
	f.instances[i.id] = i
	if token != "" {
		f.tokens[token] = i.id
	}
	return xRunInstances{Instances: []xInstance{i.xml()}}, nil
}

type xReservation struct {
	ID        string      `xml:"reservationId"`
	Instances []xInstance `xml:"instancesSet>item"`
}

type xDescribeInstances struct {
	XMLName      xml.Name       `xml:"DescribeInstancesResponse"`
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

func (f *fakeEC2) describeInstances(form url.Values) (any, *fakeError) {
	if ids := list(form, "InstanceId"); len(ids) > 0 {
		return nil, &fakeError{code: "InvalidParameterCombination", message: "the plugin filters by instance-id; InstanceId.N is not expected"}
	}
	fs := filters(form)
	var match []*fakeInstance
	for _, id := range slices.Sorted(maps.Keys(f.instances)) {
		i := f.instances[id]
		if f.hide[id] > 0 {
			f.hide[id]--
			continue
		}
		ok := true
		for name, values := range fs {
			switch {
			case strings.HasPrefix(name, "tag:"):
				v, has := i.tags[strings.TrimPrefix(name, "tag:")]
				ok = ok && has && slices.Contains(values, v)
			case name == "tag-key":
				ok = ok && slices.ContainsFunc(values, func(k string) bool { _, has := i.tags[k]; return has })
			case name == "instance-id":
				ok = ok && slices.Contains(values, i.id)
			case name == "instance-state-name":
				ok = ok && slices.Contains(values, i.state)
			case name == "client-token":
				ok = ok && slices.Contains(values, i.token)
			default:
				return nil, &fakeError{code: "InvalidParameterValue", message: "the fake does not know filter " + name}
			}
		}
		if ok {
			match = append(match, i)
		}
	}
	lo, hi, next := f.page(form, len(match))
	resp := xDescribeInstances{NextToken: next}
	for _, i := range match[lo:hi] {
		resp.Reservations = append(resp.Reservations, xReservation{ID: "r-" + i.id[2:], Instances: []xInstance{i.xml()}})
		// Instances boot as they are watched, and terminated ones end.
		i.polls++
		switch {
		case i.state == "pending" && i.polls > f.bootPolls:
			i.state = "running"
		case i.state == "shutting-down":
			i.state = "terminated"
		}
	}
	return resp, nil
}

type xStateChange struct {
	InstanceID string `xml:"instanceId"`
	Current    xState `xml:"currentState"`
	Previous   xState `xml:"previousState"`
}

type xTerminateInstances struct {
	XMLName   xml.Name       `xml:"TerminateInstancesResponse"`
	Instances []xStateChange `xml:"instancesSet>item"`
}

func (f *fakeEC2) terminateInstances(form url.Values) (any, *fakeError) {
	var resp xTerminateInstances
	for _, id := range list(form, "InstanceId") {
		i, ok := f.instances[id]
		if !ok || f.hide[id] > 0 {
			if ok {
				f.hide[id]--
			}
			return nil, &fakeError{code: "InvalidInstanceID.NotFound", message: fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		prev := i.state
		if i.state != "terminated" {
			i.state = "shutting-down"
		}
		resp.Instances = append(resp.Instances, xStateChange{id, xState{stateCodes[i.state], i.state}, xState{stateCodes[prev], prev}})
	}
	return resp, nil
}

type xGetConsoleOutput struct {
	XMLName    xml.Name `xml:"GetConsoleOutputResponse"`
	InstanceID string   `xml:"instanceId"`
	Timestamp  string   `xml:"timestamp"`
	Output     string   `xml:"output"`
}

// fakeConsole is every instance's console output.
const fakeConsole = "[    0.000000] Linux version 6.1.0-13-cloud-amd64\ncloud-init[512]: kip-cell: bootstrap unreadable\n"

func (f *fakeEC2) getConsoleOutput(form url.Values) (any, *fakeError) {
	id := form.Get("InstanceId")
	if _, ok := f.instances[id]; !ok {
		return nil, &fakeError{code: "InvalidInstanceID.NotFound", message: fmt.Sprintf("The instance ID '%s' does not exist", id)}
	}
	return xGetConsoleOutput{InstanceID: id, Timestamp: "2026-01-02T03:04:05.000Z", Output: base64.StdEncoding.EncodeToString([]byte(fakeConsole))}, nil
}

// ---- network, images, offerings, status ----

type xSubnet struct {
	ID   string `xml:"subnetId"`
	VPC  string `xml:"vpcId"`
	Zone string `xml:"availabilityZone"`
	Free int    `xml:"availableIpAddressCount"`
	Tags []xTag `xml:"tagSet>item"`
}

type xDescribeSubnets struct {
	XMLName   xml.Name  `xml:"DescribeSubnetsResponse"`
	Subnets   []xSubnet `xml:"subnetSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

func (f *fakeEC2) describeSubnets(form url.Values) (any, *fakeError) {
	ids := list(form, "SubnetId")
	for _, id := range ids {
		if !slices.ContainsFunc(f.subnets, func(s fakeSubnet) bool { return s.id == id }) {
			return nil, &fakeError{code: "InvalidSubnetID.NotFound", message: fmt.Sprintf("The subnet ID '%s' does not exist", id)}
		}
	}
	fs := filters(form)
	var match []xSubnet
	for _, s := range f.subnets {
		if len(ids) > 0 && !slices.Contains(ids, s.id) {
			continue
		}
		if vpcs, ok := fs["vpc-id"]; ok && !slices.Contains(vpcs, s.vpc) {
			continue
		}
		x := xSubnet{ID: s.id, VPC: s.vpc, Zone: s.zone, Free: s.free}
		for _, k := range sortedKeys(s.tags) {
			x.Tags = append(x.Tags, xTag{k, s.tags[k]})
		}
		match = append(match, x)
	}
	lo, hi, next := f.page(form, len(match))
	return xDescribeSubnets{Subnets: match[lo:hi], NextToken: next}, nil
}

type xImage struct {
	ID         string `xml:"imageId"`
	Owner      string `xml:"imageOwnerId"`
	Name       string `xml:"name"`
	Arch       string `xml:"architecture"`
	Created    string `xml:"creationDate"`
	State      string `xml:"imageState"`
	RootDevice string `xml:"rootDeviceName"`
}

type xDescribeImages struct {
	XMLName xml.Name `xml:"DescribeImagesResponse"`
	Images  []xImage `xml:"imagesSet>item"`
}

func (f *fakeEC2) describeImages(form url.Values) (any, *fakeError) {
	ids, owners, fs := list(form, "ImageId"), list(form, "Owner"), filters(form)
	var resp xDescribeImages
	for _, id := range ids {
		if !slices.ContainsFunc(f.images, func(i fakeImage) bool { return i.id == id }) {
			return nil, &fakeError{code: "InvalidAMIID.NotFound", message: fmt.Sprintf("The image id '[%s]' does not exist", id)}
		}
	}
	for _, im := range f.images {
		if len(ids) > 0 && !slices.Contains(ids, im.id) || len(owners) > 0 && !slices.Contains(owners, im.owner) {
			continue
		}
		if names, ok := fs["name"]; ok && !slices.ContainsFunc(names, func(p string) bool { m, _ := path.Match(p, im.name); return m }) {
			continue
		}
		resp.Images = append(resp.Images, xImage{im.id, im.owner, im.name, im.arch, im.created, "available", im.rootDevice})
	}
	return resp, nil
}

type xOffering struct {
	Type         string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type xDescribeOfferings struct {
	XMLName   xml.Name    `xml:"DescribeInstanceTypeOfferingsResponse"`
	Offerings []xOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (f *fakeEC2) describeOfferings(form url.Values) (any, *fakeError) {
	if form.Get("LocationType") != "availability-zone" {
		return nil, &fakeError{code: "InvalidParameterValue", message: "want LocationType availability-zone"}
	}
	locations := filters(form)["location"]
	offered := f.offered
	if offered == nil { // every type of the catalog in every zone asked for
		offered = map[string][]string{}
		cat, _ := catalog.Load()
		for _, t := range cat.Types {
			offered[t.Name] = locations
		}
	}
	var all []xOffering
	for _, typ := range slices.Sorted(maps.Keys(offered)) {
		for _, z := range offered[typ] {
			if len(locations) == 0 || slices.Contains(locations, z) {
				all = append(all, xOffering{typ, "availability-zone", z})
			}
		}
	}
	lo, hi, next := f.page(form, len(all))
	return xDescribeOfferings{Offerings: all[lo:hi], NextToken: next}, nil
}

type xEvent struct {
	ID          string `xml:"instanceEventId"`
	Code        string `xml:"code"`
	Description string `xml:"description"`
	NotBefore   string `xml:"notBefore"`
}

type xStatus struct {
	InstanceID string   `xml:"instanceId"`
	Zone       string   `xml:"availabilityZone"`
	State      xState   `xml:"instanceState"`
	Events     []xEvent `xml:"eventsSet>item"`
}

type xDescribeStatus struct {
	XMLName   xml.Name  `xml:"DescribeInstanceStatusResponse"`
	Statuses  []xStatus `xml:"instanceStatusSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

func (f *fakeEC2) describeStatus(form url.Values) (any, *fakeError) {
	codes := filters(form)["event.code"]
	var all []xStatus
	for _, id := range slices.Sorted(maps.Keys(f.events)) {
		i := f.instances[id]
		st := xStatus{InstanceID: id, Zone: i.zone, State: xState{stateCodes[i.state], i.state}}
		for _, e := range f.events[id] {
			if len(codes) == 0 || slices.Contains(codes, e.code) {
				st.Events = append(st.Events, xEvent{e.id, e.code, e.description, e.notBefore.Format(time.RFC3339)})
			}
		}
		if len(st.Events) > 0 {
			all = append(all, st)
		}
	}
	lo, hi, next := f.page(form, len(all))
	return xDescribeStatus{Statuses: all[lo:hi], NextToken: next}, nil
}

// scheduleEvent adds a scheduled event to an instance.
func (f *fakeEC2) scheduleEvent(id, code string, notBefore time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events[id] = append(f.events[id], fakeStatusEvent{id: fmt.Sprintf("instance-event-%d", len(f.events[id])+1), code: code,
		description: "The instance is scheduled for " + code, notBefore: notBefore})
}

// ---- ECR ----

const ecrTarget = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"

func (f *fakeEC2) serveECR(w http.ResponseWriter, target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const op = "GetAuthorizationToken"
	f.calls[op]++
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if q := f.errs[op]; len(q) > 0 {
		f.errs[op] = q[1:]
		w.WriteHeader(q[0].status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": q[0].code, "message": q[0].message})
		return
	}
	if target != ecrTarget {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "UnknownOperationException", "message": target})
		return
	}
	f.ecrToken++
	token := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "AWS:password-%d", f.ecrToken))
	_ = json.NewEncoder(w).Encode(map[string]any{"authorizationData": []map[string]any{{
		"authorizationToken": token,
		"expiresAt":          float64(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()),
		"proxyEndpoint":      "https://" + fakeOwner + ".dkr.ecr.us-east-1.amazonaws.com",
	}}})
}
