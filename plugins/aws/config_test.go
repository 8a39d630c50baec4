package aws

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

func TestConfigureRefusesBadConfigNamingTheKey(t *testing.T) {
	f := newFakeEC2(t)
	good := testConfig(f)
	dir := t.TempDir()
	notCloudConfig := filepath.Join(dir, "user-data.sh")
	if err := os.WriteFile(notCloudConfig, []byte("#!/bin/sh\necho hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bigCloudConfig := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(bigCloudConfig, append([]byte("#cloud-config\n"), make([]byte, maxCloudInit)...), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	manyTags := map[string]string{}
	for i := range 46 {
		manyTags[string(rune('a'+i%26))+strings.Repeat("x", i)] = "v"
	}
	tests := []struct {
		name   string
		config any
		key    string
	}{
		{"not an object", []int{1}, "plugin.config"},
		{"unknown key", with(good, "subnet", "subnet-0a"), "subnet"},
		{"no region", with(good, "region", nil), "region"},
		{"empty region", with(good, "region", ""), "region"},
		{"region not a string", with(good, "region", 7), "region"},
		{"region malformed", with(good, "region", "US East"), "region"},
		{"endpoint not a URL", with(good, "endpointURL", "localhost:4566"), "endpointURL"},
		{"endpoint ftp", with(good, "endpointURL", "ftp://example.com"), "endpointURL"},
		{"ECR endpoint", with(good, "ecrEndpointURL", "::"), "ecrEndpointURL"},
		{"CA bundle missing", with(good, "caBundle", filepath.Join(dir, "nope.pem")), "caBundle"},
		{"CA bundle not PEM", with(good, "caBundle", notPEM), "caBundle"},
		{"credentials not an object", with(good, "credentials", "AKID:secret"), "credentials"},
		{"credentials unknown key", with(good, "credentials", map[string]any{"accessKeyId": "a", "secretAccessKey": "s"}), "credentials.accessKeyId"},
		{"credentials without key ID", with(good, "credentials", map[string]any{"secretAccessKey": "s"}), "credentials.accessKeyID"},
		{"credentials without secret", with(good, "credentials", map[string]any{"accessKeyID": "a"}), "credentials.secretAccessKey"},
		{"vpc malformed", with(good, "vpcID", "my-vpc"), "vpcID"},
		{"neither subnets nor VPC", with(good, "subnets", nil), "subnets"},
		{"subnets not a list", with(good, "subnets", "subnet-0a"), "subnets"},
		{"subnet malformed", with(good, "subnets", []string{"subnet-0a", "sn-1"}), "subnets[1]"},
		{"subnet twice", with(good, "subnets", []string{"subnet-0a", "subnet-0a"}), "subnets[1]"},
		{"security group malformed", with(good, "securityGroups", []string{"default"}), "securityGroups[0]"},
		{"no image", with(good, "image", nil), "image"},
		{"empty image", with(good, "image", map[string]any{}), "image"},
		{"image id and name", with(good, "image", map[string]any{"id": fakeAMI, "name": "x", "owner": "self"}), "image"},
		{"image id malformed", with(good, "image", map[string]any{"id": "debian-12"}), "image.id"},
		{"image name without owner", with(good, "image", map[string]any{"name": "kip-cell-*"}), "image.owner"},
		{"image owner without name", with(good, "image", map[string]any{"owner": "self"}), "image.name"},
		{"image owner malformed", with(good, "image", map[string]any{"owner": "debian", "name": "x"}), "image.owner"},
		{"image unknown key", with(good, "image", map[string]any{"ami": fakeAMI}), "image.ami"},
		{"instance profile", with(good, "instanceProfile", "arn:aws:iam::1:role/x"), "instanceProfile"},
		{"allowed instance profiles not a list", with(good, "allowedInstanceProfiles", "kip-cell"), "allowedInstanceProfiles"},
		{"allowed instance profile a role ARN", with(good, "allowedInstanceProfiles", []string{"kip-cell", "arn:aws:iam::123456789012:role/admin"}), "allowedInstanceProfiles[1]"},
		{"allowed instance profile empty", with(good, "allowedInstanceProfiles", []string{""}), "allowedInstanceProfiles[0]"},
		{"allowed instance profile twice", with(good, "allowedInstanceProfiles", []string{"a", "b", "a"}), "allowedInstanceProfiles[2]"},
		{"allowed security group malformed", with(good, "allowedSecurityGroups", []string{"sg-0a", "web"}), "allowedSecurityGroups[1]"},
		{"allowed security group twice", with(good, "allowedSecurityGroups", []string{"sg-0a", "sg-0a"}), "allowedSecurityGroups[1]"},
		{"instance metadata tags not a boolean", with(good, "instanceMetadataTags", "enabled"), "instanceMetadataTags"},
		{"pod metadata not a boolean", with(good, "podMetadata", "yes"), "podMetadata"},
		{"KMS key not a key", with(good, "rootVolumeKMSKeyID", "my-key"), "rootVolumeKMSKeyID"},
		{"KMS key ARN of another service", with(good, "rootVolumeKMSKeyID", "arn:aws:iam::123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"), "rootVolumeKMSKeyID"},
		{"KMS key ID without its ARN", with(good, "rootVolumeKMSKeyID", "key/1234abcd-12ab-34cd-56ef-1234567890ab"), "rootVolumeKMSKeyID"},
		{"tags not strings", with(good, "tags", map[string]any{"team": 7}), "tags"},
		{"tag aws: prefix", with(good, "tags", map[string]string{"aws:cloudformation:stack": "x"}), "tags.aws:cloudformation:stack"},
		{"tag standard key", with(good, "tags", map[string]string{pluginapi.TagCluster: "other"}), "tags." + pluginapi.TagCluster},
		{"tag value too long", with(good, "tags", map[string]string{"team": strings.Repeat("x", 257)}), "tags.team"},
		{"too many tags", with(good, "tags", manyTags), "tags"},
		{"cloud-init missing", with(good, "cloudInit", filepath.Join(dir, "nope.yaml")), "cloudInit"},
		{"cloud-init not cloud-config", with(good, "cloudInit", notCloudConfig), "cloudInit"},
		{"cloud-init too big", with(good, "cloudInit", bigCloudConfig), "cloudInit"},
		{"rate limit negative", with(good, "rateLimit", map[string]any{"describePerSecond": -1}), "rateLimit.describePerSecond"},
		{"rate limit read negative", with(good, "rateLimit", map[string]any{"readPerSecond": -1}), "rateLimit.readPerSecond"},
		{"rate limit old and new name", with(good, "rateLimit", map[string]any{"describePerSecond": 1, "readPerSecond": 2}), "rateLimit.describePerSecond"},
		{"rate limit not a number", with(good, "rateLimit", map[string]any{"mutatePerSecond": "5/s"}), "rateLimit.mutatePerSecond"},
		{"rate limit burst", with(good, "rateLimit", map[string]any{"burst": -2}), "rateLimit.burst"},
		{"rate limit burst fraction", with(good, "rateLimit", map[string]any{"burst": 1.5}), "rateLimit.burst"},
		{"rate limit unknown key", with(good, "rateLimit", map[string]any{"perSecond": 1}), "rateLimit.perSecond"},
		// What only EC2 can tell.
		{"subnet unknown", with(good, "subnets", []string{"subnet-0a", "subnet-0dead"}), "subnets[1]"},
		{"subnets in one zone", with(with(good, "subnets", []string{"subnet-0b", "subnet-0c"}), "vpcID", fakeVPC), "subnets[1]"},
		{"subnet in another VPC", with(good, "vpcID", "vpc-0b"), "subnets[0]"},
		{"VPC without subnets", with(with(good, "subnets", nil), "vpcID", "vpc-0dead"), "vpcID"},
		{"image unknown", with(good, "image", map[string]any{"id": "ami-0dead"}), "image.id"},
		{"image name matches nothing", with(good, "image", map[string]any{"owner": fakeOwner, "name": "debian-*"}), "image.name"},
	}
	f.subnets = append(f.subnets, fakeSubnet{id: "subnet-0c", vpc: fakeVPC, zone: "us-east-1b", free: 10})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "c", Config: mustJSON(t, tt.config)})
			var invalid *pluginapi.InvalidConfigError
			if !errors.As(err, &invalid) {
				t.Fatalf("Configure = %v, want InvalidConfig for %q", err, tt.key)
			}
			if invalid.Key != tt.key {
				t.Errorf("Configure names key %q, want %q (error: %v)", invalid.Key, tt.key, err)
			}
		})
	}
}

