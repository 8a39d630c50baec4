package gcesim

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// operation is a zonal operation (zone "" for a global one). Its status
// is computed when read: RUNNING from its insert until doneAt (and, for a
// delete, until its instance is TERMINATED), DONE after.
type operation struct {
	seq        uint64
	name       string
	zone       string
	opType     string // insert, delete, compute.instances.preempted
	targetLink string
	targetID   uint64
	id         uint64
	user       string // "" means the project's service account
	message    string // statusMessage
	insertTime time.Time
	doneAt     time.Time
	until      *instance // DONE no earlier than it is TERMINATED
	task       *task     // DONE no earlier than the DiskStarter's call returned
	err        *opError
}

// opError is what a failed operation carries.
type opError struct {
	code, message string
	// quota is the errorDetails' quotaInfo of a QUOTA_EXCEEDED.
	quota *quotaInfoJSON
	// httpStatus and httpMessage are httpErrorStatusCode and
	// httpErrorMessage; 0 leaves both out.
	httpStatus  int
	httpMessage string
}

// operationJSON is the Operation resource as GCE writes it.
type operationJSON struct {
	Kind                string        `json:"kind"`
	ID                  string        `json:"id"`
	Name                string        `json:"name"`
	Zone                string        `json:"zone,omitempty"`
	OperationType       string        `json:"operationType"`
	TargetLink          string        `json:"targetLink"`
	TargetID            string        `json:"targetId"`
	Status              string        `json:"status"`
	StatusMessage       string        `json:"statusMessage,omitempty"`
	User                string        `json:"user"`
	Progress            int           `json:"progress"`
	InsertTime          string        `json:"insertTime"`
	StartTime           string        `json:"startTime"`
	EndTime             string        `json:"endTime,omitempty"`
	Error               *opErrorsJSON `json:"error,omitempty"`
	HTTPErrorStatusCode int           `json:"httpErrorStatusCode,omitempty"`
	HTTPErrorMessage    string        `json:"httpErrorMessage,omitempty"`
	SelfLink            string        `json:"selfLink"`
}

type opErrorsJSON struct {
	Errors []opErrorJSON `json:"errors"`
}

type opErrorJSON struct {
	Code         string            `json:"code"`
	Message      string            `json:"message"`
	ErrorDetails []errorDetailJSON `json:"errorDetails,omitempty"`
}

type errorDetailJSON struct {
	QuotaInfo *quotaInfoJSON `json:"quotaInfo,omitempty"`
}

// quotaInfoJSON is a QUOTA_EXCEEDED's quotaInfo detail.
type quotaInfoJSON struct {
	MetricName string            `json:"metricName"`
	LimitName  string            `json:"limitName"`
	Dimensions map[string]string `json:"dimensions"`
	Limit      float64           `json:"limit"`
}

// newOperation starts an operation of opType on target in zone, DONE at
// doneAt, and records it under requestID when there is one. The caller
// holds s.mu.
func (s *Server) newOperation(zone, opType, targetLink string, targetID uint64, requestID string, now, doneAt time.Time, e *opError) *operation {
	op := &operation{
		name: fmt.Sprintf("operation-%d-%s-%s-%s", now.UnixMilli(), randomHex(13), randomHex(8), randomHex(8)),
		zone: zone, opType: opType, targetLink: targetLink, targetID: targetID, id: newID(),
		insertTime: now, doneAt: doneAt, err: e,
	}
	s.opSeq++
	op.seq = s.opSeq
	s.operations[instanceKey{zone, op.name}] = op
	s.opOrder = append(s.opOrder, op)
	if requestID != "" {
		s.requests[requestID] = op
	}
	return op
}

// done returns when op is DONE, or false while it is not known.
func (op *operation) done() (time.Time, bool) {
	end := op.doneAt
	if op.until != nil {
		t, ok := op.until.terminated()
		if !ok {
			return time.Time{}, false
		}
		end = later(t, end)
	}
	if op.task != nil {
		if !op.task.done {
			return time.Time{}, false
		}
		end = later(op.task.at, end)
	}
	return end, true
}

// operationJSON renders op as it is at now.
func (s *Server) operationJSON(op *operation, now time.Time) operationJSON {
	out := operationJSON{
		Kind: "compute#operation", ID: strconv.FormatUint(op.id, 10), Name: op.name,
		OperationType: op.opType, TargetLink: op.targetLink, TargetID: strconv.FormatUint(op.targetID, 10),
		Status: "RUNNING", StatusMessage: op.message,
		User:       cmp.Or(op.user, "kip-sim@"+s.opts.Project+".iam.gserviceaccount.com"),
		InsertTime: formatTime(op.insertTime), StartTime: formatTime(op.insertTime),
		SelfLink: apiBase + "projects/" + s.opts.Project + "/global/operations/" + op.name,
	}
	if op.zone != "" {
		out.Zone, out.SelfLink = s.zoneURL(op.zone), s.zoneURL(op.zone)+"/operations/"+op.name
	}
	end, ok := op.done()
	if !ok || now.Before(end) {
		return out
	}
	out.Status, out.Progress, out.EndTime = "DONE", 100, formatTime(end)
	e := op.err
	if e == nil && op.task != nil {
		e = op.task.err
	}
	if e != nil {
		item := opErrorJSON{Code: e.code, Message: e.message}
		if e.quota != nil {
			item.ErrorDetails = []errorDetailJSON{{QuotaInfo: e.quota}}
		}
		out.Error = &opErrorsJSON{[]opErrorJSON{item}}
		out.HTTPErrorStatusCode, out.HTTPErrorMessage = e.httpStatus, e.httpMessage
	}
	return out
}

