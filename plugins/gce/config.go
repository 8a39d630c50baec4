package gce

import (
	"crypto/x509"
	"fmt"
	"maps"
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
// documentation and tooling. project, region, subnetwork and image are
// required; unknown keys are refused so that a typo does not silently fall
// back to a default. Configure remains the authority: validate checks the
// values, and Configure what only Compute Engine knows (that the
// subnetwork and the image exist).
type Config struct {
	Project               string            `json:"project" required:"true" doc:"The Google Cloud project ID of the cells."`
	Region                string            `json:"region" required:"true" pattern:"^[a-z]+(-[a-z]+)*[0-9]+$" doc:"The cells' region, such as us-central1."`
	Zones                 []string          `json:"zones,omitempty" minItems:"1" uniqueItems:"true" doc:"The region's zones the cells may use, such as us-central1-a; the catalog offers them. Omitted, every zone of the region."`
	Network               string            `json:"network,omitempty" doc:"The VPC network's name; omitted, the subnetwork's. Set, it must be the subnetwork's."`
	Subnetwork            string            `json:"subnetwork" required:"true" doc:"The name of the region's subnetwork of the cells (checked with subnetworks.get at Configure)."`
	ServiceAccount        string            `json:"serviceAccount,omitempty" doc:"Email of the cells' service account; omitted, the cells run without one. kip's role then needs iam.serviceAccounts.actAs on it."`
	Scopes                []string          `json:"scopes,omitempty" uniqueItems:"true" doc:"OAuth scopes of the cells' service account; omitted, cloud-platform (IAM decides)."`
	Image                 *Image            `json:"image" required:"true" doc:"The cells' boot image: by name, or by family (the family's newest image, chosen at every Configure), in project (omitted: the cells' project)."`
	NetworkTags           []string          `json:"networkTags,omitempty" uniqueItems:"true" doc:"Network tags of every cell: the firewall rule that opens TCP 6421 to kip targets them."`
	Labels                map[string]string `json:"labels,omitempty" maxLength:"63" maxProperties:"60" doc:"Labels of every instance and boot disk, beside kip-cluster, kip-node, kip-cell and kip-pod-uid (Compute Engine label syntax)."`
	BootDisk              *BootDisk         `json:"bootDisk,omitempty" doc:"The cells' boot disk: size in GB (omitted: the image's, or the pod's volume size) and type (omitted: pd-balanced)."`
	Endpoint              string            `json:"endpoint,omitempty" doc:"Overrides the Compute Engine endpoint: a Private Service Connect endpoint, or a simulator (http or https URL)."`
	CABundle              string            `json:"caBundle,omitempty" doc:"Path of a PEM file of extra CA certificates to trust for the endpoint and identity.certsURL."`
	CredentialsFile       string            `json:"credentialsFile,omitempty" doc:"Path of a service account key or external account file; omitted, Application Default Credentials."`
	WithoutAuthentication bool              `json:"withoutAuthentication,omitempty" doc:"Send no credentials (with endpoint only: a simulator, or a proxy that authenticates)."`
	RateLimit             ratelimit.Config  `json:"rateLimit,omitempty" doc:"Client-side limit of the plugin's Compute Engine calls: token buckets for reads (and operation waits) and for calls that change something."`
	StartupScript         string            `json:"startupScript,omitempty" doc:"Path of the cells' startup script (metadata startup-script, deploy/gce/startup.sh); omitted, the image runs kip-cell by itself."`
	Metadata              map[string]string `json:"metadata,omitempty" doc:"Extra metadata items of every cell, such as kip-cell-url and kip-cell-sha256 for the boot recipe (deploy/gce/startup.sh); kip-bootstrap, kip-tags and startup-script are the plugin's."`
	// Identity is how the cells' identity tokens are checked
	// (identity.go).
	Identity *IdentityConfig `json:"identity,omitempty" doc:"How the cells' identity tokens are checked before kip signs a cell's certificate (needs serviceAccount: a cell without one has no token)."`
}

// Image names the cells' boot image: by name or by family (the family's
// newest image that is not deprecated), in Project (omitted: the cells'
// project), such as {"family": "debian-12", "project": "debian-cloud"}.
type Image struct {
	Name    string `json:"name,omitempty"`
	Family  string `json:"family,omitempty"`
	Project string `json:"project,omitempty"`
}

// ConfigAlternatives says that an image is named by name or by family
// (pluginapi.ConfigAlternatives).
func (Image) ConfigAlternatives() (oneOf, anyOf [][]string) {
	return [][]string{{"name"}, {"family"}}, nil
}

// BootDisk is the cells' boot disk: its size in GB (omitted: the image's,
// or the pod's volume size) and type (omitted: pd-balanced).
type BootDisk struct {
	SizeGB int64  `json:"sizeGb,omitempty" minimum:"10"`
	Type   string `json:"type,omitempty"`
}

// defaults are the defaults of Config's keys that have one: validate
// applies them and configSchema shows them.
//
// Compute Engine's API rate quotas are per project and per minute, split
// into read requests, write (mutating) requests and operation reads
// (https://cloud.google.com/compute/api-quota; the defaults are in the
// low thousands a minute per region and are shared by every tool using
// the project). The plugin takes 10 reads and 5 writes a second with a
// burst of 20, so that a burst of pods launches at once.
var defaults = Config{
	BootDisk:  &BootDisk{Type: "pd-balanced"},
	RateLimit: ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20},
	Identity:  &IdentityConfig{CertsURL: "https://www.googleapis.com/oauth2/v3/certs"},
}

