package ec2sim

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// unixHTTP is an HTTP client whose every request goes to the unix socket
// path.
func unixHTTP(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
}

// imdsFixture is a running spot instance launched with HttpTokens
// required and user data, and clients of its IMDS: plain HTTP and the
// SDK's own (IMDSv2, no fallback).
type imdsFixture struct {
	sim    *Server
	ec2    *ec2.Client
	id     string
	hc     *http.Client
	client *imds.Client
}

func newIMDSFixture(t *testing.T) *imdsFixture {
	t.Helper()
	sim, url := startSim(t, Options{Cells: newFakeCells()})
	c := ec2Client(url, noRetries)
	in := runInput("t3.micro", "", "")
	in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	in.MetadataOptions = &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired}
	in.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte("#cloud-config\n")))
	id := launch(t, c, in)
	eventually(t, "running", func() bool { return stateName(describe(t, c, id)) == "running" })
	sock, ok := sim.IMDSSocket(id)
	if !ok {
		t.Fatal("no IMDS socket for a running instance")
	}
	hc := unixHTTP(sock)
	client := imds.New(imds.Options{Endpoint: "http://169.254.169.254", HTTPClient: hc, EnableFallback: aws.FalseTernary})
	return &imdsFixture{sim: sim, ec2: c, id: id, hc: hc, client: client}
}

func TestIMDSMetadata(t *testing.T) {
	ctx := t.Context()
	x := newIMDSFixture(t)
	c, id, client := x.ec2, x.id, x.client
	got := map[string]string{}
	for _, p := range []string{"instance-id", "local-ipv4", "placement/availability-zone", "instance-life-cycle", "instance-type"} {
		out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: p})
		if err != nil {
			t.Fatalf("GetMetadata %s: %v", p, err)
		}
		b, _ := io.ReadAll(out.Content)
		got[p] = string(b)
	}
	d := describe(t, c, id)
	want := map[string]string{
		"instance-id": id, "local-ipv4": aws.ToString(d.PrivateIpAddress), "placement/availability-zone": aws.ToString(d.Placement.AvailabilityZone),
		"instance-life-cycle": "spot", "instance-type": "t3.micro",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("meta-data/%s = %q, want %q", k, got[k], v)
		}
	}
	ud, err := client.GetUserData(ctx, &imds.GetUserDataInput{})
	if err != nil {
		t.Fatalf("GetUserData: %v", err)
	}
	if b, _ := io.ReadAll(ud.Content); string(b) != "#cloud-config\n" {
		t.Errorf("user data %q", b)
	}
	doc, err := client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatalf("GetInstanceIdentityDocument: %v", err)
	}
	if doc.InstanceID != id || doc.AccountID != DefaultAccountID || doc.Region != DefaultRegion || doc.Architecture != "x86_64" ||
		doc.PrivateIP != want["local-ipv4"] || doc.ImageID != "ami-0de0000000000a002" || doc.Version != identityDocVersion || doc.PendingTime.IsZero() {
		t.Errorf("identity document %+v", doc.InstanceIdentityDocument)
	}
}

func TestIMDSIdentitySignature(t *testing.T) {
	x := newIMDSFixture(t)
	sim, id, client := x.sim, x.id, x.client

	// The signature verifies with the simulator's certificate, as EC2's
	// with the region's AWS certificate (openssl dgst -sha256 -verify).
	raw := dynamic(t, client, "instance-identity/document")
	sig := dynamic(t, client, "instance-identity/signature")
	block, _ := pem.Decode(sim.IdentityCertificatePEM())
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sigBytes, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(sig, "\n", ""))
	if err != nil {
		t.Fatalf("signature is not base64: %v", err)
	}
	sum := sha256.Sum256([]byte(raw))
	if err := rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], sigBytes); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	tampered := sha256.Sum256([]byte(strings.Replace(raw, id, "i-0000000000000000f", 1)))
	if rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, tampered[:], sigBytes) == nil {
		t.Error("the signature verifies another document")
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"accountId", "architecture", "availabilityZone", "billingProducts", "devpayProductCodes", "marketplaceProductCodes",
		"imageId", "instanceId", "instanceType", "kernelId", "pendingTime", "privateIp", "ramdiskId", "region", "version"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("identity document lacks %s", k)
		}
	}

}

