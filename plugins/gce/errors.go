package gce

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"github.com/kipcell/kip/pluginapi"
	apicatalog "github.com/kipcell/kip/pluginapi/catalog"
	"github.com/kipcell/kip/pluginapi/kit"
	"github.com/kipcell/kip/plugins/gce/catalog"
)

// Compute Engine answers a refused call in one of two ways: an HTTP error
// (googleapi.Error: the status, and errors[].reason such as notFound,
// alreadyExists, rateLimitExceeded, quotaExceeded, forbidden, invalid), or
// an operation that ends DONE with error.errors[] (code such as
// ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED; errorDetails[].quotaInfo
// names the quota), with or without httpErrorStatusCode
// (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-vm-creation,
// https://cloud.google.com/compute/docs/api/handling-errors). Both are
// mapped here, at the edge, to the contract's kinds.

// Operation error codes the plugin tells apart.
const (
	codeQuotaExceeded = "QUOTA_EXCEEDED"
	codeAlreadyExists = "RESOURCE_ALREADY_EXISTS"
	codeNotFound      = "RESOURCE_NOT_FOUND"
	codeRateLimit     = "RATE_LIMIT_EXCEEDED"
)

// capacityCodes are operation errors of a zone without capacity for the
// machine type now: the host tries its next offering.
var capacityCodes = []string{"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "STOCKOUT", "RESOURCE_POOL_EXHAUSTED"}

// HTTP error reasons the plugin tells apart.
var (
	throttleReasons = []string{"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED", "RESOURCE_EXHAUSTED"}
	serverReasons   = []string{"backendError", "internalError"}
)

// throttleRetryAfter is the RetryAfter of a Throttled error: Compute
// Engine's rate quotas are per minute and give no hint; a few seconds lets
// the plugin's own buckets refill.
const throttleRetryAfter = 5 * time.Second

// operationError is a failed operation's error.errors[0] (and how many
// followed), with the quota it names.
type operationError struct {
	op, code, message string
	metric            string // quotaInfo.metricName, or from the message
	httpStatus        int32
}

func (e *operationError) Error() string {
	return fmt.Sprintf("%s: operation failed: %s: %s", e.op, e.code, e.message)
}

// quotaRE finds the metric in a quota message: "Quota 'CPUS' exceeded.
// Limit: 24.0 in region us-central1."
var quotaRE = regexp.MustCompile(`Quota '([A-Z0-9_]+)' exceeded`)

// quotaMetric is the quota a quotaInfo.metricName names, as the quota
// messages and quotaScope write it: Compute Engine's metric names are
// services' ("compute.googleapis.com/preemptible_cpus" for
// PREEMPTIBLE_CPUS, limit name "PREEMPTIBLE-CPUS-per-project-region").
func quotaMetric(name string) string {
	return strings.ToUpper(strings.TrimPrefix(name, "compute.googleapis.com/"))
}

// opError returns the error of a finished operation, or nil: Wait
// returns nil for an operation that failed without httpErrorStatusCode,
// so every caller checks the operation itself.
func opError(name string, op *computepb.Operation) error {
	errs := op.GetError().GetErrors()
	if len(errs) == 0 {
		if code := op.GetHttpErrorStatusCode(); code >= 400 {
			return &operationError{op: name, code: fmt.Sprint(code), message: op.GetHttpErrorMessage(), httpStatus: code}
		}
		return nil
	}
	e := &operationError{op: name, code: errs[0].GetCode(), message: errs[0].GetMessage(), httpStatus: op.GetHttpErrorStatusCode()}
	for _, d := range errs[0].GetErrorDetails() {
		if m := quotaMetric(d.GetQuotaInfo().GetMetricName()); m != "" {
			e.metric = m
		}
	}
	if m := quotaRE.FindStringSubmatch(e.message); e.metric == "" && m != nil {
		e.metric = m[1]
	}
	if len(errs) > 1 {
		e.message += fmt.Sprintf(" (and %d more errors)", len(errs)-1)
	}
	return e
}

// apiError returns the HTTP status and first reason of a Compute Engine
// API error.
func apiError(err error) (ge *googleapi.Error, reason string, ok bool) {
	if !errors.As(err, &ge) {
		return nil, "", false
	}
	if len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	return ge, reason, true
}

// isNotFound reports whether err is Compute Engine's 404 (or notFound).
func isNotFound(err error) bool {
	ge, reason, ok := apiError(err)
	return ok && (ge.Code == 404 || reason == "notFound")
}

// isAlreadyExists reports whether err says the resource's name is taken.
func isAlreadyExists(err error) bool {
	var oe *operationError
	if errors.As(err, &oe) {
		return oe.code == codeAlreadyExists
	}
	ge, reason, ok := apiError(err)
	return ok && (ge.Code == 409 || reason == "alreadyExists")
}

// isPermission reports whether err is a refusal for want of permission.
func isPermission(err error) bool {
	ge, reason, ok := apiError(err)
	return ok && ge.Code == 403 && (reason == "forbidden" || reason == "accessNotConfigured" || reason == "" || reason == "insufficientPermissions" || reason == "IAM_PERMISSION_DENIED")
}

// mapError translates an error of the API method op (its REST name,
// "instances.insert") into the contract's kinds; context errors pass
// through unchanged. An error of no kind keeps the status and message for
// the operator.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	if kit.IsContextError(err) {
		return err
	}
	var oe *operationError
	if errors.As(err, &oe) {
		return mapOperationError(oe)
	}
	ge, reason, ok := apiError(err)
	if !ok {
		return kit.NotAnAPIError(op, err)
	}
	text := fmt.Sprintf("%s: %d %s: %s", op, ge.Code, reason, ge.Message)
	switch {
	case ge.Code == 429 || slices.Contains(throttleReasons, reason):
		return pluginapi.NewThrottled(throttleRetryAfter, text)
	case reason == "quotaExceeded":
		return pluginapi.NewQuotaExceeded("%s", text)
	case ge.Code == 404 || reason == "notFound":
		return pluginapi.NewNotFound("%s", text)
	case ge.Code >= 500 || slices.Contains(serverReasons, reason):
		return pluginapi.NewTransient("%s", text)
	case ge.Code == 401:
		return pluginapi.NewInvalidConfig("credentialsFile", "Google refused the credentials: %s", text)
	case isPermission(err):
		return fmt.Errorf("the plugin's IAM role does not allow %s (deploy/gce/role.yaml lists what it needs): %s", op, text)
	}
	return fmt.Errorf("%s", text)
}

