package ec2sim

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"mime/multipart"
	"net/textproto"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/smithy-go"

	"github.com/kipcell/kip/pluginapi/userdata"
	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

// newClock is a manual clock for Options.Now.
func newClock() *cellstest.Clock {
	return cellstest.NewClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
}

// newFakeCells is a CellStarter that records calls.
func newFakeCells() *cellstest.FakeCells { return cellstest.NewFakeCells() }

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startSim starts a Server for opts (with the test's logger) and closes it
// when the test ends.
func startSim(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s := New(opts)
	url, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// noRetries makes a client give up after the first attempt, so that a
// test sees the error the server answered.
func noRetries(o *ec2.Options) { o.Retryer = aws.NopRetryer{} }

// fastRetries retries up to 5 attempts without waiting long.
func fastRetries(o *ec2.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = 5
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
}

// ec2Client is the real SDK client pointed at the simulator with static
// credentials in us-east-1.
func ec2Client(url string, optFns ...func(*ec2.Options)) *ec2.Client {
	o := ec2.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDSIMULATOR", "secret", ""),
		BaseEndpoint: aws.String(url),
	}
	return ec2.New(o, optFns...)
}

func ecrClient(url string, optFns ...func(*ecr.Options)) *ecr.Client {
	o := ecr.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDSIMULATOR", "secret", ""),
		BaseEndpoint: aws.String(url),
	}
	return ecr.New(o, optFns...)
}

// apiCode returns the AWS error code of err, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// mimeUserData builds user data the way the AWS plugin does (shared spec):
// multipart/mixed with an optional text/cloud-config part and the
// bootstrap part, base64-encoded for RunInstances.
func mimeUserData(t testing.TB, cloudConfig, bootstrap string) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if cloudConfig != "" {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"text/cloud-config"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(cloudConfig)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {userdata.MediaTypeBootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(bootstrap)); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	msg := "Content-Type: multipart/mixed; boundary=\"" + mw.Boundary() + "\"\r\nMIME-Version: 1.0\r\n\r\n" + body.String()
	return base64.StdEncoding.EncodeToString([]byte(msg))
}

// runInput is a minimal valid RunInstances request.
func runInput(instanceType, subnet, token string) *ec2.RunInstancesInput {
	in := &ec2.RunInstancesInput{
		ImageId:      aws.String("ami-0de0000000000a002"),
		InstanceType: types.InstanceType(instanceType),
		MinCount:     aws.Int32(1),
		MaxCount:     aws.Int32(1),
	}
	if subnet != "" {
		in.SubnetId = aws.String(subnet)
	}
	if token != "" {
		in.ClientToken = aws.String(token)
	}
	return in
}

// launch runs one instance and returns its ID.
func launch(t testing.TB, c *ec2.Client, in *ec2.RunInstancesInput) string {
	t.Helper()
	out, err := c.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

// describe returns the instance with the given ID.
func describe(t testing.TB, c *ec2.Client, id string) types.Instance {
	t.Helper()
	out, err := c.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeInstances %s: %v", id, err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances %s: got %d reservations", id, len(out.Reservations))
	}
	return out.Reservations[0].Instances[0]
}

func stateName(in types.Instance) string {
	if in.State == nil {
		return ""
	}
	return string(in.State.Name)
}

// eventually polls cond until it holds or 10 seconds pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ids returns the instance IDs in reservations, sorted.
func ids(res []types.Reservation) []string {
	var out []string
	for _, r := range res {
		for _, in := range r.Instances {
			out = append(out, aws.ToString(in.InstanceId))
		}
	}
	sort.Strings(out)
	return out
}