// configSchema is Config's JSON Schema, reported by GetInfo.
var configSchema = pluginapi.MustConfigSchema("kip-plugin-gce configuration", &defaults)

// Limits of Compute Engine and of the plugin.
const (
	maxLabels      = 64 // per resource
	reservedLabels = 4  // the plugin's own
	maxLabelLen    = 63
	// maxMetadata is Compute Engine's limit on all metadata of an
	// instance (512 KB); a startup script may use most of it.
	maxMetadata   = 512 << 10
	maxStartup    = 256 << 10
	defaultScope  = "https://www.googleapis.com/auth/cloud-platform"
	minDiskSizeGB = 10
	maxDiskSizeGB = 65536
)

var (
	// projectRE is a project ID: 6 to 30 characters, lowercase letters,
	// digits and hyphens, starting with a letter (a domain-scoped
	// "example.com:p" project is allowed too).
	projectRE = regexp.MustCompile(`^([a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	regionRE  = pluginapi.ConfigPattern(Config{}, "region")
	// nameRE is a Compute Engine resource name (RFC 1035): instances,
	// images, families, networks, subnetworks, tags.
	nameRE    = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	emailRE   = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[a-z]+$`)
	labelKey  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelVal  = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
	diskRE    = regexp.MustCompile(`^[a-z][-a-z0-9]{0,62}$`)
	scopeURL  = regexp.MustCompile(`^https://www\.googleapis\.com/auth/[a-z0-9._-]+$`)
	zoneSufRE = regexp.MustCompile(`^-[a-z]$`)
)

