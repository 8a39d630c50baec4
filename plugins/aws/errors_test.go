package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kipcell/kip/pluginapi"
)

// apiError is an SDK error as a call returns it: an operation error
// wrapping the HTTP response error wrapping the API error.
func apiError(op, code string, status int) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: op, Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: "message of " + code},
	}}
}

// kind names the pluginapi kind of err, and its key for InvalidConfig.
func kind(err error) string {
	var ic *pluginapi.InvalidConfigError
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case pluginapi.IsNotFound(err):
		return "NotFound"
	case pluginapi.IsInsufficientCapacity(err):
		return "InsufficientCapacity"
	case pluginapi.IsQuotaExceeded(err):
		return "QuotaExceeded"
	case pluginapi.IsThrottled(err):
		return "Throttled"
	case errors.As(err, &ic):
		return "InvalidConfig:" + ic.Key
	case pluginapi.IsUnsupported(err):
		return "Unsupported"
	case pluginapi.IsTransient(err):
		return "Transient"
	}
	return "plain"
}

func TestMapError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"throttled", apiError("DescribeInstances", "RequestLimitExceeded", 503), "Throttled"},
		{"throttled (other spelling)", apiError("DescribeInstances", "Throttling", 400), "Throttled"},
		{"vCPU quota", apiError("RunInstances", "VcpuLimitExceeded", 400), "QuotaExceeded"},
		{"instance quota", apiError("RunInstances", "InstanceLimitExceeded", 400), "QuotaExceeded"},
		{"spot quota", apiError("RunInstances", "MaxSpotInstanceCountExceeded", 400), "QuotaExceeded"},
		{"not found", apiError("TerminateInstances", "InvalidInstanceID.NotFound", 400), "NotFound"},
		{"malformed ID", apiError("TerminateInstances", "InvalidInstanceID.Malformed", 400), "NotFound"},
		{"internal error", apiError("RunInstances", "InternalError", 500), "Transient"},
		{"unavailable", apiError("RunInstances", "Unavailable", 503), "Transient"},
		{"any 5xx", apiError("RunInstances", "SomethingNew", 502), "Transient"},
		{"network", &smithy.OperationError{OperationName: "RunInstances", Err: &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}}, "Transient"},
		{"auth failure", apiError("DescribeInstances", "AuthFailure", 401), "InvalidConfig:credentials"},
		{"expired token", apiError("DescribeInstances", "ExpiredToken", 400), "InvalidConfig:credentials"},
		{"unknown AMI", apiError("RunInstances", "InvalidAMIID.NotFound", 400), "InvalidConfig:image"},
		{"unknown subnet", apiError("RunInstances", "InvalidSubnetID.NotFound", 400), "InvalidConfig:subnets"},
		{"unknown group", apiError("RunInstances", "InvalidGroup.NotFound", 400), "InvalidConfig:securityGroups"},
		{"unauthorized", apiError("RunInstances", "UnauthorizedOperation", 403), "plain"},
		{"invalid parameter", apiError("RunInstances", "InvalidParameterValue", 400), "plain"},
		{"invalid parameter combination", apiError("RunInstances", "InvalidParameterCombination", 400), "plain"},
		{"idempotent mismatch", apiError("RunInstances", "IdempotentParameterMismatch", 400), "plain"},
		{"cancelled", &smithy.OperationError{OperationName: "RunInstances", Err: &smithy.CanceledError{Err: context.Canceled}}, "Canceled"},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "DeadlineExceeded"},
		{"other", errors.New("boom"), "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mapError("Op", tt.err)
			if kind(got) != tt.want {
				t.Errorf("mapError(%v) = %v (%s), want %s", tt.err, got, kind(got), tt.want)
			}
		})
	}
}

