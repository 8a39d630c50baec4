package aws

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
	"github.com/kipcell/kip/plugins/aws/catalog"
)

// EC2 error codes the plugin tells apart
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
const (
	codeInstanceNotFound     = "InvalidInstanceID.NotFound"
	codeIdempotentMismatch   = "IdempotentParameterMismatch"
	codeUnauthorized         = "UnauthorizedOperation"
	codeRequestLimitExceeded = "RequestLimitExceeded"
	// The account's quotas (errors-overview.html, "Client error codes"):
	// MaxSpotInstanceCountExceeded, the Spot Instance count or vCPU limit
	// ("You've reached the limit on the number of Spot Instances that you
	// can launch"); VcpuLimitExceeded, the On-Demand vCPU limit of the
	// instance's quota group ("the limit on the number of vCPUs ...
	// assigned to the running instances"; ec2/latest/instancetypes:
	// On-Demand Instance quotas); InstanceLimitExceeded, the older limit on
	// the number of instances running at once.
	codeSpotQuota     = "MaxSpotInstanceCountExceeded"
	codeVcpuQuota     = "VcpuLimitExceeded"
	codeInstanceQuota = "InstanceLimitExceeded"
)

// Error codes by the kind they map to.
var (
	// No capacity for this offering now: the host tries its next one. EC2
	// answers Unsupported for a type the zone does not sell, and
	// InsufficientFreeAddressesInSubnet when the zone's subnet is full.
	capacityCodes = codeSet("InsufficientInstanceCapacity", "InsufficientHostCapacity",
		"InsufficientReservedInstanceCapacity", "InsufficientFreeAddressesInSubnet",
		"SpotMaxPriceTooLow", "Unsupported")
	throttleCodes = codeSet(codeRequestLimitExceeded, "Throttling", "ThrottlingException",
		"RequestThrottled", "TooManyRequestsException")
	quotaCodes    = codeSet(codeVcpuQuota, codeInstanceQuota, codeSpotQuota, "VolumeLimitExceeded")
	notFoundCodes = codeSet(codeInstanceNotFound, "InvalidInstanceID.Malformed")
	// The account or its credentials, not the request.
	credentialCodes = codeSet("AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException",
		"SignatureDoesNotMatch", "ExpiredToken", "OptInRequired", "Blocked")
	serverCodes = codeSet("InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
		"ServerException")
	// Codes that name the configuration key at fault: refusals for good,
	// like those of unsupportedCodes (the host backs off to 30 minutes and
	// says so on the pod). AuthFailure.ServiceLinkedRoleCreationNotPermitted
	// (errors-overview.html: "The user who made the request does not have
	// the required permissions to create the service-linked role"): the
	// first spot launch of an account creates the AWSServiceRoleForEC2Spot
	// role, which the plugin's credentials may not; create it once or allow
	// iam:CreateServiceLinkedRole.
	configCodes = map[string]string{
		"AuthFailure.ServiceLinkedRoleCreationNotPermitted": "credentials",
		"InvalidAMIID.NotFound":                             "image",
		"InvalidAMIID.Malformed":                            "image",
		"InvalidAMIID.Unavailable":                          "image",
		"InvalidSubnetID.NotFound":                          "subnets",
		"InvalidSubnetID.Malformed":                         "subnets",
		"InvalidVpcID.NotFound":                             "vpcID",
		"InvalidGroup.NotFound":                             "securityGroups",
		"InvalidSecurityGroupID.NotFound":                   "securityGroups",
		"InvalidGroupId.Malformed":                          "securityGroups",
	}
)

// unsupportedCodes are refusals of a request field, for good, by the
// LaunchRequest field (pluginapi's Field names) they refuse:
// InstanceCreditSpecification.NotSupported (errors-overview.html: "The
// specified instance does not support CPU credits"), unlimited credits
// asked for a type that is not burstable; InvalidBlockDeviceMapping ("the
// block device mapping ... is not valid"), here the root volume size asked
// for, smaller than the image's snapshot.
var unsupportedCodes = map[string]string{
	"InstanceCreditSpecification.NotSupported": pluginapi.FieldUnlimitedCPUCredits,
	"InvalidBlockDeviceMapping":                pluginapi.FieldVolumeSizeGiB,
}

func codeSet(codes ...string) map[string]bool {
	m := make(map[string]bool, len(codes))
	for _, c := range codes {
		m[c] = true
	}
	return m
}

// throttleRetryAfter is the RetryAfter of a Throttled error: EC2 gives no
// hint, and its buckets refill every second.
const throttleRetryAfter = time.Second

