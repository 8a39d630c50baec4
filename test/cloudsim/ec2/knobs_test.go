package ec2sim

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"
)

// httpStatus returns the HTTP status of an SDK error, or 0.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestThrottle(t *testing.T) {
	ctx := t.Context()
	sim, url := startSim(t, Options{})

	// Without retries the caller sees the code EC2 sends, and the SDK's
	// retryer classifies it as throttling.
	sim.InjectThrottle(1)
	_, err := ec2Client(url, noRetries).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if apiCode(err) != "RequestLimitExceeded" || httpStatus(err) != 503 {
		t.Fatalf("throttled call: %v, want RequestLimitExceeded (503)", err)
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
		t.Error("the SDK's retryer does not see RequestLimitExceeded as throttling")
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) != aws.TrueTernary {
		t.Error("the SDK's retryer does not retry RequestLimitExceeded")
	}

	// With retries, the SDK gets through.
	sim.ResetCalls()
	sim.InjectThrottle(2)
	if _, err := ec2Client(url, fastRetries).DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatalf("retrying client: %v", err)
	}
	if n := sim.Calls()["DescribeInstances"]; n != 3 {
		t.Errorf("%d DescribeInstances calls, want 3 (2 throttled, 1 answered)", n)
	}
	if sim.Throttled() != 0 {
		t.Errorf("Throttled() = %d: injected throttles are not the rate limit's", sim.Throttled())
	}
}

func TestRateLimit(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, url := startSim(t, Options{Now: clk.Now, RateLimit: RateLimit{PerSecond: 2, Burst: 3}})
	c := ec2Client(url, noRetries)
	describe := func() error {
		_, err := c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
		return err
	}
	for i := range 3 {
		if err := describe(); err != nil {
			t.Fatalf("call %d within the burst: %v", i+1, err)
		}
	}
	if err := describe(); apiCode(err) != "RequestLimitExceeded" {
		t.Fatalf("call over the burst: %v, want RequestLimitExceeded", err)
	}
	clk.Advance(500 * time.Millisecond) // one token at 2/s
	if err := describe(); err != nil {
		t.Errorf("after a refill: %v", err)
	}
	if err := describe(); apiCode(err) != "RequestLimitExceeded" {
		t.Errorf("bucket empty again: %v, want RequestLimitExceeded", err)
	}
	if sim.Throttled() != 2 {
		t.Errorf("Throttled() = %d, want 2", sim.Throttled())
	}
	// ECR has its own limits: the EC2 bucket does not apply.
	if _, err := ecrClient(url, func(o *ecr.Options) { o.Retryer = aws.NopRetryer{} }).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{}); err != nil {
		t.Errorf("ECR under an empty EC2 bucket: %v", err)
	}
	sim.SetRateLimit(RateLimit{})
	if err := describe(); err != nil {
		t.Errorf("limit removed: %v", err)
	}
}

func TestInsufficientCapacity(t *testing.T) {
	ctx := t.Context()
	sim, url := startSim(t, Options{})
	c := ec2Client(url, noRetries)
	sim.InjectInsufficientCapacity("t3.micro", "us-east-1a")
	tests := []struct {
		name     string
		in       *ec2.RunInstancesInput
		wantCode string
	}{
		{"type and zone", runInput("t3.micro", "subnet-00000000000000001", ""), "InsufficientInstanceCapacity"},
		{"same type, other zone", runInput("t3.micro", "subnet-00000000000000002", ""), ""},
		{"other type, same zone", runInput("t3.small", "subnet-00000000000000001", ""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.RunInstances(ctx, tt.in)
			if apiCode(err) != tt.wantCode {
				t.Fatalf("RunInstances: %v, want code %q", err, tt.wantCode)
			}
			if tt.wantCode != "" && (httpStatus(err) != 500 || !strings.Contains(err.Error(), "choosing us-east-1b, us-east-1c")) {
				t.Errorf("error %v: want HTTP 500 naming the zones with capacity", err)
			}
		})
	}
	sim.ClearInsufficientCapacity("t3.micro", "us-east-1a")
	if _, err := c.RunInstances(ctx, runInput("t3.micro", "subnet-00000000000000001", "")); err != nil {
		t.Errorf("after clearing: %v", err)
	}
	// Spot launches are refused the same way, and a zone-wide shortage
	// hits every type.
	sim.InjectInsufficientCapacity("", "us-east-1c")
	in := runInput("m5.large", "subnet-00000000000000003", "")
	in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	if _, err := c.RunInstances(ctx, in); apiCode(err) != "InsufficientInstanceCapacity" {
		t.Errorf("zone-wide shortage: %v", err)
	}
}