// getOperation answers zoneOperations.get and globalOperations.get.
func (s *Server) getOperation(q request) (any, error) {
	zone, name, path := q.args[0], q.args[1], fmt.Sprintf("projects/%s/zones/%s/operations/%s", q.project, q.args[0], q.args[1])
	if zone == "" {
		path = fmt.Sprintf("projects/%s/global/operations/%s", q.project, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.operations[instanceKey{zone, name}]
	if op == nil {
		return nil, notFound(path)
	}
	return s.operationJSON(op, s.now()), nil
}

// waitOperation answers zoneOperations.wait and globalOperations.wait:
// the operation once it is
// DONE, or as it is when Options.MaxWait (real time) has passed or the
// client gave up. GCE documents that wait may return early, so a client
// must look at the status either way.
func (s *Server) waitOperation(q request) (any, error) {
	deadline := time.NewTimer(s.opts.MaxWait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := s.getOperation(q)
		if err != nil || out.(operationJSON).Status == "DONE" {
			return out, err
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return out, nil
		case <-q.r.Context().Done():
			return out, nil
		}
	}
}

// randomHex returns n random lowercase hex digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// newID returns a random 19-digit resource ID, as GCE's are.
func newID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return 1_000_000_000_000_000_000 + v%8_000_000_000_000_000_000
}

// routeOperation routes the operations' paths: zones/{z}/operations[/{op}[/wait]],
// global/operations[/{op}[/wait]] (global operations are kept under the
// zone "") and aggregated/operations.
func routeOperation(method string, p []string) (routed, bool) {
	get, post := method == http.MethodGet, method == http.MethodPost
	switch {
	case p[0] == "zones" && len(p) == 3 && get:
		return routed{"compute.zoneOperations.list", true, []string{p[1]}, (*Server).listOperations}, true
	case p[0] == "zones" && len(p) == 4 && get:
		return routed{"compute.zoneOperations.get", true, []string{p[1], p[3]}, (*Server).getOperation}, true
	case p[0] == "zones" && len(p) == 5 && p[4] == "wait" && post:
		return routed{"compute.zoneOperations.wait", true, []string{p[1], p[3]}, (*Server).waitOperation}, true
	case p[0] == "global" && len(p) == 2 && get:
		return routed{"compute.globalOperations.list", false, []string{""}, (*Server).listOperations}, true
	case p[0] == "global" && len(p) == 3 && get:
		return routed{"compute.globalOperations.get", false, []string{"", p[2]}, (*Server).getOperation}, true
	case p[0] == "global" && len(p) == 4 && p[3] == "wait" && post:
		return routed{"compute.globalOperations.wait", false, []string{"", p[2]}, (*Server).waitOperation}, true
	case p[0] == "aggregated" && len(p) == 2 && get:
		return routed{"compute.globalOperations.aggregatedList", false, nil, (*Server).aggregatedOperations}, true
	}
	return routed{}, false
}

// operationFields are the fields an operations list filter may name.
var operationFields = map[string]bool{
	"name": true, "operationType": true, "targetLink": true, "targetId": true, "status": true, "user": true, "zone": true,
}

// operationField is the value of a filter's field of op.
func (s *Server) operationField(op *operation, now time.Time) func(string) (string, bool) {
	j := s.operationJSON(op, now)
	return func(name string) (string, bool) {
		switch name {
		case "name":
			return j.Name, true
		case "operationType":
			return j.OperationType, true
		case "targetLink":
			return j.TargetLink, true
		case "targetId":
			return j.TargetID, true
		case "status":
			return j.Status, true
		case "user":
			return j.User, true
		case "zone":
			return op.zone, op.zone != ""
		}
		return "", false
	}
}

// operationPage is the page of the operations of scopes (zones; "" for
// global) that q asks for, in insert order. The caller holds s.mu.
func (s *Server) operationPage(q request, scopes []string, now time.Time) (page[*operation], error) {
	return paginate(q, s.opOrder, operationFields,
		func(op *operation) uint64 { return op.seq },
		func(op *operation) bool { return slices.Contains(scopes, op.zone) },
		func(op *operation) func(string) (string, bool) { return s.operationField(op, now) })
}

// listOperations answers zoneOperations.list and globalOperations.list
// (zone "").
func (s *Server) listOperations(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	zone := q.args[0]
	p, err := s.operationPage(q, []string{zone}, now)
	if err != nil {
		return nil, err
	}
	scope := "zones/" + zone
	if zone == "" {
		scope = "global"
	}
	return listJSON(s, "compute#operationList", scope+"/operations", p,
		func(op *operation) any { return s.operationJSON(op, now) }), nil
}

// aggregatedOperations answers globalOperations.aggregatedList: a scope
// per zone, the region and global, each with its operations on this page
// or GCE's NO_RESULTS_ON_PAGE warning.
func (s *Server) aggregatedOperations(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	p, err := s.operationPage(q, append([]string{""}, s.opts.Zones...), now)
	if err != nil {
		return nil, err
	}
	scopes := []string{"global", "regions/" + s.opts.Region}
	for _, z := range s.opts.Zones {
		scopes = append(scopes, "zones/"+z)
	}
	return aggregatedJSON(s, "compute#operationAggregatedList", "operations", scopes, p,
		func(op *operation) string {
			if op.zone == "" {
				return "global"
			}
			return "zones/" + op.zone
		},
		func(op *operation) any { return s.operationJSON(op, now) }), nil
}