// TestIMDSv2Errors: IMDSv2's errors, as EC2 answers them.
func TestIMDSv2Errors(t *testing.T) {
	hc := newIMDSFixture(t).hc
	for _, tc := range []struct {
		name   string
		method string
		path   string
		header map[string]string
		status int
	}{
		{"no token, HttpTokens required", "GET", "/latest/meta-data/instance-id", nil, 401},
		{"unknown token", "GET", "/latest/meta-data/instance-id", map[string]string{imdsTokenHeader: "nope"}, 401},
		{"token without TTL", "PUT", "/latest/api/token", nil, 400},
		{"token TTL 0", "PUT", "/latest/api/token", map[string]string{imdsTTLHeader: "0"}, 400},
		{"token TTL above 21600", "PUT", "/latest/api/token", map[string]string{imdsTTLHeader: "21601"}, 400},
		{"token through a proxy", "PUT", "/latest/api/token", map[string]string{imdsTTLHeader: "60", "X-Forwarded-For": "10.0.0.1"}, 403},
		{"token TTL 21600", "PUT", "/latest/api/token", map[string]string{imdsTTLHeader: "21600"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := imdsStatus(t, hc, tc.method, tc.path, tc.header); got != tc.status {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, got, tc.status)
			}
		})
	}

}

// TestIMDSNotices: no notice yet is 404; then the notice, and the
// interruption at its time.
func TestIMDSNotices(t *testing.T) {
	ctx := t.Context()
	x := newIMDSFixture(t)
	sim, c, id, client := x.sim, x.ec2, x.id, x.client
	for _, p := range []string{"spot/instance-action", "events/recommendations/rebalance"} {
		if _, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: p}); err == nil || httpStatus(err) != 404 {
			t.Errorf("%s before a notice: %v, want 404", p, err)
		}
	}
	if err := sim.RecommendRebalance(id); err != nil {
		t.Fatal(err)
	}
	var rebalance struct{ NoticeTime time.Time }
	if err := json.Unmarshal([]byte(metadata(t, client, "events/recommendations/rebalance")), &rebalance); err != nil || rebalance.NoticeTime.IsZero() {
		t.Errorf("rebalance recommendation: %+v, %v", rebalance, err)
	}
	at, err := sim.NoticeInterruption(id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Action string
		Time   time.Time
	}
	if err := json.Unmarshal([]byte(metadata(t, client, "spot/instance-action")), &action); err != nil {
		t.Fatal(err)
	}
	if action.Action != "terminate" || !action.Time.Equal(at) {
		t.Errorf("instance-action %+v, want terminate at %s", action, at)
	}
	if stateName(describe(t, c, id)) != "running" {
		t.Error("the instance ended at the notice, not at its time")
	}
	eventually(t, "the interruption", func() bool {
		d := describe(t, c, id)
		return stateName(d) != "running" && d.StateReason != nil && aws.ToString(d.StateReason.Code) == ReasonSpotTermination
	})

	onDemand := launch(t, c, runInput("t3.micro", "", ""))
	if _, err := sim.NoticeInterruption(onDemand, 0); err == nil {
		t.Error("a notice to an on-demand instance: no error")
	}
}

// TestIMDSv1 checks that an instance launched with HttpTokens optional
// answers without a token.
func TestIMDSv1(t *testing.T) {
	sim, url := startSim(t, Options{Cells: newFakeCells()})
	c := ec2Client(url, noRetries)
	id := launch(t, c, runInput("t3.micro", "", ""))
	eventually(t, "running", func() bool { return stateName(describe(t, c, id)) == "running" })
	sock, _ := sim.IMDSSocket(id)
	if got := imdsStatus(t, unixHTTP(sock), "GET", "/latest/meta-data/instance-id", nil); got != 200 {
		t.Errorf("IMDSv1 with HttpTokens optional: %d", got)
	}
	if got := imdsStatus(t, unixHTTP(sock), "GET", "/latest/meta-data/spot/instance-action", nil); got != 404 {
		t.Errorf("instance-action of an on-demand instance: %d", got)
	}
}

func imdsStatus(t *testing.T, hc *http.Client, method, path string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://169.254.169.254"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func metadata(t *testing.T, c *imds.Client, path string) string {
	t.Helper()
	out, err := c.GetMetadata(t.Context(), &imds.GetMetadataInput{Path: path})
	if err != nil {
		t.Fatalf("GetMetadata %s: %v", path, err)
	}
	b, _ := io.ReadAll(out.Content)
	return string(b)
}

func dynamic(t *testing.T, c *imds.Client, path string) string {
	t.Helper()
	out, err := c.GetDynamicData(t.Context(), &imds.GetDynamicDataInput{Path: path})
	if err != nil {
		t.Fatalf("GetDynamicData %s: %v", path, err)
	}
	b, _ := io.ReadAll(out.Content)
	return string(b)
}