func TestInject5xx(t *testing.T) {
	ctx := t.Context()
	sim, url := startSim(t, Options{})
	sim.Inject5xx(1)
	_, err := ec2Client(url, noRetries).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if apiCode(err) != "InternalError" || httpStatus(err) != 500 {
		t.Fatalf("5xx: %v, want InternalError (500)", err)
	}
	sim.Inject5xx(2)
	if _, err := ec2Client(url, fastRetries).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Errorf("retrying client after two 5xx: %v", err)
	}
}

func TestFaultAfterEffectIsIdempotent(t *testing.T) {
	ctx := t.Context()
	sim, url := startSim(t, Options{})
	// The launch happens, the answer is lost; the SDK retries with the
	// same client token and gets the same instance.
	sim.InjectFault(Fault{Operation: "RunInstances", Code: "InternalError", HTTPStatus: 500, AfterEffect: true})
	out, err := ec2Client(url, fastRetries).RunInstances(ctx, runInput("t3.micro", "", "lost-answer"))
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	all := sim.Instances()
	if len(all) != 1 || all[0].ID != aws.ToString(out.Instances[0].InstanceId) {
		t.Errorf("instances %v, want only %s", all, aws.ToString(out.Instances[0].InstanceId))
	}
	if n := sim.Calls()["RunInstances"]; n != 2 {
		t.Errorf("%d RunInstances calls, want 2", n)
	}

	// A fault for one operation leaves the others alone.
	sim.InjectFault(Fault{Operation: "TerminateInstances", Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."})
	c := ec2Client(url, noRetries)
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("DescribeInstances: %v", err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{all[0].ID}}); apiCode(err) != "UnauthorizedOperation" || httpStatus(err) != 400 {
		t.Errorf("TerminateInstances: %v, want UnauthorizedOperation (400)", err)
	}
}

func TestInterrupt(t *testing.T) {
	clk := newClock()
	cells := newFakeCells()
	sim, url := startSim(t, Options{Cells: cells, Now: clk.Now, ShutdownDelay: time.Minute})
	c := ec2Client(url, noRetries)
	in := runInput("t3.micro", "", "")
	in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{
		MarketType:  types.MarketTypeSpot,
		SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime, InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate},
	}
	spot := launch(t, c, in)
	onDemand := launch(t, c, runInput("t3.micro", "", ""))
	eventually(t, "running", func() bool { return stateName(describe(t, c, spot)) == "running" })
	if got := describe(t, c, spot); got.InstanceLifecycle != types.InstanceLifecycleTypeSpot || aws.ToString(got.SpotInstanceRequestId) == "" {
		t.Errorf("spot instance: lifecycle %q request %q", got.InstanceLifecycle, aws.ToString(got.SpotInstanceRequestId))
	}

	if err := sim.Interrupt(onDemand); err == nil {
		t.Error("Interrupt of an on-demand instance: no error")
	}
	if err := sim.Interrupt(spot); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	got := describe(t, c, spot)
	if stateName(got) != "shutting-down" || aws.ToString(got.StateReason.Code) != "Server.SpotInstanceTermination" {
		t.Errorf("interrupted: %s reason %q, want shutting-down Server.SpotInstanceTermination", stateName(got), aws.ToString(got.StateReason.Code))
	}
	eventually(t, "the cell to stop", func() bool { return cells.Stops(spot) == 1 })
	clk.Advance(time.Minute)
	got = describe(t, c, spot)
	if stateName(got) != "terminated" || aws.ToString(got.StateReason.Code) != "Server.SpotInstanceTermination" {
		t.Errorf("after shutdown: %s reason %q", stateName(got), aws.ToString(got.StateReason.Code))
	}
	if err := sim.Interrupt(spot); err == nil {
		t.Error("Interrupt of a terminated instance: no error")
	}
}

