package aws

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// Config is the plugin's configuration as the operator writes it (the
// plugin.config section of kip's configuration), one JSON object, decoded
// by pluginapi.DecodeConfig: each field's json tag is its key and its
// other tags its JSON Schema (configSchema), which GetInfo reports for
// documentation and tooling. region and image are required, and subnets
// or vpcID; unknown keys are refused so that a typo does not silently
// fall back to a default. Configure remains the authority: validate checks
// the values, and Configure what only EC2 knows (that the subnets and the
// image exist).
type Config struct {
	Region                  string       `json:"region" required:"true" pattern:"^[a-z]{2,4}(-[a-z]+)+-[0-9]+$" doc:"The AWS region of the cells, such as us-east-1."`
	EndpointURL             string       `json:"endpointURL,omitempty" doc:"Overrides the EC2 endpoint: a VPC interface endpoint, a private endpoint, or an EC2 simulator (http or https URL)."`
	ECREndpointURL          string       `json:"ecrEndpointURL,omitempty" doc:"Overrides the ECR endpoint used for registry credentials (http or https URL)."`
	CABundle                string       `json:"caBundle,omitempty" doc:"Path of a PEM file of extra CA certificates to trust for the endpoints."`
	Credentials             *Credentials `json:"credentials,omitempty" doc:"Static credentials. Omitted, the SDK's default chain applies: environment, shared files, web identity (IRSA), container or instance role."`
	VPCID                   string       `json:"vpcID,omitempty" pattern:"^vpc-[0-9a-f]+$" doc:"The cells' VPC. With no subnets, the cells use its subnets tagged kipcell.io/cells=true, or all of them, one per zone (the one with the most free addresses)."`
	Subnets                 []string     `json:"subnets,omitempty" pattern:"^subnet-[0-9a-f]+$" uniqueItems:"true" doc:"The cells' subnets, at most one per zone; the catalog offers their zones."`
	SecurityGroups          []string     `json:"securityGroups,omitempty" pattern:"^sg-[0-9a-f]+$" uniqueItems:"true" doc:"Security groups of every cell; a pod's kipcell.io/security-groups are added. The cells need TCP 6421 open to kip."`
	Image                   *Image       `json:"image,omitempty" required:"true" doc:"The cells' AMI: by id, or by owner and name (wildcards * and ?; the newest available image wins, chosen at every Configure)."`
	InstanceProfile         string       `json:"instanceProfile,omitempty" doc:"Default instance profile of cells, a name or an ARN; a pod's kipcell.io/instance-profile replaces it with one of allowedInstanceProfiles."`
	AllowedInstanceProfiles []string     `json:"allowedInstanceProfiles,omitempty" uniqueItems:"true" doc:"Instance profiles a pod may name in its kipcell.io/instance-profile annotation, written as the pod writes them (a name or an ARN, compared exactly). Empty, the annotation is refused with an event on the pod; instanceProfile is always allowed. Scope the policy's iam:PassRole to their roles."`
	AllowedSecurityGroups   []string     `json:"allowedSecurityGroups,omitempty" pattern:"^sg-[0-9a-f]+$" uniqueItems:"true" doc:"Security groups a pod may add in its kipcell.io/security-groups annotation. Empty, the annotation is refused with an event on the pod; securityGroups are always allowed."`
	InstanceMetadataTags    bool         `json:"instanceMetadataTags,omitempty" doc:"Make the instances' tags readable in instance metadata (EC2 MetadataOptions.InstanceMetadataTags). Off by default: the tags name the pod and the cluster."`
	// PodMetadata sets the hop limit of IMDSv2's token answers to 2, one
	// more than the agent needs; the boot recipe's KIP_POD_IMDS=1 opens
	// the agent's firewall to them.
	PodMetadata        bool              `json:"podMetadata,omitempty" doc:"Let pods reach instance metadata through IMDSv2 (hop limit 2 instead of 1, so that token answers reach a pod in its own network namespace). Set it with the boot recipe's KIP_POD_IMDS=1. Off by default: pods then get the instance profile's credentials."`
	RootVolumeKMSKeyID string            `json:"rootVolumeKMSKeyID,omitempty" doc:"KMS key that encrypts the cells' root volumes: a key ID, alias/<name>, or the ARN of either. Omitted, EBS's default key of the account and region. Root volumes are always encrypted."`
	Tags               map[string]string `json:"tags,omitempty" maxLength:"256" maxProperties:"45" doc:"Tags of every instance and root volume, beside kipcell.io/cluster, node, cell, pod-uid and Name (the cell ID, unless set here)."`
	CloudInit          string            `json:"cloudInit,omitempty" doc:"Path of a cloud-config file (#cloud-config, at most 12 KiB) sent as the first part of the user data: the cell boot recipe, deploy/aws/cloud-init.yaml."`
	RateLimit          RateLimit         `json:"rateLimit,omitempty" doc:"Client-side limit of the plugin's EC2 calls: token buckets for reads (Describe* calls) and for calls that change something."`
	// Identity configures the check of a joining cell's instance identity
	// (identity.go).
	Identity *IdentityConfig `json:"identity,omitempty" doc:"The check of a joining cell's signed instance identity document (capability instance-identity). Without certificates no identity is checked: cells join with their bootstrap's token alone."`
}