// errorCode returns the AWS error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// mapError translates an error of the EC2 or ECR operation op into the
// contract's kinds; context errors pass through unchanged so that callers
// see context.Canceled and context.DeadlineExceeded as such. An error of no
// kind keeps the code and message for the operator.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	if kit.IsContextError(err) {
		return err
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		if se := (*smithyhttp.RequestSendError)(nil); errors.As(err, &se) {
			return pluginapi.NewTransient("%s: %v", op, err)
		}
		return kit.NotAnAPIError(op, err)
	}
	code, text := ae.ErrorCode(), apiText(op, err)
	switch {
	case throttleCodes[code]:
		return pluginapi.NewThrottled(throttleRetryAfter, text)
	case quotaCodes[code]:
		return pluginapi.NewQuotaExceeded("%s", text)
	case notFoundCodes[code]:
		return pluginapi.NewNotFound("%s", text)
	case serverCodes[code] || httpStatus(err) >= 500:
		return pluginapi.NewTransient("%s", text)
	case credentialCodes[code]:
		return pluginapi.NewInvalidConfig("credentials", "AWS refused the credentials: %s", text)
	case configCodes[code] != "":
		return pluginapi.NewInvalidConfig(configCodes[code], "%s", text)
	case unsupportedCodes[code] != "":
		return pluginapi.NewUnsupportedField(unsupportedCodes[code], "%s", text)
	case code == "InvalidParameterValue" && strings.Contains(strings.ToLower(ae.ErrorMessage()), "iaminstanceprofile"):
		return pluginapi.NewInvalidConfig("instanceProfile", "%s", text)
	case code == codeUnauthorized:
		return fmt.Errorf("the plugin's IAM policy does not allow %s (deploy/aws/iam-policy.json lists what it needs): %s", action(op), text)
	}
	return fmt.Errorf("%s", text)
}

// apiText is "op: code: message" for an AWS API error, else op and err.
func apiText(op string, err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%s: %s: %s", op, ae.ErrorCode(), ae.ErrorMessage())
	}
	return fmt.Sprintf("%s: %v", op, err)
}

// mapLaunchError is mapError for RunInstances, which also knows the
// offering that had no capacity, and what a quota covers: a spot quota
// every spot offering; a vCPU quota the instance type's quota group
// (quotaGroupTypes) with the launch's capacity type; the instance count
// every type of that capacity type. EC2 answers Unsupported for a type the
// zone does not sell: that offering has no capacity, for good.
func mapLaunchError(err error, instanceType, zone string, capacity pluginapi.CapacityType) error {
	code := errorCode(err)
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return mapError("RunInstances", err)
	}
	text := code + ": " + ae.ErrorMessage()
	switch {
	case capacityCodes[code]:
		return pluginapi.NewInsufficientCapacity(instanceType, zone, capacity, text)
	case code == codeSpotQuota:
		return pluginapi.NewQuotaExceededFor(nil, pluginapi.CapacitySpot, text)
	case code == codeVcpuQuota:
		return pluginapi.NewQuotaExceededFor(quotaGroupTypes(instanceType), capacity, text)
	case code == codeInstanceQuota:
		return pluginapi.NewQuotaExceededFor(nil, capacity, text)
	case code == codeIdempotentMismatch:
		// Launch looked for the cell's instance and did not see it yet:
		// EC2 shows a new instance to Describe a while after it answered
		// RunInstances. A retry soon finds it (it starts nothing).
		return pluginapi.NewTransient("%s (the cell's instance, launched earlier with other parameters, is not visible yet)", text)
	}
	return mapError("RunInstances", err)
}

// quotaGroup names the vCPU quota an instance type counts against: EC2
// counts On-Demand and Spot vCPUs per group of families ("Running
// On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "... G and
// VT ...", "... P ...", "... X ...", "... F ...", "... Inf ...", "... DL
// ...", "... Trn ...", "... HPC ...", "... High Memory ...", and Mac;
// https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html).
func quotaGroup(instanceType string) string {
	family, _, _ := strings.Cut(instanceType, ".")
	for _, g := range []struct{ prefix, group string }{
		{"u-", "high-memory"}, {"mac", "mac"}, {"inf", "inf"}, {"trn", "trn"}, {"dl", "dl"}, {"hpc", "hpc"},
		{"vt", "g"}, {"g", "g"}, {"p", "p"}, {"x", "x"}, {"f", "f"},
	} {
		if strings.HasPrefix(family, g.prefix) {
			return g.group
		}
	}
	if family != "" && strings.ContainsRune("acdhimrtz", rune(family[0])) {
		return "standard"
	}
	return family // a family this list does not know counts on its own
}

// quotaGroupTypes is every type of the embedded catalog in instanceType's
// quota group (at least instanceType itself).
func quotaGroupTypes(instanceType string) []string {
	group := quotaGroup(instanceType)
	out := []string{instanceType}
	cat, err := catalog.Load()
	if err != nil {
		return out
	}
	for _, t := range cat.Types {
		if t.Name != instanceType && quotaGroup(t.Name) == group {
			out = append(out, t.Name)
		}
	}
	return out
}

// httpStatus returns the HTTP status of a failed call, or 0.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// action is the IAM action of an operation ("ec2:RunInstances").
func action(op string) string {
	if op == "GetAuthorizationToken" {
		return "ecr:" + op
	}
	return "ec2:" + op
}

// noRetryForRefusals stops the SDK retrying a capacity or quota refusal:
// a retry cannot succeed soon, and the host has other offerings to try.
func noRetryForRefusals(err error) aws.Ternary {
	if code := errorCode(err); capacityCodes[code] || quotaCodes[code] {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}