// mapOperationError maps a failed operation that is not a launch's.
func mapOperationError(oe *operationError) error {
	text := oe.Error()
	switch {
	case oe.code == codeRateLimit:
		return pluginapi.NewThrottled(throttleRetryAfter, text)
	case oe.code == codeQuotaExceeded:
		return pluginapi.NewQuotaExceeded("%s", text)
	case oe.code == codeNotFound:
		return pluginapi.NewNotFound("%s", text)
	case oe.httpStatus >= 500:
		return pluginapi.NewTransient("%s", text)
	}
	return oe
}

// launchFields are the insert's fields a refusal may name, by what the
// refusal says (Compute Engine: "Invalid value for field
// 'resource.machineType'", "The resource 'projects/p/global/images/x' was
// not found"), and what it means: the machine type or accelerator is not
// sold in the zone (no capacity, for good), or a configuration key is
// wrong, or the pod's volume size is.
var launchFields = []kit.FieldRule{
	{Match: []string{"machinetype", "machine type"}, Capacity: true},
	{Match: []string{"acceleratortype", "accelerator type", "guestaccelerators"}, Capacity: true},
	{Match: []string{"disksizegb", "disk size", "sizegb"}, Field: pluginapi.FieldVolumeSizeGiB},
	{Match: []string{"disktype", "disk type", "disktypes/"}, Key: "bootDisk.type"},
	{Match: []string{"sourceimage", "/images/", "image"}, Key: "image"},
	{Match: []string{"subnetwork"}, Key: "subnetwork"},
	{Match: []string{"network"}, Key: "network"},
	{Match: []string{"serviceaccount", "service account", "scopes"}, Key: "serviceAccount"},
	{Match: []string{"tags.items", "tag"}, Key: "networkTags"},
	{Match: []string{"labels", "label"}, Key: "labels"},
	{Match: []string{"metadata", "startup-script"}, Key: "startupScript"},
}

// invalidCodes are operation error codes and HTTP reasons of a refused
// request field.
var invalidCodes = []string{"INVALID_FIELD_VALUE", "BAD_REQUEST", "INVALID_USAGE", codeNotFound, "UNSUPPORTED_OPERATION",
	"invalid", "badRequest", "notFound", "invalidParameter", "required", "conditionNotMet"}

