package gcesim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Instance is what the server knows of an instance, as it is at the time
// it was read.
type Instance struct {
	Name        string
	Zone        string
	ID          uint64
	MachineType string // the type's name (e2-small), not its URL
	Status      string // PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED
	Labels      map[string]string
	// Gone is true once a deleted instance is no longer visible.
	Gone bool
	// Address is nic0's networkIP: the cell's address with a
	// CellStarter ("" until the cell started).
	Address string
	// AliasIP is nic0's alias IP range of one address, where the insert
	// asked for one: the cell's pod address (simcells.Addresses.Pod) when
	// it has one, else an address of the subnetwork's range ("" until the
	// cell started).
	AliasIP string
	// Spot is provisioningModel SPOT; TerminationAction is
	// scheduling.instanceTerminationAction (STOP or DELETE).
	Spot              bool
	TerminationAction string
	// Preempted is true once Preempt reclaimed it.
	Preempted bool
	// Bootstrap is its kip-bootstrap metadata item.
	Bootstrap []byte
	// AgentStarted is true once its cell's agent started; Silent when it
	// never will (SilenceAgents).
	AgentStarted, Silent bool
	// RequestID is the requestId of the insert ("" without one).
	RequestID string
	Created   time.Time
	// Body is the Instance resource the client sent, decoded from JSON.
	Body map[string]any
}

// instance is one inserted instance; its status is computed when read.
type instance struct {
	key         instanceKey
	seq         uint64
	id          uint64
	machineType string
	labels      map[string]string
	requestID   string
	body        map[string]any
	spot        bool
	action      string // scheduling.instanceTerminationAction

	// cell is the instance's cell (its address, whether it and its agent
	// started and stopped), kept by s.cells.
	cell simcells.Cell

	created, stagingAt, runningAt time.Time
	// stopping: deleted, preempted, or its cell failed to start; it is
	// STOPPING until stopAt plus the shutdown delay (terminatedAt) and its
	// cell has stopped, then TERMINATED.
	stopping     bool
	stopAt       time.Time
	terminatedAt time.Time
	preempted    bool
	// deleted: it goes away visibleFor after it is TERMINATED.
	deleted    bool
	visibleFor time.Duration

	maintenance *maintenance
	// disks are its attachments, gone ones included (disks.go).
	disks []*attachment
}

// maintenance is a scheduled host maintenance of an instance.
type maintenance struct{ start, end time.Time }

// terminated returns when the instance became TERMINATED: no earlier
// than terminatedAt, and once its cell has stopped.
func (in *instance) terminated() (time.Time, bool) {
	if !in.stopping || !in.cell.Stopped {
		return time.Time{}, false
	}
	return later(in.terminatedAt, in.cell.StoppedAt), true
}

