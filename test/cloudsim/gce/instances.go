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
	networkIP   string

	created, stagingAt, runningAt time.Time
	deleted                       bool
	deletedAt, terminatedAt       time.Time
	goneAt                        time.Time
}

func (in *instance) status(now time.Time) string {
	switch {
	case in.deleted && now.Before(in.terminatedAt):
		return "STOPPING"
	case in.deleted:
		return "TERMINATED"
	case now.Before(in.stagingAt):
		return "PROVISIONING"
	case now.Before(in.runningAt):
		return "STAGING"
	}
	return "RUNNING"
}

// visible reports whether get and list still return the instance.
func (in *instance) visible(now time.Time) bool { return !in.deleted || now.Before(in.goneAt) }

func (in *instance) snapshot(now time.Time) Instance {
	return Instance{
		Name: in.key.name, Zone: in.key.zone, ID: in.id, MachineType: in.machineType,
		Status: in.status(now), Labels: maps.Clone(in.labels), Gone: !in.visible(now),
		RequestID: in.requestID, Created: in.created, Body: in.body,
	}
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
		return nil, &apiError{http.StatusBadRequest, "parseError", "This API does not support parsing form-encoded input."}
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

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if op := s.repeated(rid); op != nil {
		return s.operationJSON(op, now), nil
	}
	if s.live(zone, name, now) != nil {
		return nil, alreadyExists(s.instancePath(zone, name))
	}
	link := apiBase + s.instancePath(zone, name)
	if so, ok := s.stockout(m[2], zone); ok {
		s.log.Info("insert refused: stock-out", "instance", name, "zone", zone, "machine_type", m[2])
		op := s.newOperation(zone, "insert", link, newID(), rid, now, now.Add(s.opDelay), s.stockoutError(zone, so))
		return s.operationJSON(op, now), nil
	}
	s.seq++
	in := &instance{
		key: instanceKey{zone, name}, seq: s.seq, id: newID(), machineType: m[2], labels: labels,
		requestID: rid, body: body, networkIP: fmt.Sprintf("10.128.%d.%d", s.seq/250, s.seq%250+2),
		created: now, stagingAt: now.Add(s.bootDelay / 2), runningAt: now.Add(s.bootDelay),
	}
	s.instances[in.key] = in
	s.order = append(s.order, in)
	s.log.Info("instance inserted", "instance", name, "zone", zone, "machine_type", m[2])
	op := s.newOperation(zone, "insert", link, in.id, rid, now, now.Add(s.opDelay), nil)
	return s.operationJSON(op, now), nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if op := s.repeated(rid); op != nil {
		return s.operationJSON(op, now), nil
	}
	in := s.live(zone, name, now)
	if in == nil {
		return nil, notFound(s.instancePath(zone, name))
	}
	if !in.deleted {
		in.deleted, in.deletedAt, in.terminatedAt = true, now, now.Add(s.shutdownDelay)
		in.goneAt = in.terminatedAt.Add(s.opts.TerminatedVisible)
		s.log.Info("instance deleted", "instance", name, "zone", zone)
	}
	doneAt := now.Add(s.opDelay)
	if in.terminatedAt.After(doneAt) {
		doneAt = in.terminatedAt
	}
	op := s.newOperation(zone, "delete", apiBase+s.instancePath(zone, name), in.id, rid, now, doneAt, nil)
	return s.operationJSON(op, now), nil
}

// instanceJSON renders in as GCE does: what the client sent, with the
// fields GCE fills in.
func (s *Server) instanceJSON(in *instance, now time.Time) map[string]any {
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
	if !now.Before(in.runningAt) {
		out["lastStartTimestamp"] = formatTime(in.runningAt)
	}
	if status == "TERMINATED" {
		out["lastStopTimestamp"] = formatTime(in.terminatedAt)
	}
	nic := map[string]any{}
	if nics, _ := in.body["networkInterfaces"].([]any); len(nics) > 0 {
		if first, ok := nics[0].(map[string]any); ok {
			nic = maps.Clone(first)
		}
	}
	nic["name"] = "nic0"
	nic["networkIP"] = in.networkIP
	s.linkNIC(nic)
	out["networkInterfaces"] = []any{nic}
	return out
}

// page is one page of a list: the instances on it and the token of the
// next, "" on the last.
type page struct {
	items []*instance
	next  string
}

// listPage selects the visible instances of zones that match the
// request's filter, in insert order, and returns the page its maxResults
// and pageToken ask for. The caller holds s.mu.
func (s *Server) listPage(q request, zones []string, now time.Time) (page, error) {
	v := q.r.URL.Query()
	match, err := parseFilter(v.Get("filter"))
	if err != nil {
		return page{}, err
	}
	limit, from, err := pageParams(v)
	if err != nil {
		return page{}, err
	}
	var out page
	for _, in := range s.order {
		if in.seq < from || !slices.Contains(zones, in.key.zone) || !in.visible(now) || !match(s.fields(in, now)) {
			continue
		}
		if len(out.items) == limit {
			out.next = pageToken(in.seq)
			break
		}
		out.items = append(out.items, in)
	}
	return out, nil
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
	out := map[string]any{
		"kind": "compute#instanceList", "id": "projects/" + s.opts.Project + "/zones/" + q.zone() + "/instances",
		"selfLink": s.zoneURL(q.zone()) + "/instances",
	}
	if len(p.items) > 0 {
		items := make([]any, 0, len(p.items))
		for _, in := range p.items {
			items = append(items, s.instanceJSON(in, now))
		}
		out["items"] = items
	}
	if p.next != "" {
		out["nextPageToken"] = p.next
	}
	return out, nil
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
	items := map[string]any{}
	for _, zone := range s.opts.Zones {
		scope := "zones/" + zone
		var list []any
		for _, in := range p.items {
			if in.key.zone == zone {
				list = append(list, s.instanceJSON(in, now))
			}
		}
		if len(list) > 0 {
			items[scope] = map[string]any{"instances": list}
			continue
		}
		items[scope] = noResultsOnPage(scope)
	}
	out := map[string]any{
		"kind": "compute#instanceAggregatedList", "id": "projects/" + s.opts.Project + "/aggregated/instances",
		"items": items, "selfLink": apiBase + "projects/" + s.opts.Project + "/aggregated/instances",
	}
	if p.next != "" {
		out["nextPageToken"] = p.next
	}
	return out, nil
}