func TestMapErrorKeepsCodeAndMessage(t *testing.T) {
	err := mapError("RunInstances", apiError("RunInstances", "InvalidParameterValue", 400))
	if want := "RunInstances: InvalidParameterValue: message of InvalidParameterValue"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	err = mapError("RunInstances", apiError("RunInstances", "UnauthorizedOperation", 403))
	if !strings.Contains(err.Error(), "ec2:RunInstances") || !strings.Contains(err.Error(), "iam-policy.json") {
		t.Errorf("unauthorized error = %q, want it to name ec2:RunInstances and the policy", err)
	}
	err = mapError("DescribeInstances", apiError("RunInstances", "InvalidParameterValue", 400))
	if kind(err) != "plain" {
		t.Errorf("a plain error is %s", kind(err))
	}
	err = mapError("RunInstances", &smithy.OperationError{Err: &smithy.GenericAPIError{Code: "InvalidParameterValue",
		Message: "Value (cell) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"}})
	if kind(err) != "InvalidConfig:instanceProfile" {
		t.Errorf("a bad instance profile is %s, want InvalidConfig:instanceProfile", kind(err))
	}
}

func TestMapLaunchError(t *testing.T) {
	for _, code := range []string{"InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
		"InsufficientFreeAddressesInSubnet", "SpotMaxPriceTooLow", "Unsupported"} {
		err := mapLaunchError(apiError("RunInstances", code, 500), "p4d.24xlarge", "us-east-1b", pluginapi.CapacitySpot)
		var ic *pluginapi.InsufficientCapacityError
		if !errors.As(err, &ic) {
			t.Errorf("%s = %v, want InsufficientCapacity", code, err)
			continue
		}
		want := pluginapi.InsufficientCapacityError{InstanceType: "p4d.24xlarge", Zone: "us-east-1b", CapacityType: pluginapi.CapacitySpot,
			Message: code + ": message of " + code}
		if *ic != want {
			t.Errorf("%s = %+v, want %+v", code, *ic, want)
		}
	}
	if err := mapLaunchError(apiError("RunInstances", "VcpuLimitExceeded", 400), "m5.large", "a", pluginapi.CapacityOnDemand); !pluginapi.IsQuotaExceeded(err) {
		t.Errorf("VcpuLimitExceeded at launch = %v, want QuotaExceeded", err)
	}
}

// Each error code issue 15 names, as RunInstances answers it, and the kind
// (with what the host needs of it) it maps to. The codes and their
// meanings are EC2's error code list,
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html.
func TestLaunchErrorCodes(t *testing.T) {
	tests := []struct {
		code     string
		capacity pluginapi.CapacityType
		want     string
	}{
		// "You've reached the limit on the number of Spot Instances that
		// you can launch": every spot offering, whatever the type.
		{"MaxSpotInstanceCountExceeded", pluginapi.CapacitySpot, "QuotaExceeded types=all capacity=spot"},
		// "You've reached the limit on the number of vCPUs ... assigned
		// to the running instances in your account" (per quota group:
		// ec2/latest/instancetypes/ec2-instance-quotas.html).
		{"VcpuLimitExceeded", pluginapi.CapacityOnDemand, "QuotaExceeded types=standard capacity=on-demand"},
		// "You've reached the limit on the number of instances you can
		// run concurrently."
		{"InstanceLimitExceeded", pluginapi.CapacityOnDemand, "QuotaExceeded types=all capacity=on-demand"},
		// "The specified instance type is not supported in this
		// Availability Zone" (among others): that offering only.
		{"Unsupported", pluginapi.CapacityOnDemand, "InsufficientCapacity m5.large us-east-1b on-demand"},
		// "The user who made the request does not have the required
		// permissions to create the service-linked role."
		{"AuthFailure.ServiceLinkedRoleCreationNotPermitted", pluginapi.CapacitySpot, "InvalidConfig:credentials"},
		// "The specified instance does not support CPU credits."
		{"InstanceCreditSpecification.NotSupported", pluginapi.CapacityOnDemand, "Unsupported:unlimited_cpu_credits"},
		// "The block device mapping is not valid."
		{"InvalidBlockDeviceMapping", pluginapi.CapacityOnDemand, "Unsupported:volume_size_gib"},
		// "The request uses the same client token as a previous, but
		// non-identical request" (ec2/latest/devguide/ec2-api-idempotency.html):
		// the cell's instance exists from a launch whose answer was lost,
		// and Launch did not find it yet (eventual consistency).
		{"IdempotentParameterMismatch", pluginapi.CapacityOnDemand, "Transient"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			err := mapLaunchError(apiError("RunInstances", tt.code, 400), "m5.large", "us-east-1b", tt.capacity)
			var (
				quota *pluginapi.QuotaExceededError
				ic    *pluginapi.InsufficientCapacityError
				un    *pluginapi.UnsupportedError
			)
			got := kind(err)
			switch {
			case errors.As(err, &quota):
				types := "all"
				if len(quota.InstanceTypes) > 0 {
					types = "?"
					if quota.InstanceTypes[0] == "m5.large" && slices.Contains(quota.InstanceTypes, "c5.large") &&
						slices.Contains(quota.InstanceTypes, "t3.micro") && !slices.Contains(quota.InstanceTypes, "p3.2xlarge") {
						types = "standard"
					}
				}
				got = fmt.Sprintf("QuotaExceeded types=%s capacity=%s", types, quota.CapacityType)
			case errors.As(err, &ic):
				got = fmt.Sprintf("InsufficientCapacity %s %s %s", ic.InstanceType, ic.Zone, ic.CapacityType)
			case errors.As(err, &un):
				got = "Unsupported:" + un.Field
			}
			if got != tt.want {
				t.Errorf("%s = %s (%v), want %s", tt.code, got, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.code) {
				t.Errorf("error %q does not name the code", err)
			}
		})
	}
}

