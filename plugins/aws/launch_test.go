package aws

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/userdata"
)

// formDump renders a recorded request for a golden file: one key=value per
// line, sorted, with the user data decoded.
func formDump(t *testing.T, form url.Values) []byte {
	t.Helper()
	var b strings.Builder
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := form.Get(k)
		if k == "UserData" {
			raw, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				t.Fatalf("UserData is not base64: %v", err)
			}
			v = "(base64 of)\n" + strings.ReplaceAll(string(raw), "\r\n", "⏎\n")
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return []byte(b.String())
}

func TestLaunchRequestGolden(t *testing.T) {
	cloudInit := filepath.Join(t.TempDir(), "cloud-init.yaml")
	if err := os.WriteFile(cloudInit, []byte("#cloud-config\nruncmd:\n  - [systemctl, start, kip-cell]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		config func(map[string]any) map[string]any
		req    func(*pluginapi.LaunchRequest)
	}{
		{
			name: "on-demand",
			config: func(c map[string]any) map[string]any {
				c = with(c, "securityGroups", []string{"sg-0aaa"})
				c = with(c, "instanceProfile", "kip-cell")
				c = with(c, "allowedSecurityGroups", []string{"sg-0bbb"})
				c = with(c, "tags", map[string]string{"team": "platform", "Name": "kip cell"})
				return with(c, "cloudInit", cloudInit)
			},
			req: func(r *pluginapi.LaunchRequest) {
				r.SecurityGroups = []string{"sg-0bbb", "sg-0aaa"}
				r.VolumeSizeGiB = 30
				r.Tags = map[string]string{"kipcell.io/pod": "default/web-1"}
			},
		},
		{
			name: "spot-unlimited",
			config: func(c map[string]any) map[string]any {
				c = with(c, "allowedInstanceProfiles", []string{"arn:aws:iam::123456789012:instance-profile/pod-role"})
				c = with(c, "instanceMetadataTags", true)
				c = with(c, "podMetadata", true) // the pod's own instance profile, from metadata: hop limit 2
				return with(c, "rootVolumeKMSKeyID", "alias/kip-cells")
			},
			req: func(r *pluginapi.LaunchRequest) {
				r.InstanceType, r.CapacityType, r.UnlimitedCPUCredits = "t3.medium", pluginapi.CapacitySpot, true
				r.Zones = []string{"us-east-1c", "us-east-1b"}
				r.InstanceProfile = "arn:aws:iam::123456789012:instance-profile/pod-role"
			},
		},
		{
			name: "burstable-standard",
			req: func(r *pluginapi.LaunchRequest) {
				r.InstanceType = "t3.small"
				r.Image = "ami-0feed"
				r.Bootstrap = nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, p, req := launchCase(t, "cell-"+tt.name, tt.config, tt.req)
			if _, err := p.Launch(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			reqs := f.requests("RunInstances")
			if len(reqs) != 1 {
				t.Fatalf("%d RunInstances calls, want 1", len(reqs))
			}
			golden(t, "run-instances-"+tt.name+".golden", formDump(t, reqs[0]))
		})
	}
}

// launchCase returns a fake EC2, a provider configured for it (the test
// configuration changed by config, if not nil) and a launch request for
// cell changed by req.
func launchCase(t *testing.T, cell string, config func(map[string]any) map[string]any, req func(*pluginapi.LaunchRequest)) (*fakeEC2, *provider, *pluginapi.LaunchRequest) {
	t.Helper()
	f := newFakeEC2(t)
	cfg := testConfig(f)
	if config != nil {
		cfg = config(cfg)
	}
	r := launchRequest(cell)
	req(r)
	return f, configured(t, cfg), r
}

func TestLaunchReturnsTheInstance(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	req := launchRequest("cell-1")
	req.Tags = map[string]string{"extra": "yes", pluginapi.TagCluster: "not-mine"}
	resp, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := pluginapi.Instance{
		ID: "i-00000000000000001", CellID: "cell-1", InstanceType: "m5.large", CapacityType: pluginapi.CapacityOnDemand,
		Zone: "us-east-1a", State: pluginapi.StatePending,
		Tags: map[string]string{"Name": "cell-1", "extra": "yes", pluginapi.TagCluster: testCluster, pluginapi.TagNode: "kip",
			pluginapi.TagCell: "cell-1", pluginapi.TagPodUID: "uid-cell-1"},
	}
	if diff := cmp.Diff(want, resp.Instance, cmpopts.IgnoreFields(pluginapi.Instance{}, "LaunchedAt")); diff != "" {
		t.Errorf("Launch answered (-want +got):\n%s", diff)
	}
	if inst := f.instance(want.ID); inst.subnet != "subnet-0a" || inst.image != fakeAMI {
		t.Errorf("instance in subnet %s with image %s, want subnet-0a and %s", inst.subnet, inst.image, fakeAMI)
	}
}

// The ClientToken is the cell ID: a retried launch, one after the other or
// many at once, makes one instance.
func TestLaunchIsIdempotent(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	first, err := p.Launch(ctx, launchRequest("cell-1"))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each as a freshly started plugin process would.
			q := configured(t, testConfig(f))
			resp, err := q.Launch(ctx, launchRequest("cell-1"))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = resp.Instance.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != first.Instance.ID {
			t.Errorf("a retried launch answered %s, want %s", id, first.Instance.ID)
		}
	}
	if n := len(f.instances); n != 1 {
		t.Errorf("the fake holds %d instances, want 1", n)
	}
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil || len(list.Instances) != 1 {
		t.Errorf("List = %v, %v; want the one instance", list, err)
	}
}

// A cell launched before with other parameters (here: a newer AMI chosen
// by name since) gets its instance back rather than an error.
func TestLaunchAfterParametersChanged(t *testing.T) {
	f := newFakeEC2(t)
	byName := with(testConfig(f), "image", map[string]any{"owner": fakeOwner, "name": "kip-cell-amd64-*"})
	ctx := t.Context()
	first, err := configured(t, byName).Launch(ctx, launchRequest("cell-1"))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.images = append(f.images, fakeImage{id: "ami-0c3", owner: fakeOwner, name: "kip-cell-amd64-2", arch: "x86_64", created: "2026-06-01T00:00:00.000Z"})
	f.mu.Unlock()
	p := configured(t, byName)
	if p.cfg.Load().image.id != "ami-0c3" {
		t.Fatalf("image = %s, want the newer ami-0c3", p.cfg.Load().image.id)
	}
	again, err := p.Launch(ctx, launchRequest("cell-1"))
	if err != nil {
		t.Fatalf("launching the cell again with a newer image: %v", err)
	}
	if again.Instance.ID != first.Instance.ID || again.Instance.CellID != "cell-1" {
		t.Errorf("second launch answered %+v, want instance %s", again.Instance, first.Instance.ID)
	}
}

func TestLaunchPlacement(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()

	req := launchRequest("cell-zones")
	req.Zones = []string{"us-east-1c", "us-east-1b", "us-east-1a"}
	resp, err := p.Launch(ctx, req)
	if err != nil || resp.Instance.Zone != "us-east-1b" {
		t.Errorf("launch in [1c 1b 1a] = %+v, %v; want the first zone with a subnet, us-east-1b", resp, err)
	}

	req = launchRequest("cell-nowhere")
	req.Zones = []string{"us-east-1c"}
	calls := f.callCount("RunInstances")
	_, err = p.Launch(ctx, req)
	var ic *pluginapi.InsufficientCapacityError
	if !errors.As(err, &ic) || ic.Zone != "us-east-1c" || ic.InstanceType != "m5.large" {
		t.Errorf("launch in a zone without subnet = %v, want InsufficientCapacity for m5.large in us-east-1c", err)
	}
	if f.callCount("RunInstances") != calls {
		t.Error("a launch in a zone without subnet called RunInstances")
	}

	// No zone: one derived from the cell ID, the same every time.
	zones := map[string]bool{}
	for i := range 20 {
		req := launchRequest(fmt.Sprintf("cell-any-%d", i))
		req.Zones = nil
		a, err := p.cfg.Load().plan(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := p.cfg.Load().plan(req)
		if a.zone != b.zone {
			t.Errorf("cell %s placed in %s, then %s", req.CellID, a.zone, b.zone)
		}
		zones[a.zone] = true
	}
	if len(zones) != 2 {
		t.Errorf("20 zone-less cells went to zones %v, want both", zones)
	}
}

func TestLaunchRefuses(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	tests := []struct {
		name string
		req  func(*pluginapi.LaunchRequest)
		want string // kind
		text string
	}{
		{"type of another architecture", func(r *pluginapi.LaunchRequest) { r.InstanceType = "m6g.large" }, "InvalidConfig:image", "is amd64"},
		{"image not an AMI", func(r *pluginapi.LaunchRequest) { r.Image = "docker.io/kip/cell" }, "InvalidConfig:image", "not an AMI ID"},
		{"capacity type", func(r *pluginapi.LaunchRequest) { r.CapacityType = "reserved" }, "plain", "neither on-demand nor spot"},
		{"no instance type", func(r *pluginapi.LaunchRequest) { r.InstanceType = "" }, "plain", "no instance type"},
		{"cell ID too long", func(r *pluginapi.LaunchRequest) { r.CellID = strings.Repeat("c", 65) }, "plain", "ClientToken"},
		{"user data too big", func(r *pluginapi.LaunchRequest) { r.Bootstrap = make([]byte, maxUserData) }, "InvalidConfig:cloudInit", "at most 16384"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := launchRequest("cell-refused")
			tt.req(req)
			_, err := p.Launch(t.Context(), req)
			if kind(err) != tt.want || !strings.Contains(fmt.Sprint(err), tt.text) {
				t.Errorf("Launch = %v (%s), want %s saying %q", err, kind(err), tt.want, tt.text)
			}
		})
	}
	if n := f.callCount("RunInstances"); n != 0 {
		t.Errorf("refused launches made %d RunInstances calls", n)
	}
}

// A pod's instance profile and security groups pass only when the
// operator allowed them (the defaults always are); a refusal names the
// annotation, the value and the allow-list key, and calls nothing.
func TestLaunchAllowLists(t *testing.T) {
	const s3Reader = "arn:aws:iam::123456789012:instance-profile/s3-reader"
	tests := []struct {
		name    string
		config  func(map[string]any) map[string]any
		req     func(*pluginapi.LaunchRequest)
		refused string // the InvalidConfig key; empty when allowed
		text    string
		profile string   // the launched instance's, when allowed
		groups  []string // the launched instance's, when allowed
	}{
		{
			name:    "no annotation",
			config:  func(c map[string]any) map[string]any { return with(c, "instanceProfile", "kip-cell") },
			req:     func(*pluginapi.LaunchRequest) {},
			profile: "kip-cell",
		},
		{
			name:    "profile with no allow-list",
			req:     func(r *pluginapi.LaunchRequest) { r.InstanceProfile = "admin" },
			refused: "allowedInstanceProfiles", text: `annotation kipcell.io/instance-profile asks for instance profile "admin"`,
		},
		{
			name: "profile not listed",
			config: func(c map[string]any) map[string]any {
				return with(with(c, "instanceProfile", "kip-cell"), "allowedInstanceProfiles", []string{s3Reader})
			},
			req:     func(r *pluginapi.LaunchRequest) { r.InstanceProfile = "s3-reader" },
			refused: "allowedInstanceProfiles", text: `annotation kipcell.io/instance-profile asks for instance profile "s3-reader"`,
		},
		{
			name: "profile listed",
			config: func(c map[string]any) map[string]any {
				return with(with(c, "instanceProfile", "kip-cell"), "allowedInstanceProfiles", []string{s3Reader})
			},
			req:     func(r *pluginapi.LaunchRequest) { r.InstanceProfile = s3Reader },
			profile: s3Reader,
		},
		{
			name:    "the default profile named",
			config:  func(c map[string]any) map[string]any { return with(c, "instanceProfile", "kip-cell") },
			req:     func(r *pluginapi.LaunchRequest) { r.InstanceProfile = "kip-cell" },
			profile: "kip-cell",
		},
		{
			name:    "groups with no allow-list",
			config:  func(c map[string]any) map[string]any { return with(c, "securityGroups", []string{"sg-0a"}) },
			req:     func(r *pluginapi.LaunchRequest) { r.SecurityGroups = []string{"sg-0a", "sg-0bad"} },
			refused: "allowedSecurityGroups", text: "annotation kipcell.io/security-groups asks for security group sg-0bad,",
		},
		{
			name: "a group not listed",
			config: func(c map[string]any) map[string]any {
				return with(with(c, "securityGroups", []string{"sg-0a"}), "allowedSecurityGroups", []string{"sg-0eb"})
			},
			req:     func(r *pluginapi.LaunchRequest) { r.SecurityGroups = []string{"sg-0eb", "sg-0bad", "sg-0fee"} },
			refused: "allowedSecurityGroups", text: "asks for security group sg-0bad, sg-0fee,",
		},
		{
			name: "groups listed",
			config: func(c map[string]any) map[string]any {
				return with(with(c, "securityGroups", []string{"sg-0a"}), "allowedSecurityGroups", []string{"sg-0eb", "sg-0db"})
			},
			req:    func(r *pluginapi.LaunchRequest) { r.SecurityGroups = []string{"sg-0db", "sg-0a"} },
			groups: []string{"sg-0a", "sg-0db"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, p, req := launchCase(t, "cell-annotated", tt.config, tt.req)
			resp, err := p.Launch(t.Context(), req)
			if tt.refused != "" {
				if kind(err) != "InvalidConfig:"+tt.refused || !strings.Contains(fmt.Sprint(err), tt.text) {
					t.Errorf("Launch = %v (%s), want InvalidConfig:%s saying %q", err, kind(err), tt.refused, tt.text)
				}
				if n := f.callCount("RunInstances"); n != 0 {
					t.Errorf("a refused launch made %d RunInstances calls", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Launch = %v, want it allowed", err)
			}
			form := f.instance(resp.Instance.ID).form
			profile := form.Get("IamInstanceProfile.Arn") + form.Get("IamInstanceProfile.Name")
			var groups []string
			for n := 1; form.Has(fmt.Sprintf("NetworkInterface.1.SecurityGroupId.%d", n)); n++ {
				groups = append(groups, form.Get(fmt.Sprintf("NetworkInterface.1.SecurityGroupId.%d", n)))
			}
			if diff := cmp.Diff([]any{tt.profile, tt.groups}, []any{profile, groups}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("instance profile and security groups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLaunchWithCancelledContext(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Launch(ctx, launchRequest("cell-1")); !errors.Is(err, context.Canceled) {
		t.Errorf("Launch with a cancelled context = %v", err)
	}
}

// The boot recipe in deploy/aws is a valid cloudInit, and with a
// bootstrap as large as kip makes (CA, certificate and key in PEM) its user
// data fits in EC2's 16 KiB.
func TestBootRecipeFits(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, with(testConfig(f), "cloudInit", "../../deploy/aws/cloud-init.yaml"))
	pem := strings.Repeat("MIIBszCCAVmgAwIBAgIRAK", 100) // 2.2 KB of PEM-like text: the CA bundle
	req := launchRequest("cell-recipe")
	// A version 2 bootstrap (cell/api): names, the CA bundle and a join
	// token, at its longest.
	req.Bootstrap = []byte(`{"version":2,"cellID":"kip-0123456789abcdef0123456789abcdef-r9","clusterID":"` + strings.Repeat("c", 63) +
		`","nodeName":"` + strings.Repeat("n", 63) + `","podUID":"01234567-89ab-cdef-0123-456789abcdef","caCert":"` + pem +
		`","joinToken":"` + strings.Repeat("t", 120) + `"}`)
	plan, err := p.cfg.Load().plan(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(*plan.input.UserData)
	if len(raw) > maxUserData {
		t.Errorf("user data is %d bytes, over %d", len(raw), maxUserData)
	}
	got, err := userdata.Bootstrap(raw)
	if err != nil || !bytes.Equal(got, req.Bootstrap) {
		t.Errorf("bootstrap from the user data = %.40q, %v", got, err)
	}
}
