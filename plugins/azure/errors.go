package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// Azure Resource Manager answers a refused call in one of two ways: an HTTP
// error whose body is {"error": {"code", "message", "target", "details"}}
// (the SDK's *azcore.ResponseError, ErrorCode the code), or a long-running
// operation that ends {"status": "Failed", "error": {…}}, which the SDK's
// poller returns as an *azcore.ResponseError too
// (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors,
// https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure).
// Both are mapped here, at the edge, to the contract's kinds.

// capacityCodes are the codes of a location or zone without capacity for
// the VM size now, or a size not sold there: the host tries its next
// offering.
var capacityCodes = []string{
	"AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest",
	"OverconstrainedZonalAllocationRequest", "SkuNotAvailable",
}

// invalidCodes are the codes of a request Azure refused as malformed.
var invalidCodes = []string{"InvalidParameter", "BadRequest", "InvalidRequestContent", "InvalidTemplate",
	"ImageNotFound", "PlatformImageNotFound", "InvalidResourceReference", "LinkedInvalidPropertyId",
	"NotFound", "ResourceNotFound", "SubnetNotFound", "VMMarketplaceInvalidInput", "InvalidUserData", "InvalidCustomData"}

// defaultRetryAfter is the RetryAfter of a Throttled error whose answer
// gave no Retry-After.
const defaultRetryAfter = 5 * time.Second

// armError is Azure Resource Manager's error body.
type armError struct {
	Code    string     `json:"code"`
	Message string     `json:"message"`
	Target  string     `json:"target"`
	Details []armError `json:"details"`
}

// responseError returns the ResponseError in err, and its body's error:
// the code, the message and the target, the details' messages appended.
func responseError(err error) (*azcore.ResponseError, armError, bool) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil, armError{}, false
	}
	ae := armError{Code: re.ErrorCode}
	if re.RawResponse != nil {
		if body, perr := runtime.Payload(re.RawResponse); perr == nil {
			var wrap struct {
				Error armError `json:"error"`
			}
			if json.Unmarshal(body, &wrap) == nil && wrap.Error.Code != "" {
				ae = wrap.Error
			}
		}
	}
	if ae.Code == "" {
		ae.Code = re.ErrorCode
	}
	for _, d := range ae.Details {
		if d.Message != "" && !strings.Contains(ae.Message, d.Message) {
			ae.Message += " (" + d.Code + ": " + d.Message + ")"
		}
		if ae.Target == "" {
			ae.Target = d.Target
		}
	}
	return re, ae, true
}

// isNotFound reports whether err is Azure's 404 (ResourceNotFound,
// NotFound).
func isNotFound(err error) bool {
	re, ae, ok := responseError(err)
	return ok && (re.StatusCode == 404 || ae.Code == "ResourceNotFound" || ae.Code == "NotFound")
}

// isForbidden reports whether err is a refusal for want of permission
// (403 AuthorizationFailed).
func isForbidden(err error) bool {
	re, _, ok := responseError(err)
	return ok && re.StatusCode == 403
}

// retryAfter is the Retry-After of an answer (seconds, or an HTTP date),
// or defaultRetryAfter.
func retryAfter(re *azcore.ResponseError, now time.Time) time.Duration {
	if re.RawResponse == nil {
		return defaultRetryAfter
	}
	v := re.RawResponse.Header.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return defaultRetryAfter
}

// mapError translates an error of the ARM operation op (its operation ID,
// "VirtualMachines_Get") into the contract's kinds; context errors pass
// through unchanged. An error of no kind keeps the status, code and
// message for the operator.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	if kit.IsContextError(err) {
		return err
	}
	if isCredentialError(err) {
		return pluginapi.NewInvalidConfig("credentials", "%s: getting an Azure token: %v", op, err)
	}
	re, ae, ok := responseError(err)
	if !ok {
		return kit.NotAnAPIError(op, err)
	}
	text := fmt.Sprintf("%s: %d %s: %s", op, re.StatusCode, ae.Code, ae.Message)
	switch {
	case re.StatusCode == 429 || ae.Code == "TooManyRequests":
		return pluginapi.NewThrottled(retryAfter(re, time.Now()), text)
	case isQuota(ae):
		return pluginapi.NewQuotaExceeded("%s", text)
	case re.StatusCode == 404 || ae.Code == "ResourceNotFound" || ae.Code == "NotFound":
		return pluginapi.NewNotFound("%s", text)
	case re.StatusCode >= 500 || ae.Code == "Conflict" || ae.Code == "RetryableError":
		return pluginapi.NewTransient("%s", text)
	case re.StatusCode == 401:
		return pluginapi.NewInvalidConfig("credentials", "Azure refused the plugin's credentials: %s", text)
	case re.StatusCode == 403:
		return fmt.Errorf("the plugin's role does not allow %s (deploy/azure/role.json lists what it needs): %s", op, text)
	}
	return errors.New(text)
}

