package gcesim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/kipcell/kip/test/cloudsim/simhttp"
)

// apiError is an error answer, written as GCE writes it:
//
//	{"error":{"code":404,"message":"…","errors":[{"message":"…","domain":"global","reason":"notFound"}]}}
//
// which the client surfaces as an *apierror.APIError wrapping a
// *googleapi.Error whose Errors[0].Reason is Reason.
type apiError struct {
	Status  int
	Reason  string
	Message string
	// Domain is the error's domain; empty means global.
	Domain string
	// RPCStatus and Details are the error's status and details, which
	// GCE's quota system adds (PERMISSION_DENIED and a
	// google.rpc.ErrorInfo); empty for the API's own errors.
	RPCStatus string
	Details   []any
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Reason, e.Message) }

// notFound is GCE's 404 for the resource at path (projects/p/zones/z/…).
func notFound(path string) *apiError {
	return &apiError{Status: http.StatusNotFound, Reason: "notFound", Message: fmt.Sprintf("The resource '%s' was not found", path)}
}

// alreadyExists is GCE's 409 for a second resource of the same name.
func alreadyExists(path string) *apiError {
	return &apiError{Status: http.StatusConflict, Reason: "alreadyExists", Message: fmt.Sprintf("The resource '%s' already exists", path)}
}

// invalid is GCE's 400 for a field's value; why follows GCE's sentence.
func invalid(field, value, why string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Reason: "invalid", Message: fmt.Sprintf("Invalid value for field '%s': '%s'. %s", field, value, why)}
}

// unserved answers a path or method the simulator does not serve (GCE
// itself answers an unknown path with an HTML 404).
func unserved(r *http.Request) *apiError {
	return &apiError{Status: http.StatusNotFound, Reason: "notFound", Message: fmt.Sprintf("The GCE simulator does not serve %s %s", r.Method, r.URL.Path)}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Errors  []errorItem `json:"errors"`
	Status  string      `json:"status,omitempty"`
	Details []any       `json:"details,omitempty"`
}

type errorItem struct {
	Message string `json:"message"`
	Domain  string `json:"domain"`
	Reason  string `json:"reason"`
}

// rateLimited is GCE's answer to a project over its API rate quota.
func rateLimited(project string) *apiError {
	return &apiError{
		Status: http.StatusForbidden, Reason: "rateLimitExceeded", Domain: "usageLimits",
		Message: fmt.Sprintf("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "+
			"'compute.googleapis.com' for consumer 'project:%s'.", project),
		RPCStatus: "PERMISSION_DENIED",
		Details: []any{map[string]any{
			"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
			"metadata": map[string]any{
				"service": "compute.googleapis.com", "consumer": "projects/" + project, "quota_metric": "compute.googleapis.com/default",
				"quota_limit": "defaultPerMinutePerProject", "quota_location": "global",
			},
		}},
	}
}

// usageLimitReasons are the reasons GCE answers in the usageLimits domain.
var usageLimitReasons = map[string]bool{"rateLimitExceeded": true, "userRateLimitExceeded": true, "quotaExceeded": true, "dailyLimitExceeded": true}

// faultError is an injected fault as GCE writes its errors.
func faultError(f *Fault) *apiError {
	e := &apiError{Status: cmp.Or(f.HTTPStatus, http.StatusBadRequest), Reason: f.Code, Message: cmp.Or(f.Message, f.Code)}
	if usageLimitReasons[f.Code] {
		e.Domain = "usageLimits"
	}
	return e
}

func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, e *apiError) {
	writeJSON(w, r, log, e.Status, errorBody{errorDetail{
		Code: e.Status, Message: e.Message,
		Errors: []errorItem{{Message: e.Message, Domain: cmp.Or(e.Domain, "global"), Reason: e.Reason}},
		Status: e.RPCStatus, Details: e.Details,
	}})
}

func writeJSON(w http.ResponseWriter, r *http.Request, log *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Error("encoding a GCE answer", "error", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"message":"encoding the answer","errors":[{"reason":"backendError"}]}}`)
	}
	simhttp.Write(w, r, status, "application/json; charset=UTF-8", b)
}
