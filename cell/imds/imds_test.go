package imds

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	ec2sim "github.com/kipcell/kip/test/cloudsim/ec2"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// countingTransport counts the token requests.
type countingTransport struct {
	next   http.RoundTripper
	tokens atomic.Int32
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut {
		t.tokens.Add(1)
	}
	return t.next.RoundTrip(r)
}

// simInstance starts the EC2 simulator on simClock, launches a spot
// instance whose metadata needs IMDSv2, and returns the simulator, the
// instance and a Client of its IMDS (counting its token requests).
func simInstance(t *testing.T, simClock *clock) (*ec2sim.Server, string, *Client, *countingTransport) {
	t.Helper()
	sim := ec2sim.New(ec2sim.Options{Now: simClock.Now})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	c := ec2.New(ec2.Options{
		Region: ec2sim.DefaultRegion, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	out, err := c.RunInstances(t.Context(), &ec2.RunInstancesInput{
		ImageId: aws.String("ami-0de0000000000a002"), InstanceType: types.InstanceTypeT3Micro, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceMarketOptions: &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot},
		MetadataOptions:       &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired},
	})
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	sock, ok := sim.IMDSSocket(id)
	if !ok {
		t.Fatal("no IMDS socket")
	}
	client, err := New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingTransport{next: client.hc.Transport}
	client.hc.Transport = counter
	return sim, id, client, counter
}

func TestClientGetAndToken(t *testing.T) {
	ctx := t.Context()
	simClock := &clock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	_, id, c, counter := simInstance(t, simClock)
	agentClock := &clock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	c.now = agentClock.Now

	got, err := c.Get(ctx, "meta-data/instance-id")
	if err != nil || string(got) != id {
		t.Fatalf("Get instance-id = %q, %v; want %q", got, err, id)
	}
	if got, err := c.Get(ctx, "/latest/meta-data/placement/availability-zone"); err != nil || string(got) == "" {
		t.Errorf("Get availability-zone = %q, %v", got, err)
	}
	if _, err := c.Get(ctx, "meta-data/no-such-thing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing path: %v, want ErrNotFound", err)
	}
	if n := counter.tokens.Load(); n != 1 {
		t.Errorf("%d token requests for three reads, want 1 (the token is kept)", n)
	}

	// Shortly before it expires, the token is replaced.
	agentClock.Advance(TokenTTL - tokenMargin/2)
	simClock.Advance(TokenTTL - tokenMargin/2)
	if _, err := c.Get(ctx, "meta-data/instance-id"); err != nil {
		t.Fatal(err)
	}
	if n := counter.tokens.Load(); n != 2 {
		t.Errorf("%d token requests after the token's lifetime, want 2", n)
	}
	// A token the IMDS no longer takes (its clock ran ahead) is replaced
	// after the 401.
	simClock.Advance(TokenTTL)
	if _, err := c.Get(ctx, "meta-data/instance-id"); err != nil {
		t.Fatalf("Get after the IMDS expired the token: %v", err)
	}
	if n := counter.tokens.Load(); n != 3 {
		t.Errorf("%d token requests after a 401, want 3", n)
	}

}

// TestClientIdentityDocument: the identity document and its signature,
// which verifies with the simulator's certificate.
func TestClientIdentityDocument(t *testing.T) {
	sim, id, c, _ := simInstance(t, &clock{t: time.Now()})
	doc, sig, err := c.IdentityDocument(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var fields struct{ InstanceID string }
	if err := json.Unmarshal(doc, &fields); err != nil || fields.InstanceID != id {
		t.Errorf("identity document %s: %v", doc, err)
	}
	block, _ := pem.Decode(sim.IdentityCertificatePEM())
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(sig)) // its lines' newlines are ignored
	if err != nil {
		t.Fatalf("signature: %v", err)
	}
	sum := sha256.Sum256(doc)
	if err := rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], raw); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}

}

// TestClientNotices: no notices, then both.
func TestClientNotices(t *testing.T) {
	ctx := t.Context()
	simClock := &clock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	sim, id, c, _ := simInstance(t, simClock)
	if a, err := c.InstanceAction(ctx); a != nil || err != nil {
		t.Errorf("InstanceAction before a notice = %+v, %v; want nil, nil", a, err)
	}
	if r, err := c.RebalanceRecommendation(ctx); r != nil || err != nil {
		t.Errorf("RebalanceRecommendation before one = %+v, %v; want nil, nil", r, err)
	}
	if err := sim.RecommendRebalance(id); err != nil {
		t.Fatal(err)
	}
	at, err := sim.NoticeInterruption(id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.InstanceAction(ctx)
	if err != nil || a == nil || a.Action != "terminate" || !a.Time.Equal(at) {
		t.Errorf("InstanceAction = %+v, %v; want terminate at %s", a, err, at)
	}
	r, err := c.RebalanceRecommendation(ctx)
	if err != nil || r == nil || !r.NoticeTime.Equal(simClock.Now().Truncate(time.Second)) {
		t.Errorf("RebalanceRecommendation = %+v, %v; want one at %s", r, err, simClock.Now())
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		ok       bool
	}{
		{DefaultEndpoint, true},
		{"http://127.0.0.1:8080", true},
		{"unix:///run/imds.sock", true},
		{"https://169.254.169.254", false},
		{"unix://", false},
		{"http://", false},
		{"169.254.169.254", false},
		{"", false},
	} {
		_, err := New(tc.endpoint)
		if (err == nil) != tc.ok {
			t.Errorf("New(%q): %v, want ok=%v", tc.endpoint, err, tc.ok)
		}
	}
}

// TestNoIMDS checks that a missing IMDS is an error, not "no notice".
func TestNoIMDS(t *testing.T) {
	c, err := New("unix://" + t.TempDir() + "/none.sock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if a, err := c.InstanceAction(ctx); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("InstanceAction without an IMDS = %+v, %v; want an error", a, err)
	}
}