// isCredentialError reports whether err is azidentity's: a token it could
// not get (AuthenticationFailedError), or no credential of the chain
// available (an unexported NonRetriable error that names its credential
// type, such as DefaultAzureCredential or ManagedIdentityCredential).
func isCredentialError(err error) bool {
	var afe *azidentity.AuthenticationFailedError
	var nr interface{ NonRetriable() }
	var re *azcore.ResponseError
	return errors.As(err, &afe) ||
		(errors.As(err, &nr) && !errors.As(err, &re) && strings.Contains(err.Error(), "Credential"))
}

// quotaRE finds what a quota message names: "…exceeding approved
// standardDSv3Family Cores quota…", "…approved LowPriorityCores quota…",
// "…approved Total Regional Cores quota…".
var quotaRE = regexp.MustCompile(`(?i)exceeding approved (.+?) quota`)

// isQuota reports whether a refusal is a quota's: OperationNotAllowed
// whose message names one, or QuotaExceeded.
func isQuota(ae armError) bool {
	return ae.Code == "QuotaExceeded" || (ae.Code == "OperationNotAllowed" && strings.Contains(strings.ToLower(ae.Message), "quota"))
}

// launchFields are the configuration keys and request fields a refused
// PUT may name, by its target or message: Azure writes the property path
// ("imageReference", "osProfile.adminUsername",
// "networkProfile.networkInterfaceConfigurations[0]…subnet").
var launchFields = []kit.FieldRule{
	{Match: []string{"vmsize", "vm size", "hardwareprofile"}, Capacity: true},
	{Match: []string{"disksizegb", "disk size"}, Field: pluginapi.FieldVolumeSizeGiB},
	{Match: []string{"imagereference", "image", "plan"}, Key: "image"},
	{Match: []string{"networksecuritygroup"}, Key: "networkSecurityGroupID"},
	{Match: []string{"subnet", "virtualnetwork"}, Key: "subnetID"},
	{Match: []string{"userassignedidentities", "identity"}, Key: "identity"},
	{Match: []string{"adminusername"}, Key: "adminUsername"},
	{Match: []string{"publickeys", "ssh"}, Key: "sshPublicKey"},
	{Match: []string{"customdata"}, Key: "customData"},
	{Match: []string{"tags", "tag "}, Key: "tags"},
	{Match: []string{"zones", "zone"}, Key: "zones"},
}

// mapLaunchError is mapError for VirtualMachines_CreateOrUpdate and its
// operation, which also knows the offering that had no capacity, and what
// a quota covers (quotaScope).
func (cfg *config) mapLaunchError(err error, instanceType, zone string, capacity pluginapi.CapacityType) error {
	const op = "VirtualMachines_CreateOrUpdate"
	re, ae, ok := responseError(err)
	if !ok {
		return mapError(op, err)
	}
	text := fmt.Sprintf("%s: %s: %s", op, ae.Code, ae.Message)
	switch {
	case re.StatusCode == 429:
		return mapError(op, err)
	case slices.Contains(capacityCodes, ae.Code):
		return pluginapi.NewInsufficientCapacity(instanceType, zone, capacity, text)
	case isQuota(ae):
		types, ct, scoped := cfg.quotaScope(ae.Message, instanceType, capacity)
		if !scoped {
			return pluginapi.NewQuotaExceeded("%s", text)
		}
		return pluginapi.NewQuotaExceededFor(types, ct, text)
	case slices.Contains(invalidCodes, ae.Code) || re.StatusCode == 400:
		if refused := kit.RefusedField(launchFields, ae.Target+" "+ae.Message, text, instanceType, zone, capacity); refused != nil {
			return refused
		}
	}
	return mapError(op, err)
}

// quotaScope says what a quota refusal covers, from the quota its message
// names, so that the host marks those offerings unavailable and tries its
// next candidate:
//
//   - LowPriorityCores (Spot's regional vCPU quota): every size, spot;
//   - <family> Cores, such as standardDSv3Family: that family's sizes
//     (resourceSkus' family, when the plugin has listed them; else the
//     failed size alone), the launch's capacity type;
//   - Total Regional Cores: every size, the launch's capacity type (Spot
//     VMs count against LowPriorityCores instead).
//
// Any other quota is unscoped: the host reports it.
func (cfg *config) quotaScope(message, instanceType string, capacity pluginapi.CapacityType) ([]string, pluginapi.CapacityType, bool) {
	m := quotaRE.FindStringSubmatch(message)
	if m == nil {
		return nil, "", false
	}
	name := strings.ToLower(strings.TrimSpace(m[1]))
	switch {
	case strings.Contains(name, "lowpriority"):
		return nil, pluginapi.CapacitySpot, true
	case strings.Contains(name, "total regional"):
		return nil, capacity, true
	case strings.HasSuffix(name, "family cores"):
		family := strings.TrimSpace(strings.TrimSuffix(name, " cores"))
		types := []string{instanceType}
		if cfg.skus != nil {
			for _, t := range cfg.family(family) {
				if t != instanceType {
					types = append(types, t)
				}
			}
		}
		return types, capacity, true
	}
	return nil, "", false
}
