package aws

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// Config is the plugin's configuration as the operator writes it (the
// plugin.config section of kip's configuration), one JSON object. region and
// image are required, and subnets or vpcID; unknown keys are refused so that
// a typo does not silently fall back to a default.
type Config struct {
	// Region is the AWS region, such as us-east-1.
	Region string `json:"region"`
	// EndpointURL overrides the EC2 endpoint (a VPC endpoint, a simulator).
	EndpointURL string `json:"endpointURL,omitempty"`
	// ECREndpointURL overrides the ECR endpoint used by RegistryAuth.
	ECREndpointURL string `json:"ecrEndpointURL,omitempty"`
	// CABundle is a PEM file of extra CAs to trust for the endpoints.
	CABundle string `json:"caBundle,omitempty"`
	// Credentials are static credentials; omitted, the SDK's default chain
	// applies (environment, shared files, web identity, instance role).
	Credentials *Credentials `json:"credentials,omitempty"`
	// VPCID is the VPC of the cells; with no subnets, the plugin uses the
	// VPC's subnets tagged kipcell.io/cells=true, or all of them.
	VPCID string `json:"vpcID,omitempty"`
	// Subnets are the cells' subnets, at most one per zone; the zones of
	// the catalog are theirs.
	Subnets []string `json:"subnets,omitempty"`
	// SecurityGroups are the groups of every cell, before the pod's own.
	SecurityGroups []string `json:"securityGroups,omitempty"`
	// Image is the cells' AMI.
	Image *Image `json:"image,omitempty"`
	// InstanceProfile is the default instance profile of cells, a name or
	// an ARN; a pod may name another from AllowedInstanceProfiles.
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// AllowedInstanceProfiles are the instance profiles a pod may name in
	// its kipcell.io/instance-profile annotation, written as the pod
	// writes them (a name or an ARN; compared exactly). Empty, the
	// annotation is refused; InstanceProfile is always allowed.
	AllowedInstanceProfiles []string `json:"allowedInstanceProfiles,omitempty"`
	// AllowedSecurityGroups are the security groups a pod may add in its
	// kipcell.io/security-groups annotation. Empty, the annotation is
	// refused; SecurityGroups are always allowed.
	AllowedSecurityGroups []string `json:"allowedSecurityGroups,omitempty"`
	// InstanceMetadataTags makes the instances' tags readable in instance
	// metadata (MetadataOptions.InstanceMetadataTags); off by default.
	InstanceMetadataTags bool `json:"instanceMetadataTags,omitempty"`
	// PodMetadata lets pods reach instance metadata through IMDSv2: the
	// hop limit of its token answers is 2, one more than the agent needs,
	// so that they reach a pod in its network namespace behind the
	// instance. Off by default (1). Set with the boot recipe's
	// KIP_POD_IMDS=1, which opens the agent's firewall to them.
	PodMetadata bool `json:"podMetadata,omitempty"`
	// RootVolumeKMSKeyID is the KMS key (ID, alias, or their ARN) that
	// encrypts the cells' root volumes; empty, EBS's default key for the
	// account and region. Root volumes are always encrypted.
	RootVolumeKMSKeyID string `json:"rootVolumeKMSKeyID,omitempty"`
	// Tags are put on every instance and volume, beside the standard tags.
	Tags map[string]string `json:"tags,omitempty"`
	// CloudInit is a cloud-config file run at the cells' first boot (the
	// boot recipe, deploy/aws/cloud-init.yaml).
	CloudInit string `json:"cloudInit,omitempty"`
	// RateLimit bounds the plugin's EC2 request rate.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// Identity configures the check of a joining cell's instance
	// identity (identity.go).
	Identity *IdentityConfig `json:"identity,omitempty"`
}

// Credentials are static AWS credentials.
type Credentials struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	SessionToken    string `json:"sessionToken,omitempty"`
}

// Image names the cells' AMI: by ID, or by owner and name (wildcards
// allowed; the newest available image wins).
type Image struct {
	ID    string `json:"id,omitempty"`
	Owner string `json:"owner,omitempty"`
	Name  string `json:"name,omitempty"`
}

