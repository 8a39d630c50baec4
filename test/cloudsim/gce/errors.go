package gcesim

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
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
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Reason, e.Message) }

// notFound is GCE's 404 for the resource at path (projects/p/zones/z/…).
func notFound(path string) *apiError {
	return &apiError{http.StatusNotFound, "notFound", fmt.Sprintf("The resource '%s' was not found", path)}
}

// alreadyExists is GCE's 409 for a second resource of the same name.
func alreadyExists(path string) *apiError {
	return &apiError{http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource '%s' already exists", path)}
}

// invalid is GCE's 400 for a field's value; why follows GCE's sentence.
func invalid(field, value, why string) *apiError {
	return &apiError{http.StatusBadRequest, "invalid", fmt.Sprintf("Invalid value for field '%s': '%s'. %s", field, value, why)}
}

// unserved answers a path or method the simulator does not serve (GCE
// itself answers an unknown path with an HTML 404).
func unserved(r *http.Request) *apiError {
	return &apiError{http.StatusNotFound, "notFound", fmt.Sprintf("The GCE simulator does not serve %s %s", r.Method, r.URL.Path)}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Errors  []errorItem `json:"errors"`
}

type errorItem struct {
	Message string `json:"message"`
	Domain  string `json:"domain"`
	Reason  string `json:"reason"`
}

func writeError(w http.ResponseWriter, log *slog.Logger, e *apiError) {
	writeJSON(w, log, e.Status, errorBody{errorDetail{
		Code: e.Status, Message: e.Message,
		Errors: []errorItem{{Message: e.Message, Domain: "global", Reason: e.Reason}},
	}})
}

func writeJSON(w http.ResponseWriter, log *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Error("encoding a GCE answer", "error", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"message":"encoding the answer","errors":[{"reason":"backendError"}]}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
