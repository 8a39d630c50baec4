package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kipcell/kip/pluginapi"
)

// EC2 error codes the plugin tells apart
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
const (
	codeInstanceNotFound     = "InvalidInstanceID.NotFound"
	codeIdempotentMismatch   = "IdempotentParameterMismatch"
	codeUnauthorized         = "UnauthorizedOperation"
	codeRequestLimitExceeded = "RequestLimitExceeded"
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
	quotaCodes = codeSet("VcpuLimitExceeded", "InstanceLimitExceeded",
		"MaxSpotInstanceCountExceeded", "VolumeLimitExceeded")
	notFoundCodes = codeSet(codeInstanceNotFound, "InvalidInstanceID.Malformed")
	// The account or its credentials, not the request.
	credentialCodes = codeSet("AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException",
		"SignatureDoesNotMatch", "ExpiredToken", "OptInRequired", "Blocked")
	serverCodes = codeSet("InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
		"ServerException")
	// Codes that name the configuration key at fault.
	configCodes = map[string]string{
		"InvalidAMIID.NotFound":           "image",
		"InvalidAMIID.Malformed":          "image",
		"InvalidAMIID.Unavailable":        "image",
		"InvalidSubnetID.NotFound":        "subnets",
		"InvalidSubnetID.Malformed":       "subnets",
		"InvalidVpcID.NotFound":           "vpcID",
		"InvalidGroup.NotFound":           "securityGroups",
		"InvalidSecurityGroupID.NotFound": "securityGroups",
		"InvalidGroupId.Malformed":        "securityGroups",
	}
)

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
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		var se *smithyhttp.RequestSendError
		var ne net.Error
		if errors.As(err, &se) || errors.As(err, &ne) {
			return pluginapi.NewTransient("%s: %v", op, err)
		}
		return fmt.Errorf("%s: %w", op, err)
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
// offering that had no capacity.
func mapLaunchError(err error, instanceType, zone string, capacity pluginapi.CapacityType) error {
	if code := errorCode(err); capacityCodes[code] {
		var ae smithy.APIError
		errors.As(err, &ae)
		return pluginapi.NewInsufficientCapacity(instanceType, zone, capacity, code+": "+ae.ErrorMessage())
	}
	return mapError("RunInstances", err)
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