func TestConfigureRequiresClusterID(t *testing.T) {
	f := newFakeEC2(t)
	_, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{Config: mustJSON(t, testConfig(f))})
	var invalid *pluginapi.InvalidConfigError
	if !errors.As(err, &invalid) || invalid.Key != "clusterID" {
		t.Fatalf("Configure without cluster ID = %v, want InvalidConfig for clusterID", err)
	}
}

func TestConfigureResolves(t *testing.T) {
	f := newFakeEC2(t)
	f.images = append(f.images,
		fakeImage{id: "ami-0c3", owner: fakeOwner, name: "kip-cell-amd64-2", arch: "x86_64", created: "2026-02-01T00:00:00.000Z", rootDevice: "/dev/sda1"},
		fakeImage{id: "ami-0d4", owner: "999999999999", name: "kip-cell-amd64-3", arch: "x86_64", created: "2026-03-01T00:00:00.000Z"})
	tests := []struct {
		name    string
		config  map[string]any
		subnets map[string]string
		image   resolvedImage
	}{
		{
			name:    "explicit subnets, image by ID",
			config:  testConfig(f),
			subnets: map[string]string{"us-east-1a": "subnet-0a", "us-east-1b": "subnet-0b"},
			image:   resolvedImage{id: fakeAMI, arch: pluginapi.ArchAMD64, rawArch: "x86_64", rootDevice: "/dev/xvda"},
		},
		{
			name:    "newest image of the owner by name",
			config:  with(with(testConfig(f), "image", map[string]any{"owner": fakeOwner, "name": "kip-cell-amd64-*"}), "subnets", []string{"subnet-0b"}),
			subnets: map[string]string{"us-east-1b": "subnet-0b"},
			image:   resolvedImage{id: "ami-0c3", arch: pluginapi.ArchAMD64, rawArch: "x86_64", rootDevice: "/dev/sda1"},
		},
		{
			name:    "arm64 image",
			config:  with(testConfig(f), "image", map[string]any{"id": fakeARMAMI}),
			subnets: map[string]string{"us-east-1a": "subnet-0a", "us-east-1b": "subnet-0b"},
			image:   resolvedImage{id: fakeARMAMI, arch: pluginapi.ArchARM64, rawArch: "arm64", rootDevice: "/dev/xvda"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := configured(t, tt.config).cfg.Get()
			if diff := cmp.Diff(tt.subnets, cfg.subnets); diff != "" {
				t.Errorf("subnets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.image, cfg.image, cmp.AllowUnexported(resolvedImage{})); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
		})
	}
}

// With only vpcID, the cells use the VPC's subnets tagged kipcell.io/cells,
// or all of them, one per zone: the one with the most free addresses.
func TestSubnetAutoDetection(t *testing.T) {
	tests := []struct {
		name     string
		subnets  []fakeSubnet
		want     map[string]string
		warnings int
	}{
		{
			name: "untagged: all, most free addresses per zone",
			subnets: []fakeSubnet{
				{id: "subnet-01", vpc: fakeVPC, zone: "us-east-1a", free: 10},
				{id: "subnet-02", vpc: fakeVPC, zone: "us-east-1a", free: 50},
				{id: "subnet-03", vpc: fakeVPC, zone: "us-east-1b", free: 5},
				{id: "subnet-04", vpc: "vpc-0other", zone: "us-east-1c", free: 500},
			},
			want:     map[string]string{"us-east-1a": "subnet-02", "us-east-1b": "subnet-03"},
			warnings: 1,
		},
		{
			name: "tagged ones only",
			subnets: []fakeSubnet{
				{id: "subnet-01", vpc: fakeVPC, zone: "us-east-1a", free: 10, tags: map[string]string{TagCells: "true"}},
				{id: "subnet-02", vpc: fakeVPC, zone: "us-east-1a", free: 50},
				{id: "subnet-03", vpc: fakeVPC, zone: "us-east-1b", free: 5},
			},
			want: map[string]string{"us-east-1a": "subnet-01"},
		},
		{
			name: "equal free addresses: the lower ID",
			subnets: []fakeSubnet{
				{id: "subnet-09", vpc: fakeVPC, zone: "us-east-1a", free: 10},
				{id: "subnet-08", vpc: fakeVPC, zone: "us-east-1a", free: 10},
			},
			want:     map[string]string{"us-east-1a": "subnet-08"},
			warnings: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEC2(t)
			f.subnets = tt.subnets
			f.pageSize = 1 // pages through DescribeSubnets
			p := newProvider()
			resp, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "c",
				Config: mustJSON(t, with(with(testConfig(f), "subnets", nil), "vpcID", fakeVPC))})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, p.cfg.Load().subnets); diff != "" {
				t.Errorf("subnets (-want +got):\n%s", diff)
			}
			if len(resp.Warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", resp.Warnings, tt.warnings)
			}
			for _, req := range f.requests("DescribeSubnets") {
				if req.Get("Filter.1.Name") != "vpc-id" || req.Get("Filter.1.Value.1") != fakeVPC {
					t.Errorf("DescribeSubnets request %v does not filter by vpc-id %s", req, fakeVPC)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	f := newFakeEC2(t)
	tests := []struct {
		name      string
		rateLimit map[string]any
		want      ratelimit.Config
	}{
		{"none", nil, ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20}},
		{"one rate", map[string]any{"mutatePerSecond": 0.5}, ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 0.5, Burst: 20}},
		{"reads", map[string]any{"readPerSecond": 2, "burst": 3}, ratelimit.Config{ReadPerSecond: 2, MutatePerSecond: 5, Burst: 3}},
		{"reads by their old name", map[string]any{"describePerSecond": 2.5}, ratelimit.Config{ReadPerSecond: 2.5, MutatePerSecond: 5, Burst: 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := testConfig(f)
			if tt.rateLimit != nil {
				config = with(config, "rateLimit", tt.rateLimit)
			}
			cfg, _ := configured(t, config).cfg.Get()
			if cfg.rate != tt.want {
				t.Errorf("rate limit = %+v, want %+v", cfg.rate, tt.want)
			}
		})
	}
}

// What pods' annotations may ask for is the allow-lists plus the
// defaults; the KMS key takes each form EBS accepts.
func TestConfigAllowLists(t *testing.T) {
	f := newFakeEC2(t)
	const keyID = "1234abcd-12ab-34cd-56ef-1234567890ab"
	tests := []struct {
		name                     string
		config                   map[string]any
		profiles, groups         []string
		kmsKeyID                 string
		metadataTags             bool
		wantProfiles, wantGroups []string
	}{
		{name: "nothing allowed", config: testConfig(f)},
		{
			name:         "defaults only",
			config:       with(with(testConfig(f), "instanceProfile", "kip-cell"), "securityGroups", []string{"sg-0a"}),
			wantProfiles: []string{"kip-cell"}, wantGroups: []string{"sg-0a"},
		},
		{
			name: "lists and defaults",
			config: with(with(with(with(testConfig(f), "instanceProfile", "kip-cell"), "securityGroups", []string{"sg-0a", "sg-0b"}),
				"allowedInstanceProfiles", []string{"arn:aws:iam::123456789012:instance-profile/batch/s3-reader", "kip-cell"}),
				"allowedSecurityGroups", []string{"sg-0c", "sg-0a"}),
			wantProfiles: []string{"arn:aws:iam::123456789012:instance-profile/batch/s3-reader", "kip-cell"},
			wantGroups:   []string{"sg-0c", "sg-0a", "sg-0b"},
		},
		{name: "KMS key ID", config: with(testConfig(f), "rootVolumeKMSKeyID", keyID), kmsKeyID: keyID},
		{name: "KMS multi-Region key", config: with(testConfig(f), "rootVolumeKMSKeyID", "mrk-1234abcd12ab34cd56ef1234567890ab"), kmsKeyID: "mrk-1234abcd12ab34cd56ef1234567890ab"},
		{name: "KMS alias", config: with(testConfig(f), "rootVolumeKMSKeyID", "alias/kip-cells"), kmsKeyID: "alias/kip-cells"},
		{name: "KMS key ARN", config: with(testConfig(f), "rootVolumeKMSKeyID", "arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/"+keyID), kmsKeyID: "arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/" + keyID},
		{name: "KMS alias ARN", config: with(testConfig(f), "rootVolumeKMSKeyID", "arn:aws:kms:us-east-1:123456789012:alias/kip-cells"), kmsKeyID: "arn:aws:kms:us-east-1:123456789012:alias/kip-cells"},
		{name: "metadata tags", config: with(testConfig(f), "instanceMetadataTags", true), metadataTags: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := configured(t, tt.config).cfg.Get()
			got := []any{cfg.allowedProfiles, cfg.allowedGroups, cfg.kmsKeyID, cfg.metadataTags}
			want := []any{tt.wantProfiles, tt.wantGroups, tt.kmsKeyID, tt.metadataTags}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("allowed profiles, groups, KMS key, metadata tags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallsBeforeConfigureFail(t *testing.T) {
	p := newProvider()
	ctx := t.Context()
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); !errors.Is(err, p.cfg.ErrNotConfigured()) || !pluginapi.IsNotConfigured(err) {
		t.Errorf("List before Configure = %v", err)
	}
	if _, err := p.Launch(ctx, launchRequest("c-1")); !errors.Is(err, p.cfg.ErrNotConfigured()) {
		t.Errorf("Launch before Configure = %v", err)
	}
	if _, err := p.GetInfo(ctx, &pluginapi.GetInfoRequest{}); err != nil {
		t.Errorf("GetInfo before Configure = %v", err)
	}
}

// The JSON Schema GetInfo reports, rendered from Config, is the golden
// file: go test -update rewrites it, and its diff shows what a change of
// Config's keys or tags does to the schema.
func TestConfigSchema(t *testing.T) {
	info, err := newProvider().GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-schema.json", []byte(info.ConfigSchema))
}

// Without static credentials the SDK's default chain applies; when it finds
// nothing, Configure says so, naming credentials.
func TestConfigureDefaultCredentialChain(t *testing.T) {
	f := newFakeEC2(t)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	cfg := mustJSON(t, with(testConfig(f), "credentials", nil))

	_, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "c", Config: cfg})
	var invalid *pluginapi.InvalidConfigError
	if !errors.As(err, &invalid) || invalid.Key != "credentials" {
		t.Fatalf("Configure without any credentials = %v, want InvalidConfig for credentials", err)
	}
	if n := f.callCount("DescribeSubnets"); n != 0 {
		t.Errorf("Configure without credentials called DescribeSubnets %d times", n)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if _, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "c", Config: cfg}); err != nil {
		t.Errorf("Configure with credentials in the environment = %v", err)
	}
}
