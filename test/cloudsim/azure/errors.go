package azuresim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/kipcell/kip/test/cloudsim/simhttp"
)

// Error codes ARM answers, which tests and the plugin match.
const (
	CodeAllocationFailed                 = "AllocationFailed"
	CodeZonalAllocationFailed            = "ZonalAllocationFailed"
	CodeOverconstrainedAllocationRequest = "OverconstrainedAllocationRequest"
	CodeSkuNotAvailable                  = "SkuNotAvailable"
	CodeOperationNotAllowed              = "OperationNotAllowed"
	CodeConflict                         = "Conflict"
	CodePreconditionFailed               = "PreconditionFailed"
	CodeResourceNotFound                 = "ResourceNotFound"
	CodeInvalidParameter                 = "InvalidParameter"
	CodeTooManyRequests                  = "TooManyRequests"
	CodeOSProvisioningTimedOut           = "OSProvisioningTimedOut"
)

// armError is an error answer, written as ARM writes it:
//
//	{"error":{"code":"ResourceNotFound","message":"…","details":[…]}}
//
// which azcore surfaces as an *azcore.ResponseError whose ErrorCode is
// Code.
type armError struct {
	Status  int
	Code    string
	Message string
	Target  string
	Details []errorDetail
	// RetryAfter, when positive, is sent as Retry-After in whole seconds.
	RetryAfter float64
}

func (e *armError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// errorDetail is one of an error's details (and the error object of a
// failed operation).
type errorDetail struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Target  string        `json:"target,omitempty"`
	Details []errorDetail `json:"details,omitempty"`
}

func (e *armError) detail() errorDetail {
	return errorDetail{Code: e.Code, Message: e.Message, Target: e.Target, Details: e.Details}
}

// notFound is ARM's 404 for a resource of typ named name in rg.
func notFound(typ, rg, name string) *armError {
	return &armError{Status: http.StatusNotFound, Code: CodeResourceNotFound,
		Message: fmt.Sprintf("The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", typ, name, rg)}
}

// invalidParameter is Compute's 400 for a request's property.
func invalidParameter(target, message string) *armError {
	return &armError{Status: http.StatusBadRequest, Code: CodeInvalidParameter, Target: target, Message: message}
}

// unserved answers a path or method the simulator does not serve.
func unserved(r *http.Request) *armError {
	return &armError{Status: http.StatusNotFound, Code: "NoRegisteredProviderFound",
		Message: fmt.Sprintf("The ARM simulator does not serve %s %s", r.Method, r.URL.Path)}
}

// throttled is Compute's answer to a subscription over its request rate:
// 429 with Retry-After, OperationNotAllowed and a TooManyRequests detail
// naming the throttling policy.
func (s *Server) throttled() *armError {
	return &armError{
		Status: http.StatusTooManyRequests, Code: CodeOperationNotAllowed,
		Message: "The server rejected the request because too many requests have been received for this subscription.",
		Details: []errorDetail{{Code: CodeTooManyRequests, Target: "PutVMSubscriptionMaximum",
			Message: `{"operationGroup":"PutVMSubscriptionMaximum","startTime":"` + formatTime(s.now()) + `","endTime":"` +
				formatTime(s.now().Add(s.retryAfterThrottled())) + `","allowedRequestCount":1,"measuredRequestCount":2}`}},
		RetryAfter: s.retryAfterThrottled().Seconds(),
	}
}

// faultError is an injected fault as ARM writes its errors.
func faultError(f *Fault) *armError {
	e := &armError{Status: cmp.Or(f.HTTPStatus, http.StatusBadRequest), Code: f.Code, Message: cmp.Or(f.Message, f.Code)}
	if e.Status == http.StatusTooManyRequests {
		e.RetryAfter = 1
	}
	return e
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, e *armError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter))))
	}
	writeJSON(w, r, log, e.Status, errorBody{e.detail()})
}

func writeJSON(w http.ResponseWriter, r *http.Request, log *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Error("encoding an ARM answer", "error", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"InternalServerError","message":"encoding the answer"}}`)
	}
	simhttp.Write(w, r, status, "application/json; charset=utf-8", b)
}