// RateLimit is the client-side rate limit of EC2 calls: two token buckets,
// one for Describe* calls and one for the calls that change something
// (RunInstances, TerminateInstances), each refilled at its rate and holding
// at most Burst tokens.
type RateLimit struct {
	DescribePerSecond float64 `json:"describePerSecond,omitempty"`
	MutatePerSecond   float64 `json:"mutatePerSecond,omitempty"`
	Burst             int     `json:"burst,omitempty"`
}

// Default rate limits. EC2 throttles each account and region with token
// buckets (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html):
// non-mutating (Describe*) calls have a bucket of 100 refilled at 20 per
// second, mutating calls 200 at 5 per second, and RunInstances also spends
// a resource bucket of 1000 instances refilled at 2 per second. The buckets
// are shared by every tool using the account, so the plugin takes half the
// Describe refill rate and the mutating refill rate, with a burst of 20 so
// that a burst of pods launches at once; the resource bucket's 1000 covers
// any burst a cluster makes.
const (
	defaultDescribePerSecond = 10
	defaultMutatePerSecond   = 5
	defaultBurst             = 20
)

// Limits of EC2 and of the plugin.
const (
	maxTagKey    = 128
	maxTagValue  = 256
	maxTags      = 50 // per resource
	reservedTags = 5  // the four standard tags and Name
	// maxUserData is EC2's limit on user data before base64.
	maxUserData = 16 << 10
	// maxCloudInit leaves room for the bootstrap (about 3 KiB) in the user
	// data.
	maxCloudInit = 12 << 10
)

// TagCells marks the subnets the plugin picks when subnets is empty.
const TagCells = "kipcell.io/cells"