// mapLaunchError is mapError for instances.insert and its operation, which
// also knows the offering that had no capacity, and what a quota covers
// (quotaScope).
func mapLaunchError(err error, instanceType, zone string, capacity pluginapi.CapacityType) error {
	var code, message, metric string
	var oe *operationError
	if errors.As(err, &oe) {
		code, message, metric = oe.code, oe.message, oe.metric
	} else if ge, reason, ok := apiError(err); ok {
		code, message = reason, ge.Message
		if m := quotaRE.FindStringSubmatch(message); m != nil {
			metric = m[1]
		}
		if ge.Code == 404 && code == "" {
			code = "notFound"
		}
	} else {
		return mapError("instances.insert", err)
	}
	text := fmt.Sprintf("instances.insert: %s: %s", code, message)
	switch {
	case slices.Contains(capacityCodes, code):
		return pluginapi.NewInsufficientCapacity(instanceType, zone, capacity, text)
	case code == codeQuotaExceeded || code == "quotaExceeded":
		types, ct, scoped := quotaScope(metric, instanceType, capacity)
		if !scoped {
			return pluginapi.NewQuotaExceeded("%s", text)
		}
		return pluginapi.NewQuotaExceededFor(types, ct, text)
	case slices.Contains(invalidCodes, code):
		if refused := kit.RefusedField(launchFields, message, text, instanceType, zone, capacity); refused != nil {
			return refused
		}
	}
	return mapError("instances.insert", err)
}

// ownCPUQuota are the machine families with a CPU quota of their own
// (the Quota.Metric enum's <FAMILY>_CPUS: A2_CPUS, C2_CPUS, N2_CPUS, …);
// every other family (N1 with f1 and g1, E2) counts against the region's
// CPUS.
var ownCPUQuota = []string{"a2", "a3", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "g2", "h3", "m1", "m2", "m3", "n2", "n2d", "n4", "t2a", "t2d", "z3"}

// family is a machine type's family: its name up to the first -, and n1
// for N1's custom types (custom-2-4096), f1-micro and g1-small.
func family(machineType string) string {
	f, _, _ := strings.Cut(machineType, "-")
	switch f {
	case "custom", "f1", "g1":
		return "n1"
	}
	return f
}

// quotaScope says what a QUOTA_EXCEEDED for metric covers, so that the host
// marks those offerings unavailable and tries its next candidate:
//
//   - PREEMPTIBLE_CPUS: every type, spot;
//   - PREEMPTIBLE_<GPU>_GPUS: the types with that GPU, spot;
//   - <GPU>_GPUS (NVIDIA_T4_GPUS, …): the types with that GPU, the launch's
//     capacity type; GPUS_ALL_REGIONS: every GPU type, every capacity type;
//   - CPUS: the families without a CPU quota of their own, the launch's
//     capacity type; <FAMILY>_CPUS: that family's types;
//   - INSTANCES: every type, the launch's capacity type.
//
// The failed type itself is always covered. Any other metric (disks,
// addresses, CPUS_ALL_REGIONS) is unscoped: the host reports it.
func quotaScope(metric, instanceType string, capacity pluginapi.CapacityType) ([]string, pluginapi.CapacityType, bool) {
	cat, err := catalog.Load()
	if err != nil || metric == "" {
		return nil, "", false
	}
	pick := func(keep func(name, gpu string) bool) []string {
		out := []string{instanceType}
		for _, t := range cat.Types {
			if t.Name != instanceType && keep(t.Name, gpuQuotaName(t.GPU)) {
				out = append(out, t.Name)
			}
		}
		return out
	}
	preemptible := strings.HasPrefix(metric, "PREEMPTIBLE_")
	m := strings.TrimPrefix(metric, "PREEMPTIBLE_")
	ct := capacity
	if preemptible {
		ct = pluginapi.CapacitySpot
	}
	switch {
	case m == "CPUS" && preemptible:
		return nil, pluginapi.CapacitySpot, true
	case m == "CPUS":
		return pick(func(name, _ string) bool { return !slices.Contains(ownCPUQuota, family(name)) }), ct, true
	case m == "GPUS_ALL_REGIONS":
		return pick(func(_, gpu string) bool { return gpu != "" }), "", true
	case strings.HasSuffix(m, "_GPUS"):
		kind := strings.TrimSuffix(m, "_GPUS")
		return pick(func(_, gpu string) bool { return gpu != "" && gpu == kind }), ct, true
	case strings.HasSuffix(m, "_CPUS") && m != "CPUS_ALL_REGIONS":
		fam := strings.ToLower(strings.TrimSuffix(m, "_CPUS"))
		return pick(func(name, _ string) bool { return family(name) == fam }), ct, true
	case m == "INSTANCES":
		return nil, ct, true
	}
	return nil, "", false
}

// gpuQuotaName is the quota metric stem of a GPU kind as the catalog
// writes it: t4 → NVIDIA_T4, a100-80gb → NVIDIA_A100_80GB, l4 → NVIDIA_L4.
func gpuQuotaName(g *apicatalog.GPU) string {
	if g == nil || g.Count == 0 || g.Kind == "" {
		return ""
	}
	return "NVIDIA_" + strings.ToUpper(strings.ReplaceAll(g.Kind, "-", "_"))
}