// decodeConfig parses raw strictly (pluginapi.DecodeConfig): it refuses
// unknown keys and values of the wrong type, naming the key. It does not
// contact Google or read files.
func decodeConfig(raw []byte) (*Config, error) {
	c := &Config{}
	if err := pluginapi.DecodeConfig(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// settings is a Config checked without contacting Google: values parsed,
// files read, defaults applied. Configure resolves the rest (resolve.go).
type settings struct {
	project         string
	region          string
	zones           []string // sorted; empty: the region's, resolved
	configuredZones []string // as written, for the keys of errors
	network         string
	subnetwork      string
	serviceAccount  string
	scopes          []string
	image           Image
	networkTags     []string
	labels          map[string]string
	diskSizeGB      int64
	diskType        string
	endpoint        string
	caBundle        []byte // PEM; nil for the system's
	credentialsFile string
	noAuth          bool
	rate            ratelimit.Config
	startupScript   []byte // nil without startupScript
	metadata        map[string]string
	certsURL        string // the JWKS of the identity tokens' keys
}

// validate checks c and applies defaults. It reads the files c names (the
// CA bundle, the startup script, the credentials file's presence) but
// contacts nothing.
func validate(c *Config) (*settings, error) {
	s := &settings{project: c.Project, region: c.Region, network: c.Network, subnetwork: c.Subnetwork, serviceAccount: c.ServiceAccount}
	switch {
	case c.Project == "":
		return nil, pluginapi.NewInvalidConfig("project", "is required: the project ID of the cells, such as \"my-project\"")
	case !projectRE.MatchString(c.Project):
		return nil, pluginapi.NewInvalidConfig("project", "%q is not a project ID (6 to 30 lowercase letters, digits and hyphens, starting with a letter)", c.Project)
	case c.Region == "":
		return nil, pluginapi.NewInvalidConfig("region", "is required, such as \"us-central1\"")
	case !regionRE.MatchString(c.Region):
		return nil, pluginapi.NewInvalidConfig("region", "%q is not a Compute Engine region such as \"us-central1\"", c.Region)
	}
	for i, z := range c.Zones {
		k := fmt.Sprintf("zones[%d]", i)
		if !strings.HasPrefix(z, c.Region) || !zoneSufRE.MatchString(z[len(c.Region):]) {
			return nil, pluginapi.NewInvalidConfig(k, "%q is not a zone of region %s, such as \"%s-a\"", z, c.Region, c.Region)
		}
		if slices.Index(c.Zones, z) < i {
			return nil, pluginapi.NewInvalidConfig(k, "%q is listed twice", z)
		}
	}
	s.zones, s.configuredZones = slices.Sorted(slices.Values(c.Zones)), slices.Clone(c.Zones)

	switch {
	case c.Subnetwork == "":
		return nil, pluginapi.NewInvalidConfig("subnetwork", "is required: the name of the cells' subnetwork in region %s", c.Region)
	case !nameRE.MatchString(c.Subnetwork):
		return nil, pluginapi.NewInvalidConfig("subnetwork", "%q is not a subnetwork name (lowercase letters, digits and hyphens, at most 63)", c.Subnetwork)
	case c.Network != "" && !nameRE.MatchString(c.Network):
		return nil, pluginapi.NewInvalidConfig("network", "%q is not a network name (lowercase letters, digits and hyphens, at most 63)", c.Network)
	}

	if err := s.identity(c); err != nil {
		return nil, err
	}
	if err := s.imageAndDisk(c); err != nil {
		return nil, err
	}
	var err error
	if s.networkTags, err = checkNames("networkTags", c.NetworkTags, "a network tag"); err != nil {
		return nil, err
	}
	if s.labels, err = checkLabels(c.Labels); err != nil {
		return nil, err
	}
	if err := s.access(c); err != nil {
		return nil, err
	}

	if c.StartupScript != "" {
		data, err := os.ReadFile(c.StartupScript)
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("startupScript", "%v", err)
		}
		if len(data) == 0 {
			return nil, pluginapi.NewInvalidConfig("startupScript", "%s is empty", c.StartupScript)
		}
		if len(data) > maxStartup {
			return nil, pluginapi.NewInvalidConfig("startupScript", "%s is %d bytes; at most %d leave room for the bootstrap in the instance's %d bytes of metadata", c.StartupScript, len(data), maxStartup, maxMetadata)
		}
		s.startupScript = data
	}

	if s.metadata, err = checkMetadata(c.Metadata, len(s.startupScript)); err != nil {
		return nil, err
	}
	if s.rate, err = c.RateLimit.Check("rateLimit", defaults.RateLimit); err != nil {
		return nil, err
	}
	if s.certsURL, err = checkIdentity(c.Identity); err != nil {
		return nil, err
	}
	return s, nil
}

// identity checks the cells' service account and scopes.
func (s *settings) identity(c *Config) error {
	if c.ServiceAccount != "" && !emailRE.MatchString(c.ServiceAccount) {
		return pluginapi.NewInvalidConfig("serviceAccount", "%q is not a service account email such as \"kip-cell@my-project.iam.gserviceaccount.com\"", c.ServiceAccount)
	}
	if len(c.Scopes) > 0 && c.ServiceAccount == "" {
		return pluginapi.NewInvalidConfig("scopes", "needs serviceAccount: scopes are the cells' service account's")
	}
	for i, sc := range c.Scopes {
		k := fmt.Sprintf("scopes[%d]", i)
		if !scopeURL.MatchString(sc) {
			return pluginapi.NewInvalidConfig(k, "%q is not an OAuth scope URL such as %q", sc, defaultScope)
		}
		if slices.Index(c.Scopes, sc) < i {
			return pluginapi.NewInvalidConfig(k, "%q is listed twice", sc)
		}
	}
	if c.ServiceAccount != "" {
		s.scopes = slices.Clone(c.Scopes)
		if len(s.scopes) == 0 {
			s.scopes = []string{defaultScope}
		}
	}
	return nil
}

// imageAndDisk checks the image and the boot disk.
func (s *settings) imageAndDisk(c *Config) error {
	switch im := c.Image; {
	case im == nil || *im == Image{}:
		return pluginapi.NewInvalidConfig("image", "is required: {\"family\": \"debian-12\", \"project\": \"debian-cloud\"} or {\"name\": \"<image>\"}")
	case im.Name != "" && im.Family != "":
		return pluginapi.NewInvalidConfig("image", "set name or family, not both")
	case im.Name == "" && im.Family == "":
		return pluginapi.NewInvalidConfig("image", "name or family is required beside project")
	case im.Name != "" && !nameRE.MatchString(im.Name):
		return pluginapi.NewInvalidConfig("image.name", "%q is not an image name", im.Name)
	case im.Family != "" && !nameRE.MatchString(im.Family):
		return pluginapi.NewInvalidConfig("image.family", "%q is not an image family name", im.Family)
	case im.Project != "" && !projectRE.MatchString(im.Project):
		return pluginapi.NewInvalidConfig("image.project", "%q is not a project ID such as \"debian-cloud\"", im.Project)
	default:
		s.image = *im
		if s.image.Project == "" {
			s.image.Project = c.Project
		}
	}
	s.diskType = defaults.BootDisk.Type
	if d := c.BootDisk; d != nil {
		switch {
		case d.SizeGB != 0 && (d.SizeGB < minDiskSizeGB || d.SizeGB > maxDiskSizeGB):
			return pluginapi.NewInvalidConfig("bootDisk.sizeGb", "%d is not a disk size from %d to %d GB", d.SizeGB, minDiskSizeGB, maxDiskSizeGB)
		case d.Type != "" && !diskRE.MatchString(d.Type):
			return pluginapi.NewInvalidConfig("bootDisk.type", "%q is not a disk type such as \"pd-balanced\" or \"pd-ssd\"", d.Type)
		}
		s.diskSizeGB = d.SizeGB
		if d.Type != "" {
			s.diskType = d.Type
		}
	}
	return nil
}

// access checks how the plugin reaches Compute Engine: the endpoint, its
// CA bundle and the credentials.
func (s *settings) access(c *Config) error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return pluginapi.NewInvalidConfig("endpoint", "%q is not an http or https URL", c.Endpoint)
		}
		s.endpoint = c.Endpoint
	}
	if c.CABundle != "" {
		pem, err := os.ReadFile(c.CABundle)
		if err != nil {
			return pluginapi.NewInvalidConfig("caBundle", "%v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return pluginapi.NewInvalidConfig("caBundle", "%s holds no PEM certificate", c.CABundle)
		}
		s.caBundle = pem
	}
	switch {
	case c.WithoutAuthentication && c.Endpoint == "":
		return pluginapi.NewInvalidConfig("withoutAuthentication", "needs endpoint: Google's own endpoint always wants credentials")
	case c.WithoutAuthentication && c.CredentialsFile != "":
		return pluginapi.NewInvalidConfig("credentialsFile", "set credentialsFile or withoutAuthentication, not both")
	case c.CredentialsFile != "":
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			return pluginapi.NewInvalidConfig("credentialsFile", "%v", err)
		}
	}
	s.credentialsFile, s.noAuth = c.CredentialsFile, c.WithoutAuthentication
	return nil
}