func TestQuotaGroup(t *testing.T) {
	for typ, want := range map[string]string{
		"m5.large": "standard", "c7g.xlarge": "standard", "t3.micro": "standard", "im4gn.large": "standard", "z1d.large": "standard",
		"d3.xlarge": "standard", "h1.2xlarge": "standard", "r7iz.large": "standard",
		"g4dn.xlarge": "g", "vt1.3xlarge": "g", "p4d.24xlarge": "p", "x2idn.16xlarge": "x", "f1.2xlarge": "f",
		"inf2.xlarge": "inf", "trn1.2xlarge": "trn", "dl1.24xlarge": "dl", "hpc6a.48xlarge": "hpc",
		"u-6tb1.metal": "high-memory", "mac2.metal": "mac",
	} {
		if got := quotaGroup(typ); got != want {
			t.Errorf("quotaGroup(%s) = %s, want %s", typ, got, want)
		}
	}
}

// Through the real SDK and the wire: the kinds reach the caller.
func TestErrorsOverTheWire(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	tests := []struct {
		op, code string
		status   int
		want     string
	}{
		{"RunInstances", "InsufficientInstanceCapacity", 500, "InsufficientCapacity"},
		{"RunInstances", "RequestLimitExceeded", 503, "Throttled"},
		{"RunInstances", "VcpuLimitExceeded", 400, "QuotaExceeded"},
		{"RunInstances", "InternalError", 500, "Transient"},
		{"RunInstances", "UnauthorizedOperation", 403, "plain"},
	}
	for _, tt := range tests {
		f.fail(tt.op, tt.code, tt.status, 1)
		_, err := p.Launch(ctx, launchRequest("c-errors"))
		if kind(err) != tt.want {
			t.Errorf("Launch with %s injected = %v (%s), want %s", tt.code, err, kind(err), tt.want)
		}
		var ic *pluginapi.InsufficientCapacityError
		if errors.As(err, &ic) && (ic.Zone != "us-east-1a" || ic.InstanceType != "m5.large" || ic.CapacityType != pluginapi.CapacityOnDemand) {
			t.Errorf("InsufficientCapacity = %+v, want m5.large in us-east-1a on-demand", ic)
		}
	}
}

func TestNoRetryForRefusals(t *testing.T) {
	for code, want := range map[string]aws.Ternary{
		"InsufficientInstanceCapacity": aws.FalseTernary,
		"VcpuLimitExceeded":            aws.FalseTernary,
		"RequestLimitExceeded":         aws.UnknownTernary,
		"InternalError":                aws.UnknownTernary,
	} {
		err := &smithy.GenericAPIError{Code: code, Message: "m"}
		if got := noRetryForRefusals(err); got != want {
			t.Errorf("noRetryForRefusals(%s) = %v, want %v", code, got, want)
		}
	}
}
