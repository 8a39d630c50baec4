package gcesim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Operation codes GCE puts in a failed operation's error.
const (
	CodeZoneResourcePoolExhausted = "ZONE_RESOURCE_POOL_EXHAUSTED"
)

// operation is a zonal operation. Its status is computed when read:
// RUNNING from its insert until doneAt, DONE after.
type operation struct {
	name       string
	zone       string
	opType     string // insert, delete
	targetLink string
	targetID   uint64
	id         uint64
	insertTime time.Time
	doneAt     time.Time
	err        *opError
}

// opError is what a failed operation carries.
type opError struct {
	code, message string
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
	Zone                string        `json:"zone"`
	OperationType       string        `json:"operationType"`
	TargetLink          string        `json:"targetLink"`
	TargetID            string        `json:"targetId"`
	Status              string        `json:"status"`
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
	Code    string `json:"code"`
	Message string `json:"message"`
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
	s.operations[instanceKey{zone, op.name}] = op
	if requestID != "" {
		s.requests[requestID] = op
	}
	return op
}

// json renders op as it is at now.
func (s *Server) operationJSON(op *operation, now time.Time) operationJSON {
	out := operationJSON{
		Kind: "compute#operation", ID: strconv.FormatUint(op.id, 10), Name: op.name,
		Zone: s.zoneURL(op.zone), OperationType: op.opType, TargetLink: op.targetLink,
		TargetID: strconv.FormatUint(op.targetID, 10), Status: "RUNNING", User: "kip-sim@" + s.opts.Project + ".iam.gserviceaccount.com",
		InsertTime: formatTime(op.insertTime), StartTime: formatTime(op.insertTime),
		SelfLink: s.zoneURL(op.zone) + "/operations/" + op.name,
	}
	if now.Before(op.doneAt) {
		return out
	}
	out.Status, out.Progress, out.EndTime = "DONE", 100, formatTime(op.doneAt)
	if op.err != nil {
		out.Error = &opErrorsJSON{[]opErrorJSON{{Code: op.err.code, Message: op.err.message}}}
		out.HTTPErrorStatusCode, out.HTTPErrorMessage = op.err.httpStatus, op.err.httpMessage
	}
	return out
}

// getOperation answers zoneOperations.get.
func (s *Server) getOperation(q request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.operations[instanceKey{q.zone(), q.args[1]}]
	if op == nil {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/operations/%s", q.project, q.zone(), q.args[1]))
	}
	return s.operationJSON(op, s.now()), nil
}

// waitOperation answers zoneOperations.wait: the operation once it is
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

// stockoutError is the error of an insert's operation in a zone without
// capacity, as GCE writes it.
func (s *Server) stockoutError(zone string, so Stockout) *opError {
	e := &opError{
		code: CodeZoneResourcePoolExhausted,
		message: fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  "+
			"Try a different zone, or try again later.", s.opts.Project, zone),
	}
	if !so.WithoutHTTPStatus {
		e.httpStatus, e.httpMessage = http.StatusServiceUnavailable, "SERVICE UNAVAILABLE"
	}
	return e
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