// metadataKeyRE is a metadata key (Compute Engine: letters, digits, - and
// _, at most 128).
var metadataKeyRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// checkMetadata checks the extra metadata items: valid keys, none of the
// plugin's own, and room left for the bootstrap beside the startup script.
func checkMetadata(items map[string]string, startup int) (map[string]string, error) {
	size := startup
	for _, k := range slices.Sorted(maps.Keys(items)) {
		key := "metadata." + k
		switch {
		case !metadataKeyRE.MatchString(k):
			return nil, pluginapi.NewInvalidConfig(key, "a metadata key has 1 to 128 letters, digits, - and _")
		case k == metadataBootstrap || k == metadataTags || k == metadataStartup:
			return nil, pluginapi.NewInvalidConfig(key, "is an item the plugin sets itself (startup-script: set startupScript)")
		}
		size += len(k) + len(items[k])
	}
	if size > maxStartup {
		return nil, pluginapi.NewInvalidConfig("metadata", "the metadata items and the startup script are %d bytes; at most %d leave room for the bootstrap in the instance's %d bytes of metadata", size, maxStartup, maxMetadata)
	}
	return items, nil
}

// checkNames checks a list of resource names: each a Compute Engine name,
// none twice.
func checkNames(key string, names []string, what string) ([]string, error) {
	for i, n := range names {
		k := fmt.Sprintf("%s[%d]", key, i)
		if !nameRE.MatchString(n) {
			return nil, pluginapi.NewInvalidConfig(k, "%q is not %s (lowercase letters, digits and hyphens, at most 63, starting with a letter)", n, what)
		}
		if slices.Index(names, n) < i {
			return nil, pluginapi.NewInvalidConfig(k, "%q is listed twice", n)
		}
	}
	return slices.Clone(names), nil
}