func (in *instance) status(now time.Time) string {
	if in.stopping {
		if t, ok := in.terminated(); ok && !now.Before(t) {
			return "TERMINATED"
		}
		return "STOPPING"
	}
	switch {
	case now.Before(in.stagingAt):
		return "PROVISIONING"
	case now.Before(in.runningAt) || !in.cell.Started:
		return "STAGING"
	}
	return "RUNNING"
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// visible reports whether get and list still return the instance.
func (in *instance) visible(now time.Time) bool {
	if !in.deleted {
		return true
	}
	t, ok := in.terminated()
	return !ok || now.Before(t.Add(in.visibleFor))
}

func (in *instance) snapshot(now time.Time) Instance {
	return Instance{
		Name: in.key.name, Zone: in.key.zone, ID: in.id, MachineType: in.machineType,
		Status: in.status(now), Labels: maps.Clone(in.labels), Gone: !in.visible(now),
		RequestID: in.requestID, Created: in.created, Body: in.body,
		Address: in.cell.Address, AliasIP: in.aliasIP(), Spot: in.spot, TerminationAction: in.action, Preempted: in.preempted,
		Bootstrap: in.cell.Bootstrap, AgentStarted: in.cell.AgentStarted, Silent: in.cell.Silent,
	}
}

// stop starts the shutdown of an instance that is not stopping yet:
// STOPPING for the shutdown delay and until its cell stopped. The caller
// holds s.mu.
func (s *Server) stop(in *instance, now time.Time) {
	if in.stopping {
		return
	}
	in.beginStop(now, s.shutdownDelay)
	s.cells.StopLocked(cellInstance{s, in})
}

// beginStop marks the instance STOPPING from now for at least delay.
func (in *instance) beginStop(now time.Time, delay time.Duration) {
	in.stopping, in.stopAt, in.terminatedAt = true, now, now.Add(delay)
}

// live returns the visible instance named name in zone, or nil. The
// caller holds s.mu.
func (s *Server) live(zone, name string, now time.Time) *instance {
	in := s.instances[instanceKey{zone, name}]
	if in == nil || !in.visible(now) {
		return nil
	}
	return in
}

func (s *Server) instancePath(zone, name string) string {
	return fmt.Sprintf("projects/%s/zones/%s/instances/%s", s.opts.Project, zone, name)
}

var (
	// namePattern is GCE's rule for a resource name (RFC 1035).
	namePattern = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// machineTypePattern reads the zone and name out of a machine type's
	// full or partial URL.
	machineTypePattern = regexp.MustCompile(`^(?:.*/)?zones/([^/]+)/machineTypes/([^/]+)$`)
	// requestIDPattern is a UUID, which GCE requires of requestId.
	requestIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	labelKeyPattern  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValPattern  = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

// requestID reads and checks the requestId query parameter.
func requestID(q request) (string, error) {
	id := q.r.URL.Query().Get("requestId")
	if id != "" && !requestIDPattern.MatchString(id) {
		return "", invalid("requestId", id, "Request ID must be a valid UUID.")
	}
	return id, nil
}

// repeated returns the operation a request with requestId rid started
// before, or nil. The caller holds s.mu.
func (s *Server) repeated(rid string) *operation {
	if rid == "" {
		return nil
	}
	return s.requests[rid]
}

// operation makes the change of a mutating call whose requestId is rid
// (do, under s.mu at now), unless rid repeats an earlier call: that call's
// operation is then the answer, and nothing changes, as GCE answers a
// retried requestId.
func (s *Server) operation(rid string, do func(now time.Time) (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if op := s.repeated(rid); op != nil {
		return s.operationJSON(op, now), nil
	}
	return do(now)
}

// insertInstance answers instances.insert. A repeat of a requestId
// returns the first operation and changes nothing; another insert of a
// name that exists is alreadyExists. A stock-out answers an operation
// that ends in ZONE_RESOURCE_POOL_EXHAUSTED and creates no instance.
func (s *Server) insertInstance(q request) (any, error) {
	zone := q.zone()
	rid, err := requestID(q)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(q.r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, &apiError{Status: http.StatusBadRequest, Reason: "parseError", Message: "This API does not support parsing form-encoded input."}
	}
	name, _ := body["name"].(string)
	if !namePattern.MatchString(name) {
		return nil, invalid("resource.name", name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'")
	}
	mtURL, _ := body["machineType"].(string)
	m := machineTypePattern.FindStringSubmatch(mtURL)
	if m == nil || m[1] != zone {
		return nil, invalid("resource.machineType", mtURL, fmt.Sprintf("Machine type with name '%s' does not exist in zone '%s'.", mtURL, zone))
	}
	labels, err := parseLabels(body["labels"])
	if err != nil {
		return nil, err
	}
	if err := s.checkReferences(zone, body); err != nil {
		return nil, err
	}
	sched, err := parseScheduling(body["scheduling"])
	if err != nil {
		return nil, err
	}

	return s.operation(rid, func(now time.Time) (any, error) {
		if s.live(zone, name, now) != nil {
			return nil, alreadyExists(s.instancePath(zone, name))
		}
		link := apiBase + s.instancePath(zone, name)
		if e := s.refusal(zone, m[2], sched.spot, body); e != nil {
			s.log.Info("insert refused", "instance", name, "zone", zone, "machine_type", m[2], "code", e.code)
			op := s.newOperation(zone, "insert", link, newID(), rid, now, now.Add(s.opDelay), e)
			return s.operationJSON(op, now), nil
		}
		s.seq++
		in := &instance{
			key: instanceKey{zone, name}, seq: s.seq, id: newID(), machineType: m[2], labels: labels,
			requestID: rid, body: body, spot: sched.spot, action: sched.action,
			created: now, stagingAt: now.Add(s.bootDelay / 2), runningAt: now.Add(s.bootDelay),
		}
		in.cell = simcells.Cell{ID: name, Type: m[2], Bootstrap: metadataItem(body, BootstrapKey), LogAttr: labels["kip-cell"]}
		if !s.cells.HasStarter() {
			in.cell.Address = fmt.Sprintf("10.128.%d.%d", s.seq/250, s.seq%250+2)
		}
		s.instances[in.key] = in
		s.order = append(s.order, in)
		s.log.Info("instance inserted", "instance", name, "zone", zone, "machine_type", m[2], "spot", in.spot)
		s.startMetadata(in)
		s.cells.StartLocked(cellInstance{s, in})
		op := s.newOperation(zone, "insert", link, in.id, rid, now, now.Add(s.opDelay), nil)
		return s.operationJSON(op, now), nil
	})
}

// parseLabels checks labels as GCE does: lowercase keys and values of at
// most 63 characters.
func parseLabels(v any) (map[string]string, error) {
	raw, _ := v.(map[string]any)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, _ := v.(string)
		if !labelKeyPattern.MatchString(k) || !labelValPattern.MatchString(s) {
			return nil, invalid("resource.labels", k+"="+s, "Label keys and values can only contain lowercase letters, "+
				"numeric characters, underscores and dashes, at most 63 characters; a key starts with a letter.")
		}
		out[k] = s
	}
	return out, nil
}

// getInstance answers instances.get.
func (s *Server) getInstance(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	in := s.live(q.zone(), q.args[1], now)
	if in == nil {
		return nil, notFound(s.instancePath(q.zone(), q.args[1]))
	}
	return s.instanceJSON(in, now), nil
}

// deleteInstance answers instances.delete: STOPPING for the shutdown
// delay, then TERMINATED; the operation is DONE once it is TERMINATED.
func (s *Server) deleteInstance(q request) (any, error) {
	zone, name := q.zone(), q.args[1]
	rid, err := requestID(q)
	if err != nil {
		return nil, err
	}
	return s.operation(rid, func(now time.Time) (any, error) {
		in := s.live(zone, name, now)
		if in == nil {
			return nil, notFound(s.instancePath(zone, name))
		}
		if !in.deleted {
			in.deleted, in.visibleFor = true, s.opts.TerminatedVisible
			s.stop(in, now)
			s.releaseDisks(in, now)
			s.log.Info("instance deleted", "instance", name, "zone", zone)
		}
		op := s.newOperation(zone, "delete", apiBase+s.instancePath(zone, name), in.id, rid, now, now.Add(s.opDelay), nil)
		op.until = in
		return s.operationJSON(op, now), nil
	})
}

// instanceJSON renders in as GCE does: what the client sent, with the
// fields GCE fills in.
func (s *Server) instanceJSON(in *instance, now time.Time) map[string]any {
	s.cells.AgentDueLocked(cellInstance{s, in}, now)
	out := maps.Clone(in.body)
	status := in.status(now)
	out["kind"] = "compute#instance"
	out["id"] = strconv.FormatUint(in.id, 10)
	out["name"] = in.key.name
	out["zone"] = s.zoneURL(in.key.zone)
	out["machineType"] = s.zoneURL(in.key.zone) + "/machineTypes/" + in.machineType
	out["status"] = status
	out["creationTimestamp"] = formatTime(in.created)
	out["selfLink"] = apiBase + s.instancePath(in.key.zone, in.key.name)
	if len(in.labels) > 0 {
		out["labels"] = in.labels
	}
	if in.cell.Started && !now.Before(in.runningAt) {
		out["lastStartTimestamp"] = formatTime(in.runningAt)
	}
	if t, ok := in.terminated(); ok && !now.Before(t) {
		out["lastStopTimestamp"] = formatTime(t)
	}
	if rs := s.resourceStatus(in, now); rs != nil {
		out["resourceStatus"] = rs
	}
	nic := maps.Clone(firstItem(in.body, "networkInterfaces"))
	if nic == nil {
		nic = map[string]any{}
	}
	nic["name"] = "nic0"
	if in.cell.Address != "" {
		nic["networkIP"] = in.cell.Address
	}
	if _, asked := nic["aliasIpRanges"]; asked {
		delete(nic, "aliasIpRanges")
		if a := in.aliasIP(); a != "" {
			nic["aliasIpRanges"] = []any{map[string]any{"ipCidrRange": a + "/32"}}
		}
	}
	s.linkNIC(nic)
	out["networkInterfaces"] = []any{nic}
	out["disks"] = s.attachedDisksJSON(in, now)
	return out
}

// aliasIP is the address of nic0's alias IP range "/32", once the cell
// has an address: the cell's pod address where the CellStarter gave one,
// else one of the default range's upper half (the primary addresses
// without a CellStarter come from its lower half); "" when the insert
// asked for no alias IP.
func (in *instance) aliasIP() string {
	if in.cell.Address == "" || firstItem(in.body, "networkInterfaces")["aliasIpRanges"] == nil {
		return ""
	}
	if in.cell.PodAddress != "" {
		return in.cell.PodAddress
	}
	return fmt.Sprintf("10.128.%d.%d", 8+in.seq/250, in.seq%250+2)
}

// page is one page of a list: the items on it and the token of the
// next, "" on the last.
type page[T any] struct {
	items []T
	next  string
}

// paginate selects the items of all (in their order, each with its
// increasing seq) that keep and the request's filter (over known fields)
// select, and returns the page its maxResults and pageToken ask for.
func paginate[T any](q request, all []T, known map[string]bool, seq func(T) uint64, keep func(T) bool,
	fields func(T) func(string) (string, bool),
) (page[T], error) {
	v := q.r.URL.Query()
	match, err := parseFilter(v.Get("filter"), known)
	if err != nil {
		return page[T]{}, err
	}
	limit, from, err := pageParams(v)
	if err != nil {
		return page[T]{}, err
	}
	var out page[T]
	for _, it := range all {
		if seq(it) < from || !keep(it) || !match(fields(it)) {
			continue
		}
		if len(out.items) == limit {
			out.next = pageToken(seq(it))
			break
		}
		out.items = append(out.items, it)
	}
	return out, nil
}

// listPage is the page of the visible instances of zones that q asks
// for, in insert order. The caller holds s.mu.
func (s *Server) listPage(q request, zones []string, now time.Time) (page[*instance], error) {
	return paginate(q, s.order, instanceFields,
		func(in *instance) uint64 { return in.seq },
		func(in *instance) bool { return slices.Contains(zones, in.key.zone) && in.visible(now) },
		func(in *instance) func(string) (string, bool) { return s.fields(in, now) })
}

// scopeItems is one scope of an aggregated list: its items under key, or
// GCE's NO_RESULTS_ON_PAGE warning.
func scopeItems(key, scope string, list []any) map[string]any {
	if len(list) > 0 {
		return map[string]any{key: list}
	}
	return noResultsOnPage(scope)
}

// fields are the values a filter can name.
func (s *Server) fields(in *instance, now time.Time) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if k, ok := strings.CutPrefix(name, "labels."); ok {
			v, ok := in.labels[k]
			return v, ok
		}
		switch name {
		case "name":
			return in.key.name, true
		case "status":
			return in.status(now), true
		case "zone":
			return in.key.zone, true
		case "machineType":
			return in.machineType, true
		}
		return "", false
	}
}

// listInstances answers instances.list.
func (s *Server) listInstances(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	p, err := s.listPage(q, []string{q.zone()}, now)
	if err != nil {
		return nil, err
	}
	return listJSON(s, "compute#instanceList", "zones/"+q.zone()+"/instances", p,
		func(in *instance) any { return s.instanceJSON(in, now) }), nil
}

// listJSON is a list's answer: its kind, the path of the list (after
// projects/{project}/), and the page's items as render writes them.
func listJSON[T any](s *Server, kind, path string, p page[T], render func(T) any) map[string]any {
	out := map[string]any{"kind": kind, "id": "projects/" + s.opts.Project + "/" + path, "selfLink": apiBase + "projects/" + s.opts.Project + "/" + path}
	if len(p.items) > 0 {
		items := make([]any, 0, len(p.items))
		for _, it := range p.items {
			items = append(items, render(it))
		}
		out["items"] = items
	}
	if p.next != "" {
		out["nextPageToken"] = p.next
	}
	return out
}

// aggregatedInstances answers instances.aggregatedList: every zone as a
// scope, with its instances on this page or GCE's NO_RESULTS_ON_PAGE
// warning.
func (s *Server) aggregatedInstances(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	p, err := s.listPage(q, s.opts.Zones, now)
	if err != nil {
		return nil, err
	}
	scopes := make([]string, 0, len(s.opts.Zones))
	for _, z := range s.opts.Zones {
		scopes = append(scopes, "zones/"+z)
	}
	return aggregatedJSON(s, "compute#instanceAggregatedList", "instances", scopes, p,
		func(in *instance) string { return "zones/" + in.key.zone },
		func(in *instance) any { return s.instanceJSON(in, now) }), nil
}

// aggregatedJSON is an aggregated list's answer: its kind, what it lists
// (instances, operations), and a scope for each of scopes with the page's
// items of that scope (scopeOf) as render writes them, or GCE's
// NO_RESULTS_ON_PAGE warning.
func aggregatedJSON[T any](s *Server, kind, what string, scopes []string, p page[T], scopeOf func(T) string, render func(T) any) map[string]any {
	lists := map[string][]any{}
	for _, it := range p.items {
		lists[scopeOf(it)] = append(lists[scopeOf(it)], render(it))
	}
	items := map[string]any{}
	for _, scope := range scopes {
		items[scope] = scopeItems(what, scope, lists[scope])
	}
	path := "projects/" + s.opts.Project + "/aggregated/" + what
	out := map[string]any{"kind": kind, "id": path, "items": items, "selfLink": apiBase + path}
	if p.next != "" {
		out["nextPageToken"] = p.next
	}
	return out
}