func TestAuthentication(t *testing.T) {
	_, url := startSim(t, Options{AccessKeyID: "AKIDSIMULATOR"})
	tests := []struct {
		name     string
		opt      func(*ec2.Options)
		wantCode string
	}{
		{"right region and key", func(*ec2.Options) {}, ""},
		{"signed for another region", func(o *ec2.Options) { o.Region = "eu-west-1" }, "AuthFailure"},
		{"another access key", func(o *ec2.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("AKIDOTHER", "secret", "")
		}, "AuthFailure"},
		{"unsigned", func(o *ec2.Options) { o.Credentials = aws.AnonymousCredentials{} }, "AuthFailure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ec2Client(url, noRetries, tt.opt).DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{})
			if apiCode(err) != tt.wantCode {
				t.Errorf("got %v, want code %q", err, tt.wantCode)
			}
		})
	}
}

func TestCalls(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, url := startSim(t, Options{Now: clk.Now})
	c := ec2Client(url, noRetries)
	id := launch(t, c, runInput("t3.micro", "", ""))
	for range 3 {
		describe(t, c, id)
	}
	clk.Advance(2 * time.Second)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	_, _ = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"bad"}}) // errors count too
	if _, err := ecrClient(url).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"RunInstances": 1, "DescribeInstances": 4, "TerminateInstances": 1, "GetAuthorizationToken": 1}
	if d := cmp.Diff(want, sim.Calls()); d != "" {
		t.Errorf("Calls (-want +got):\n%s", d)
	}
	if got := sim.MaxCallsPerSecond(); got != 4 {
		t.Errorf("MaxCallsPerSecond = %d, want 4 (launch and three describes in the first second)", got)
	}
	sim.ResetCalls()
	if len(sim.Calls()) != 0 || sim.MaxCallsPerSecond() != 0 {
		t.Error("ResetCalls left counts")
	}
}

func TestECRAuthorizationToken(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, url := startSim(t, Options{Now: clk.Now, ECRPassword: "s3cret"})
	out, err := ecrClient(url).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		t.Fatalf("GetAuthorizationToken: %v", err)
	}
	data := out.AuthorizationData[0]
	token, err := base64.StdEncoding.DecodeString(aws.ToString(data.AuthorizationToken))
	if err != nil {
		t.Fatal(err)
	}
	user, pass := sim.ECRCredentials()
	got := map[string]any{"token": string(token), "endpoint": aws.ToString(data.ProxyEndpoint), "expires": data.ExpiresAt.UTC()}
	want := map[string]any{
		"token": user + ":" + pass, "endpoint": "https://" + sim.ECRRegistry(), "expires": clk.Now().Add(12 * time.Hour),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("authorization data (-want +got):\n%s", d)
	}
	if string(token) != "AWS:s3cret" || sim.ECRRegistry() != "123456789012.dkr.ecr.us-east-1.amazonaws.com" {
		t.Errorf("token %q registry %q", token, sim.ECRRegistry())
	}

	// Faults reach ECR in its own error vocabulary.
	sim.InjectFault(Fault{Operation: "GetAuthorizationToken", Code: codeThrottle, HTTPStatus: 503})
	_, err = ecrClient(url, func(o *ecr.Options) { o.Retryer = aws.NopRetryer{} }).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if apiCode(err) != "ThrottlingException" {
		t.Errorf("throttled ECR call: %v, want ThrottlingException", err)
	}
}

// TestConcurrentUse drives the server from several clients while the
// knobs change, for the race detector.
func TestConcurrentUse(t *testing.T) {
	ctx := t.Context()
	sim, url := startSim(t, Options{Cells: newFakeCells(), Logger: slog.New(slog.DiscardHandler)})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			c := ec2Client(url, fastRetries)
			for i := range 10 {
				out, err := c.RunInstances(ctx, runInput("t3.micro", "", fmt.Sprintf("g%d-%d", g, i)))
				if err != nil {
					continue // injected faults may outlast the retries
				}
				id := aws.ToString(out.Instances[0].InstanceId)
				_, _ = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"running"}}}})
				_, _ = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			sim.InjectThrottle(1)
			sim.Inject5xx(1)
			sim.SetBootDelay(time.Duration(i) * time.Millisecond)
			sim.InjectInsufficientCapacity("t3.micro", "us-east-1c")
			sim.ClearInsufficientCapacity("t3.micro", "us-east-1c")
			_ = sim.Calls()
			_ = sim.Instances()
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	if sim.Calls()["RunInstances"] < 60 {
		t.Errorf("RunInstances calls %d, want at least 60", sim.Calls()["RunInstances"])
	}
}