var (
	regionRE   = regexp.MustCompile(`^[a-z]{2,4}(-[a-z]+)+-[0-9]+$`)
	vpcRE      = regexp.MustCompile(`^vpc-[0-9a-f]+$`)
	subnetRE   = regexp.MustCompile(`^subnet-[0-9a-f]+$`)
	groupRE    = regexp.MustCompile(`^sg-[0-9a-f]+$`)
	amiRE      = regexp.MustCompile(`^ami-[0-9a-f]+$`)
	ownerRE    = regexp.MustCompile(`^([0-9]{12}|self|amazon|aws-marketplace)$`)
	profileRE  = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	profileARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:instance-profile/[\w+=,.@/-]{1,512}$`)
	// kmsKeyRE is a KMS key as EBS takes it: a key ID (a UUID or a
	// multi-Region mrk- ID), an alias, or the ARN of either.
	kmsKeyRE = regexp.MustCompile(`^(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/)?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$|^(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:)?alias/[\w/-]{1,250}$`)
)

// isProfile reports whether p is an instance profile name or ARN.
func isProfile(p string) bool { return profileRE.MatchString(p) || profileARN.MatchString(p) }

// decodeConfig parses raw strictly: it refuses unknown keys and values of
// the wrong type, naming the key. It does not contact AWS or read files.
func decodeConfig(raw []byte) (*Config, error) {
	c := &Config{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var creds, image, rate, identity json.RawMessage
	if err := pluginapi.DecodeConfigObject(raw, "", map[string]any{
		"region":          &c.Region,
		"endpointURL":     &c.EndpointURL,
		"ecrEndpointURL":  &c.ECREndpointURL,
		"caBundle":        &c.CABundle,
		"credentials":     &creds,
		"vpcID":           &c.VPCID,
		"subnets":         &c.Subnets,
		"securityGroups":  &c.SecurityGroups,
		"image":           &image,
		"instanceProfile": &c.InstanceProfile,
		"tags":            &c.Tags,
		"cloudInit":       &c.CloudInit,
		"rateLimit":       &rate,
		"identity":        &identity,

		"allowedInstanceProfiles": &c.AllowedInstanceProfiles,
		"allowedSecurityGroups":   &c.AllowedSecurityGroups,
		"instanceMetadataTags":    &c.InstanceMetadataTags,
		"podMetadata":             &c.PodMetadata,
		"rootVolumeKMSKeyID":      &c.RootVolumeKMSKeyID,
	}); err != nil {
		return nil, err
	}
	if creds != nil {
		c.Credentials = &Credentials{}
		if err := pluginapi.DecodeConfigObject(creds, "credentials.", map[string]any{
			"accessKeyID":     &c.Credentials.AccessKeyID,
			"secretAccessKey": &c.Credentials.SecretAccessKey,
			"sessionToken":    &c.Credentials.SessionToken,
		}); err != nil {
			return nil, err
		}
	}
	if image != nil {
		c.Image = &Image{}
		if err := pluginapi.DecodeConfigObject(image, "image.", map[string]any{
			"id":    &c.Image.ID,
			"owner": &c.Image.Owner,
			"name":  &c.Image.Name,
		}); err != nil {
			return nil, err
		}
	}
	if rate != nil {
		c.RateLimit = &RateLimit{}
		if err := pluginapi.DecodeConfigObject(rate, "rateLimit.", map[string]any{
			"describePerSecond": &c.RateLimit.DescribePerSecond,
			"mutatePerSecond":   &c.RateLimit.MutatePerSecond,
			"burst":             &c.RateLimit.Burst,
		}); err != nil {
			return nil, err
		}
	}
	if identity != nil {
		c.Identity = &IdentityConfig{}
		if err := pluginapi.DecodeConfigObject(identity, "identity.", map[string]any{
			"certificates": &c.Identity.Certificates,
			"accountIDs":   &c.Identity.AccountIDs,
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// settings is a Config checked without contacting AWS: values parsed,
// files read, defaults applied. Configure resolves the rest (resolve.go).
type settings struct {
	region          string
	endpointURL     string
	ecrEndpointURL  string
	caBundle        []byte // PEM; nil for the system's
	credentials     *Credentials
	vpcID           string
	subnets         []string
	securityGroups  []string
	image           Image
	instanceProfile string
	tags            map[string]string
	cloudConfig     []byte // nil without cloudInit
	rate            RateLimit
	identity        identitySettings
	// allowedProfiles and allowedGroups are what a pod's annotations may
	// ask for: the allow-lists and the defaults.
	allowedProfiles []string
	allowedGroups   []string
	metadataTags    bool
	podMetadata     bool
	kmsKeyID        string
}

// validate checks c and applies defaults. It reads the files c names (the
// CA bundle, the cloud-init file) but contacts nothing.
func validate(c *Config) (*settings, error) {
	s := &settings{region: c.Region, vpcID: c.VPCID, instanceProfile: c.InstanceProfile, metadataTags: c.InstanceMetadataTags, podMetadata: c.PodMetadata}
	if c.Region == "" {
		return nil, pluginapi.NewInvalidConfig("region", "is required, such as \"us-east-1\"")
	}
	if !regionRE.MatchString(c.Region) {
		return nil, pluginapi.NewInvalidConfig("region", "%q is not an AWS region such as \"us-east-1\"", c.Region)
	}
	var err error
	if s.endpointURL, err = checkURL(c.EndpointURL); err != nil {
		return nil, pluginapi.NewInvalidConfig("endpointURL", "%v", err)
	}
	if s.ecrEndpointURL, err = checkURL(c.ECREndpointURL); err != nil {
		return nil, pluginapi.NewInvalidConfig("ecrEndpointURL", "%v", err)
	}
	if c.CABundle != "" {
		pem, err := os.ReadFile(c.CABundle)
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("caBundle", "%v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, pluginapi.NewInvalidConfig("caBundle", "%s holds no PEM certificate", c.CABundle)
		}
		s.caBundle = pem
	}
	if cr := c.Credentials; cr != nil {
		switch {
		case cr.AccessKeyID == "":
			return nil, pluginapi.NewInvalidConfig("credentials.accessKeyID", "is required with credentials (omit credentials for the SDK's default chain)")
		case cr.SecretAccessKey == "":
			return nil, pluginapi.NewInvalidConfig("credentials.secretAccessKey", "is required with credentials (omit credentials for the SDK's default chain)")
		}
		s.credentials = cr
	}

	if c.VPCID != "" && !vpcRE.MatchString(c.VPCID) {
		return nil, pluginapi.NewInvalidConfig("vpcID", "%q is not a VPC ID such as \"vpc-0abc\"", c.VPCID)
	}
	if len(c.Subnets) == 0 && c.VPCID == "" {
		return nil, pluginapi.NewInvalidConfig("subnets", "is required, or vpcID to use the VPC's subnets tagged %s=true (or all of them)", TagCells)
	}
	if s.subnets, err = checkIDs("subnets", c.Subnets, subnetRE, "a subnet ID such as \"subnet-0abc\""); err != nil {
		return nil, err
	}
	if s.securityGroups, err = checkIDs("securityGroups", c.SecurityGroups, groupRE, "a security group ID such as \"sg-0abc\""); err != nil {
		return nil, err
	}

	switch im := c.Image; {
	case im == nil || *im == Image{}:
		return nil, pluginapi.NewInvalidConfig("image", "is required: {\"id\": \"ami-...\"} or {\"owner\": \"<account>\", \"name\": \"<name, wildcards allowed>\"}")
	case im.ID != "" && (im.Owner != "" || im.Name != ""):
		return nil, pluginapi.NewInvalidConfig("image", "set id, or owner and name, not both")
	case im.ID != "" && !amiRE.MatchString(im.ID):
		return nil, pluginapi.NewInvalidConfig("image.id", "%q is not an AMI ID such as \"ami-0abc\"", im.ID)
	case im.ID == "" && im.Name == "":
		return nil, pluginapi.NewInvalidConfig("image.name", "is required with image.owner")
	case im.ID == "" && im.Owner == "":
		return nil, pluginapi.NewInvalidConfig("image.owner", "is required with image.name: an account ID, self, amazon or aws-marketplace")
	case im.ID == "" && !ownerRE.MatchString(im.Owner):
		return nil, pluginapi.NewInvalidConfig("image.owner", "%q is not an account ID (12 digits), self, amazon or aws-marketplace", im.Owner)
	default:
		s.image = *im
	}

	if err := s.launchOptions(c); err != nil {
		return nil, err
	}
	if s.tags, err = checkTags(c.Tags); err != nil {
		return nil, err
	}

	if c.CloudInit != "" {
		data, err := os.ReadFile(c.CloudInit)
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("cloudInit", "%v", err)
		}
		if !bytes.HasPrefix(data, []byte("#cloud-config")) {
			return nil, pluginapi.NewInvalidConfig("cloudInit", "%s does not start with #cloud-config", c.CloudInit)
		}
		if len(data) > maxCloudInit {
			return nil, pluginapi.NewInvalidConfig("cloudInit", "%s is %d bytes; at most %d fit in EC2's 16 KiB of user data beside the bootstrap", c.CloudInit, len(data), maxCloudInit)
		}
		s.cloudConfig = data
	}

	if s.identity, err = validateIdentity(c.Identity); err != nil {
		return nil, err
	}

	s.rate = RateLimit{DescribePerSecond: defaultDescribePerSecond, MutatePerSecond: defaultMutatePerSecond, Burst: defaultBurst}
	if r := c.RateLimit; r != nil {
		for _, f := range []struct {
			key string
			v   float64
			dst *float64
		}{{"rateLimit.describePerSecond", r.DescribePerSecond, &s.rate.DescribePerSecond}, {"rateLimit.mutatePerSecond", r.MutatePerSecond, &s.rate.MutatePerSecond}} {
			switch {
			case f.v == 0: // default
			case f.v < 0 || math.IsInf(f.v, 0) || math.IsNaN(f.v):
				return nil, pluginapi.NewInvalidConfig(f.key, "must be a positive number of calls per second")
			default:
				*f.dst = f.v
			}
		}
		switch {
		case r.Burst < 0:
			return nil, pluginapi.NewInvalidConfig("rateLimit.burst", "must be a positive number of calls")
		case r.Burst > 0:
			s.rate.Burst = r.Burst
		}
	}
	return s, nil
}

// launchOptions checks what shapes a cell's instance beyond its type: the
// instance profile, what pods may ask for beside the defaults (the
// allow-lists), and the root volume's KMS key.
func (s *settings) launchOptions(c *Config) error {
	if p := c.InstanceProfile; p != "" && !isProfile(p) {
		return pluginapi.NewInvalidConfig("instanceProfile", "%q is neither an instance profile name nor an instance profile ARN", p)
	}
	for i, p := range c.AllowedInstanceProfiles {
		k := fmt.Sprintf("allowedInstanceProfiles[%d]", i)
		if !isProfile(p) {
			return pluginapi.NewInvalidConfig(k, "%q is neither an instance profile name nor an instance profile ARN", p)
		}
		if j := slices.Index(c.AllowedInstanceProfiles, p); j < i {
			return pluginapi.NewInvalidConfig(k, "%q is listed twice", p)
		}
	}
	s.allowedProfiles = dedupe(append(slices.Clone(c.AllowedInstanceProfiles), c.InstanceProfile))
	allowedGroups, err := checkIDs("allowedSecurityGroups", c.AllowedSecurityGroups, groupRE, "a security group ID such as \"sg-0abc\"")
	if err != nil {
		return err
	}
	s.allowedGroups = dedupe(append(allowedGroups, s.securityGroups...))
	if k := c.RootVolumeKMSKeyID; k != "" {
		if !kmsKeyRE.MatchString(k) {
			return pluginapi.NewInvalidConfig("rootVolumeKMSKeyID", "%q is not a KMS key ID, alias (alias/name), key ARN or alias ARN", k)
		}
		s.kmsKeyID = k
	}
	return nil
}

// checkURL checks an endpoint URL: http or https with a host.
func checkURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http or https URL", raw)
	}
	return raw, nil
}

// checkIDs checks a list of resource IDs: each matching re, none twice.
func checkIDs(key string, ids []string, re *regexp.Regexp, what string) ([]string, error) {
	for i, id := range ids {
		k := fmt.Sprintf("%s[%d]", key, i)
		if !re.MatchString(id) {
			return nil, pluginapi.NewInvalidConfig(k, "%q is not %s", id, what)
		}
		if j := slices.Index(ids, id); j < i {
			return nil, pluginapi.NewInvalidConfig(k, "%q is listed twice", id)
		}
	}
	return slices.Clone(ids), nil
}

// standardTagKeys are set by the plugin; no configuration may set them.
var standardTagKeys = []string{pluginapi.TagCluster, pluginapi.TagNode, pluginapi.TagCell, pluginapi.TagPodUID}

// checkTags checks the configured tags against EC2's rules.
func checkTags(tags map[string]string) (map[string]string, error) {
	if len(tags) > maxTags-reservedTags {
		return nil, pluginapi.NewInvalidConfig("tags", "has %d tags; at most %d leave room for the plugin's own (EC2 allows %d)", len(tags), maxTags-reservedTags, maxTags)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key := "tags." + k
		switch {
		case k == "" || len(k) > maxTagKey:
			return nil, pluginapi.NewInvalidConfig(key, "a tag key has 1 to %d characters", maxTagKey)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return nil, pluginapi.NewInvalidConfig(key, "the aws: prefix is reserved for AWS")
		case slices.Contains(standardTagKeys, k):
			return nil, pluginapi.NewInvalidConfig(key, "is a standard tag the plugin sets itself")
		case len(tags[k]) > maxTagValue:
			return nil, pluginapi.NewInvalidConfig(key, "a tag value has at most %d characters", maxTagValue)
		}
	}
	return tags, nil
}
