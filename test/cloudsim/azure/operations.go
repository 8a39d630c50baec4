package azuresim

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Operation statuses, as ARM's operation status resource writes them.
const (
	OperationInProgress = "InProgress"
	OperationSucceeded  = "Succeeded"
	OperationFailed     = "Failed"
	OperationCanceled   = "Canceled"
)

// operation is a long-running operation on a VM: its create (InProgress
// until the VM is Succeeded or Failed; Canceled by a delete), an update
// (Succeeded at once) or its delete (InProgress until the VM is gone).
// Its end is kept once reached.
type operation struct {
	id        string
	kind      string // create, update, delete
	vm        *vm
	startedAt time.Time
	final     string // "" while InProgress
	err       *armError
	endedAt   time.Time
	// disk is the disk of a disk's operation (disk-create, disk-update,
	// disk-delete); vm is nil then.
	disk *disk
	// pending, for an update that attaches or detaches disks, reports
	// whether they still are; the caller holds s.mu.
	pending func(now time.Time) bool
}

// newDiskOperation records an operation on a disk. The caller holds
// s.mu.
func (s *Server) newDiskOperation(kind string, d *disk, now time.Time) *operation {
	return s.record(&operation{kind: kind, disk: d}, now)
}

// newOperation records an operation on v. The caller holds s.mu.
func (s *Server) newOperation(kind string, v *vm, now time.Time) *operation {
	return s.record(&operation{kind: kind, vm: v}, now)
}

// record gives op its ID and start, keeps it for its polls and settles
// it at once (an operation that has nothing to wait for is done). The
// caller holds s.mu.
func (s *Server) record(op *operation, now time.Time) *operation {
	op.id, op.startedAt = newGUID(), now
	s.operations[op.id] = op
	op.settle(now)
	return op
}

// settle ends the operation if its VM reached the state that ends it.
// The caller holds s.mu.
func (op *operation) settle(now time.Time) {
	if op.final != "" {
		return
	}
	v := op.vm
	switch op.kind {
	case "update":
		switch {
		case op.pending != nil && op.pending(now):
		case op.err != nil:
			op.final, op.endedAt = OperationFailed, now
		default:
			op.final, op.endedAt = OperationSucceeded, now
		}
	case "disk-update":
		op.final, op.endedAt = OperationSucceeded, now
	case "disk-create":
		switch op.disk.provisioningState(now) {
		case StateSucceeded:
			op.final, op.endedAt = OperationSucceeded, now
		case StateFailed:
			op.final, op.err, op.endedAt = OperationFailed, op.disk.madeErr, now
		}
	case "disk-delete":
		if op.disk.gone(now) {
			op.final, op.endedAt = OperationSucceeded, now
		}
	case "create":
		switch v.provisioningState(now) {
		case StateSucceeded:
			op.final, op.endedAt = OperationSucceeded, later(v.runningAt, op.startedAt)
		case StateFailed:
			op.final, op.err, op.endedAt = OperationFailed, v.failed(now), now
		}
	case "delete":
		if v.gone(now) {
			op.final, op.endedAt = OperationSucceeded, later(v.goneAt, v.cell.StoppedAt)
		}
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lroHeader is the headers of an answer that started op: its
// Azure-AsyncOperation (and, for a delete, its Location) on this host
// with the request's api-version, and Retry-After.
func (s *Server) lroHeader(r *http.Request, op *operation, location bool) http.Header {
	h := http.Header{}
	h.Set("Azure-AsyncOperation", s.operationURL(r, "operations", op.id))
	if location {
		h.Set("Location", s.operationURL(r, "operationResults", op.id))
	}
	h.Set("Retry-After", s.retryAfter())
	return h
}

// operationURL is the URL of an operation's status (operations) or
// result (operationResults).
func (s *Server) operationURL(r *http.Request, what, id string) string {
	u := url.URL{
		Scheme: "https", Host: r.Host,
		Path:     fmt.Sprintf("/subscriptions/%s/providers/Microsoft.Compute/locations/%s/%s/%s", s.opts.Subscription, s.opts.Location, what, id),
		RawQuery: url.Values{"api-version": {r.URL.Query().Get("api-version")}}.Encode(),
	}
	return u.String()
}

// retryAfter is Options.RetryAfter in whole seconds.
func (s *Server) retryAfter() string {
	return strconv.Itoa(int(s.opts.RetryAfter.Round(time.Second) / time.Second))
}

// readOperation answers with render of the operation q names, settled
// now, or 404.
func (s *Server) readOperation(q request, render func(*operation) (*answer, error)) (*answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.operations[strings.ToLower(q.name)]
	if op == nil || !strings.EqualFold(q.sub, s.opts.Location) {
		return nil, &armError{Status: http.StatusNotFound, Code: CodeResourceNotFound,
			Message: fmt.Sprintf("The operation '%s' in location '%s' was not found.", q.name, q.sub)}
	}
	now := s.now()
	s.settleDisksLocked(now)
	op.settle(now)
	return render(op)
}

// getOperation answers Operations_Get, the Azure-AsyncOperation URL:
// {"status":"InProgress"}, then Succeeded, or Failed or Canceled with
// ARM's error object.
func (s *Server) getOperation(q request) (*answer, error) {
	return s.readOperation(q, func(op *operation) (*answer, error) {
		body := map[string]any{"name": op.id, "startTime": formatTime(op.startedAt), "status": OperationInProgress}
		a := &answer{status: http.StatusOK, header: http.Header{}, body: body}
		if op.final == "" {
			a.header.Set("Retry-After", s.retryAfter())
			return a, nil
		}
		body["status"], body["endTime"] = op.final, formatTime(op.endedAt)
		if op.err != nil {
			body["error"] = op.err.detail()
		}
		return a, nil
	})
}

// getOperationResult answers OperationResults_Get, the Location URL: 202
// with Location and Retry-After while the operation runs, 204 once it
// succeeded, and its error once it failed.
func (s *Server) getOperationResult(q request) (*answer, error) {
	return s.readOperation(q, func(op *operation) (*answer, error) {
		switch op.final {
		case "":
			h := http.Header{}
			h.Set("Location", s.operationURL(q.r, "operationResults", op.id))
			h.Set("Retry-After", s.retryAfter())
			return &answer{status: http.StatusAccepted, header: h}, nil
		case OperationSucceeded:
			return &answer{status: http.StatusNoContent}, nil
		}
		e := *op.err
		e.Status = http.StatusConflict
		return nil, &e
	})
}