// ConfigAlternatives says that the cells' subnets come from subnets or
// from vpcID (pluginapi.ConfigAlternatives).
func (Config) ConfigAlternatives() (oneOf, anyOf [][]string) {
	return nil, [][]string{{"subnets"}, {"vpcID"}}
}

// Credentials are static AWS credentials.
type Credentials struct {
	AccessKeyID     string `json:"accessKeyID" required:"true" minLength:"1"`
	SecretAccessKey string `json:"secretAccessKey" required:"true" minLength:"1"`
	SessionToken    string `json:"sessionToken,omitempty"`
}

// Image names the cells' AMI: by ID, or by owner and name (wildcards
// allowed; the newest available image wins).
type Image struct {
	ID    string `json:"id,omitempty" pattern:"^ami-[0-9a-f]+$"`
	Owner string `json:"owner,omitempty" doc:"Account ID, self, amazon or aws-marketplace."`
	Name  string `json:"name,omitempty" minLength:"1"`
}

// ConfigAlternatives says that an image is named by id, or by owner and
// name (pluginapi.ConfigAlternatives).
func (Image) ConfigAlternatives() (oneOf, anyOf [][]string) {
	return [][]string{{"id"}, {"owner", "name"}}, nil
}

// RateLimit is the client-side rate limit of EC2 calls
// (pluginapi/ratelimit): one bucket for reads, EC2's non-mutating
// (Describe*) calls, and one for the calls that change something
// (RunInstances, TerminateInstances). readPerSecond was describePerSecond
// until issue 30 gave every plugin the same keys: the old name is still
// taken, alone.
type RateLimit struct {
	ratelimit.Config
	DescribePerSecond float64 `json:"describePerSecond,omitempty" exclusiveMinimum:"0" deprecated:"true" doc:"The old name of readPerSecond, still taken (not beside it)."`
}

// limits checks r and applies defaults (ratelimit.Config.Check), taking
// describePerSecond for readPerSecond.
func (r RateLimit) limits(defaults ratelimit.Config) (ratelimit.Config, error) {
	if d := r.DescribePerSecond; d != 0 {
		if r.ReadPerSecond != 0 {
			return ratelimit.Config{}, pluginapi.NewInvalidConfig("rateLimit.describePerSecond", "is the old name of rateLimit.readPerSecond: set readPerSecond alone")
		}
		if err := ratelimit.CheckPerSecond("rateLimit.describePerSecond", d); err != nil {
			return ratelimit.Config{}, err
		}
		r.ReadPerSecond = d
	}
	return r.Check("rateLimit", defaults)
}

// defaults are the defaults of Config's keys that have one: validate
// applies them and configSchema shows them.
//
// EC2 throttles each account and region with token buckets
// (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html):
// non-mutating (Describe*) calls have a bucket of 100 refilled at 20 per
// second, mutating calls 200 at 5 per second, and RunInstances also spends
// a resource bucket of 1000 instances refilled at 2 per second. The buckets
// are shared by every tool using the account, so the plugin takes half the
// Describe refill rate and the mutating refill rate, with a burst of 20 so
// that a burst of pods launches at once; the resource bucket's 1000 covers
// any burst a cluster makes.
var defaults = Config{
	RateLimit: RateLimit{Config: ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20}},
}

// configSchema is Config's JSON Schema, reported by GetInfo.
var configSchema = pluginapi.MustConfigSchema("kip-plugin-aws configuration", &defaults)

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
	// The patterns of Config's tags, which its schema shows.
	regionRE = pluginapi.ConfigPattern(Config{}, "region")
	vpcRE    = pluginapi.ConfigPattern(Config{}, "vpcID")
	subnetRE = pluginapi.ConfigPattern(Config{}, "subnets")
	groupRE  = pluginapi.ConfigPattern(Config{}, "securityGroups")
	amiRE    = pluginapi.ConfigPattern(Config{}, "image.id")

	ownerRE    = regexp.MustCompile(`^([0-9]{12}|self|amazon|aws-marketplace)$`)
	profileRE  = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	profileARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:instance-profile/[\w+=,.@/-]{1,512}$`)
	// kmsKeyRE is a KMS key as EBS takes it: a key ID (a UUID or a
	// multi-Region mrk- ID), an alias, or the ARN of either.
	kmsKeyRE = regexp.MustCompile(`^(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/)?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$|^(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:)?alias/[\w/-]{1,250}$`)
)

// isProfile reports whether p is an instance profile name or ARN.
func isProfile(p string) bool { return profileRE.MatchString(p) || profileARN.MatchString(p) }

// decodeConfig parses raw strictly (pluginapi.DecodeConfig): it refuses
// unknown keys and values of the wrong type, naming the key. It does not
// contact AWS or read files.
func decodeConfig(raw []byte) (*Config, error) {
	c := &Config{}
	if err := pluginapi.DecodeConfig(raw, c); err != nil {
		return nil, err
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
	rate            ratelimit.Config
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

	if s.rate, err = c.RateLimit.limits(defaults.RateLimit.Config); err != nil {
		return nil, err
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