// checkLabels checks the configured labels against Compute Engine's rules
// (https://cloud.google.com/compute/docs/labeling-resources): keys start
// with a lowercase letter, keys and values are lowercase letters, digits,
// _ and -, at most 63 characters, at most 64 labels. The plugin's own keys
// are reserved.
func checkLabels(labels map[string]string) (map[string]string, error) {
	if len(labels) > maxLabels-reservedLabels {
		return nil, pluginapi.NewInvalidConfig("labels", "has %d labels; at most %d leave room for the plugin's own (Compute Engine allows %d)", len(labels), maxLabels-reservedLabels, maxLabels)
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range labels {
			if !yield(k) {
				return
			}
		}
	}) {
		key := "labels." + k
		switch {
		case !labelKey.MatchString(k):
			return nil, pluginapi.NewInvalidConfig(key, "a label key starts with a lowercase letter and has at most 63 lowercase letters, digits, _ and -")
		case slices.Contains(standardLabelKeys, k):
			return nil, pluginapi.NewInvalidConfig(key, "is a label the plugin sets itself")
		case !labelVal.MatchString(labels[k]):
			return nil, pluginapi.NewInvalidConfig(key, "a label value has at most 63 lowercase letters, digits, _ and -")
		}
	}
	return labels, nil
}
