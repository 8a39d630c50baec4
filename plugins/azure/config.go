package azure

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
// documentation and tooling. subscriptionID, resourceGroup, location,
// subnetID and image are required; unknown keys are refused so that a
// typo does not silently fall back to a default. Configure remains the
// authority: validate checks the values, and Configure what only Azure
// knows (that the subnet exists).
type Config struct {
	SubscriptionID         string            `json:"subscriptionID" required:"true" doc:"The Azure subscription of the cells (a GUID)."`
	ResourceGroup          string            `json:"resourceGroup" required:"true" doc:"The resource group of every cell's VM, NIC and OS disk (it must exist; one per cluster keeps List small). The contract's instance ID is the VM name within it."`
	Location               string            `json:"location" required:"true" pattern:"^[a-z][a-z0-9]{1,39}$" doc:"The cells' location, such as eastus."`
	Zones                  []string          `json:"zones,omitempty" pattern:"^[1-9]$" minItems:"1" uniqueItems:"true" doc:"The location's availability zones the cells may use; omitted, [\"1\", \"2\", \"3\"]. The contract's zones are <location>-<zone>, such as eastus-1."`
	SubnetID               string            `json:"subnetID" required:"true" doc:"Resource ID of the cells' subnet (checked with subnets get at Configure)."`
	NetworkSecurityGroupID string            `json:"networkSecurityGroupID,omitempty" doc:"Resource ID of a network security group put on every cell's NIC; omitted, the subnet's rules alone apply."`
	Image                  *Image            `json:"image" required:"true" doc:"The cells' image: a marketplace image (publisher, offer, sku, version; version omitted: latest) or an image or gallery image version's resource ID (id)."`
	Identity               string            `json:"identity,omitempty" doc:"Resource ID of a user-assigned managed identity the cells run with; omitted, none."`
	Tags                   map[string]string `json:"tags,omitempty" maxLength:"256" maxProperties:"46" doc:"Tags of every cell's VM, beside kip-cluster, kip-node, kip-cell and kip-pod-uid (names without < > % & \\ ? /)."`
	Credentials            *Credentials      `json:"credentials,omitempty" doc:"The plugin's service principal: tenant and client IDs and a file holding its secret or its certificate (PEM or PKCS#12 with the key). Omitted, azidentity's default chain (environment, workload identity, managed identity, Azure CLI)."`
	Endpoint               string            `json:"endpoint,omitempty" doc:"Azure Resource Manager's endpoint of a private cloud or a simulator (https URL); omitted, Azure's public cloud."`
	CABundle               string            `json:"caBundle,omitempty" doc:"Path of a PEM file of extra CA certificates to trust for the endpoint."`
	WithoutAuthentication  bool              `json:"withoutAuthentication,omitempty" doc:"Send a static bearer token instead of credentials (with endpoint only: a simulator)."`
	RateLimit              ratelimit.Config  `json:"rateLimit,omitempty" doc:"Client-side limit of the plugin's Azure Resource Manager calls: token buckets for reads (GET, operation polls included) and for calls that change something (PUT, DELETE)."`
	CustomData             string            `json:"customData,omitempty" doc:"Path of the cells' cloud-init customData (deploy/azure/cloud-init.yaml); omitted, the image runs kip-cell by itself."`
	AdminUsername          string            `json:"adminUsername,omitempty" doc:"The cells' Linux administrator."`
	SSHPublicKey           string            `json:"sshPublicKey,omitempty" doc:"The administrator's SSH public key (one authorized_keys line); omitted, a throw-away key the plugin generates and forgets, so nobody can log in."`
}

// Image is the cells' image: a marketplace image (publisher, offer, sku,
// version, such as Canonical, ubuntu-24_04-lts, server, latest) or the
// resource ID of an image or gallery image version (id).
type Image struct {
	Publisher string `json:"publisher,omitempty"`
	Offer     string `json:"offer,omitempty"`
	SKU       string `json:"sku,omitempty"`
	Version   string `json:"version,omitempty"`
	ID        string `json:"id,omitempty"`
}

// ConfigAlternatives says that an image is a marketplace image or a
// resource ID (pluginapi.ConfigAlternatives).
func (Image) ConfigAlternatives() (oneOf, anyOf [][]string) {
	return [][]string{{"publisher", "offer", "sku"}, {"id"}}, nil
}

// Credentials are a service principal's: its tenant and client IDs and a
// file holding its secret or its certificate (PEM or PKCS#12, with the
// private key).
type Credentials struct {
	TenantID              string `json:"tenantID,omitempty" required:"true"`
	ClientID              string `json:"clientID,omitempty" required:"true"`
	ClientSecretFile      string `json:"clientSecretFile,omitempty"`
	ClientCertificateFile string `json:"clientCertificateFile,omitempty"`
}

// ConfigAlternatives says that the service principal's secret or its
// certificate is set (pluginapi.ConfigAlternatives).
func (Credentials) ConfigAlternatives() (oneOf, anyOf [][]string) {
	return [][]string{{"clientSecretFile"}, {"clientCertificateFile"}}, nil
}

// defaults are the defaults of Config's keys that have one: validate
// applies them and configSchema shows them.
//
// Azure Resource Manager throttles per subscription and principal (12,000
// reads and 1,200 writes an hour per region with the token bucket of
// 2024: 250 reads and 25 writes a second refilled, bursts of 250), and
// Microsoft.Compute adds its own per-minute limits on VM calls
// (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling,
// https://learn.microsoft.com/troubleshoot/azure/virtual-machines/troubleshooting-throttling-errors).
// The plugin takes 10 reads and 5 writes a second with a burst of 20.
var defaults = Config{
	Image:         &Image{Version: "latest"},
	RateLimit:     ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20},
	AdminUsername: "kipadmin",
}

// configSchema is Config's JSON Schema, reported by GetInfo.
var configSchema = pluginapi.MustConfigSchema("kip-plugin-azure configuration", &defaults)

// Limits of Azure and defaults of the plugin.
const (
	// maxTags is Azure's limit of tags on a resource.
	maxTags = 50
	// maxTagName and maxTagValue are Azure's tag name and value lengths.
	maxTagName  = 512
	maxTagValue = 256
	// maxCustomData is Azure's limit on customData: 64 KiB, base64.
	maxCustomData = 64 << 10
	// maxUserData is Azure's limit on userData: 64 KiB, base64.
	maxUserData = 64 << 10
)

var (
	guidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// rgRE is a resource group name: 1 to 90 letters, digits, _ - . ( ),
	// not ending with a period.
	rgRE       = regexp.MustCompile(`^[-\w.()]{0,89}[-\w()]$`)
	locationRE = pluginapi.ConfigPattern(Config{}, "location")
	zoneRE     = pluginapi.ConfigPattern(Config{}, "zones")
	// adminRE is a Linux administrator name Azure takes.
	adminRE = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,63}$`)
	// sshKeyRE is an authorized_keys line of a key type Azure takes.
	sshKeyRE = regexp.MustCompile(`^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521) [A-Za-z0-9+/]+={0,2}( .*)?$`)
	// imagePartRE is a marketplace image's publisher, offer, sku or version.
	imagePartRE = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]{0,127}$`)
)

// reservedAdmins are names Azure refuses as a Linux VM's administrator.
var reservedAdmins = []string{"administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1", "123",
	"a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest", "john", "owner", "root", "server", "sql",
	"support", "support_388945a0", "sys", "test2", "test3", "user4", "user5"}

// decodeConfig parses raw strictly (pluginapi.DecodeConfig): it refuses
// unknown keys and values of the wrong type, naming the key. It does not
// contact Azure or read files.
func decodeConfig(raw []byte) (*Config, error) {
	c := &Config{}
	if err := pluginapi.DecodeConfig(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// settings is a Config checked without contacting Azure: values parsed,
// files read, defaults applied. Configure checks the subnet (resolve.go).
type settings struct {
	subscription  string
	resourceGroup string
	location      string
	zones         []string // sorted
	subnetID      string
	nsgID         string // "" for none
	image         Image
	identity      string
	tags          map[string]string
	creds         Credentials // zero: the default chain
	endpoint      string      // "" for the public cloud
	caBundle      []byte      // PEM; nil for the system's
	noAuth        bool
	rate          ratelimit.Config
	customData    []byte // nil without customData
	adminUsername string
	sshPublicKey  string // "" until Configure generates one
}

// validate checks c and applies defaults. It reads the files c names (the
// CA bundle, the custom data, the credentials' files) but contacts
// nothing.
func validate(c *Config) (*settings, error) {
	s := &settings{subscription: c.SubscriptionID, resourceGroup: c.ResourceGroup, location: c.Location}
	switch {
	case c.SubscriptionID == "":
		return nil, pluginapi.NewInvalidConfig("subscriptionID", "is required: the GUID of the cells' subscription")
	case !guidRE.MatchString(c.SubscriptionID):
		return nil, pluginapi.NewInvalidConfig("subscriptionID", "%q is not a subscription ID (a GUID such as 00000000-0000-0000-0000-000000000000)", c.SubscriptionID)
	case c.ResourceGroup == "":
		return nil, pluginapi.NewInvalidConfig("resourceGroup", "is required: the resource group of the cells' VMs")
	case !rgRE.MatchString(c.ResourceGroup):
		return nil, pluginapi.NewInvalidConfig("resourceGroup", "%q is not a resource group name (1 to 90 letters, digits, _, -, ., ( and ), not ending with .)", c.ResourceGroup)
	case c.Location == "":
		return nil, pluginapi.NewInvalidConfig("location", "is required, such as \"eastus\"")
	case !locationRE.MatchString(c.Location):
		return nil, pluginapi.NewInvalidConfig("location", "%q is not an Azure location name such as \"eastus\" (lowercase, no spaces)", c.Location)
	}
	for i, z := range c.Zones {
		k := fmt.Sprintf("zones[%d]", i)
		if !zoneRE.MatchString(z) {
			return nil, pluginapi.NewInvalidConfig(k, "%q is not an availability zone number such as \"1\"", z)
		}
		if slices.Index(c.Zones, z) < i {
			return nil, pluginapi.NewInvalidConfig(k, "%q is listed twice", z)
		}
	}
	s.zones = slices.Sorted(slices.Values(c.Zones))
	if len(s.zones) == 0 {
		s.zones = []string{"1", "2", "3"}
	}
	if err := s.network(c); err != nil {
		return nil, err
	}
	if err := s.checkImage(c.Image); err != nil {
		return nil, err
	}
	if c.Identity != "" {
		if _, ok := parseResourceID(c.Identity, "Microsoft.ManagedIdentity/userAssignedIdentities"); !ok {
			return nil, pluginapi.NewInvalidConfig("identity", "%q is not a user-assigned managed identity's resource ID (/subscriptions/…/resourceGroups/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>)", c.Identity)
		}
		s.identity = c.Identity
	}
	var err error
	if s.tags, err = checkTags(c.Tags); err != nil {
		return nil, err
	}
	if err := s.access(c); err != nil {
		return nil, err
	}
	if err := s.boot(c); err != nil {
		return nil, err
	}
	if s.rate, err = c.RateLimit.Check("rateLimit", defaults.RateLimit); err != nil {
		return nil, err
	}
	return s, nil
}

// network checks the subnet and the network security group IDs.
func (s *settings) network(c *Config) error {
	switch {
	case c.SubnetID == "":
		return pluginapi.NewInvalidConfig("subnetID", "is required: the resource ID of the cells' subnet (/subscriptions/…/resourceGroups/…/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>)")
	case !isSubnetID(c.SubnetID):
		return pluginapi.NewInvalidConfig("subnetID", "%q is not a subnet's resource ID (/subscriptions/…/resourceGroups/…/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>)", c.SubnetID)
	}
	s.subnetID = c.SubnetID
	if c.NetworkSecurityGroupID != "" {
		if _, ok := parseResourceID(c.NetworkSecurityGroupID, "Microsoft.Network/networkSecurityGroups"); !ok {
			return pluginapi.NewInvalidConfig("networkSecurityGroupID", "%q is not a network security group's resource ID (/subscriptions/…/resourceGroups/…/providers/Microsoft.Network/networkSecurityGroups/<name>)", c.NetworkSecurityGroupID)
		}
		s.nsgID = c.NetworkSecurityGroupID
	}
	return nil
}

// checkImage checks the image: a marketplace image or a resource ID.
func (s *settings) checkImage(im *Image) error {
	switch {
	case im == nil || *im == Image{}:
		return pluginapi.NewInvalidConfig("image", "is required: {\"publisher\": \"Canonical\", \"offer\": \"ubuntu-24_04-lts\", \"sku\": \"server\", \"version\": \"latest\"} or {\"id\": \"<image resource ID>\"}")
	case im.ID != "" && (im.Publisher != "" || im.Offer != "" || im.SKU != "" || im.Version != ""):
		return pluginapi.NewInvalidConfig("image", "set id, or publisher, offer, sku and version, not both")
	case im.ID != "":
		if !strings.HasPrefix(strings.ToLower(im.ID), "/subscriptions/") || !strings.Contains(strings.ToLower(im.ID), "/providers/microsoft.compute/") {
			return pluginapi.NewInvalidConfig("image.id", "%q is not the resource ID of an image or gallery image version (/subscriptions/…/providers/Microsoft.Compute/…)", im.ID)
		}
		s.image = *im
		return nil
	}
	out := *im
	if out.Version == "" {
		out.Version = defaults.Image.Version
	}
	for _, f := range []struct{ key, v string }{{"image.publisher", out.Publisher}, {"image.offer", out.Offer}, {"image.sku", out.SKU}, {"image.version", out.Version}} {
		if f.v == "" {
			return pluginapi.NewInvalidConfig(f.key, "is required for a marketplace image (or set image.id)")
		}
		if !imagePartRE.MatchString(f.v) {
			return pluginapi.NewInvalidConfig(f.key, "%q is not a marketplace image name", f.v)
		}
	}
	s.image = out
	return nil
}

// access checks how the plugin reaches Azure: the endpoint, its CA bundle
// and the credentials.
func (s *settings) access(c *Config) error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return pluginapi.NewInvalidConfig("endpoint", "%q is not an https URL (Azure's SDK sends credentials over TLS only)", c.Endpoint)
		}
		s.endpoint = strings.TrimSuffix(c.Endpoint, "/")
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
	cr := c.Credentials
	switch {
	case c.WithoutAuthentication && c.Endpoint == "":
		return pluginapi.NewInvalidConfig("withoutAuthentication", "needs endpoint: Azure's own endpoint always wants credentials")
	case c.WithoutAuthentication && cr != nil:
		return pluginapi.NewInvalidConfig("credentials", "set credentials or withoutAuthentication, not both")
	case cr == nil:
	case cr.TenantID == "" || !guidRE.MatchString(cr.TenantID):
		return pluginapi.NewInvalidConfig("credentials.tenantID", "%q is not a tenant ID (a GUID): a service principal's credentials need it", cr.TenantID)
	case cr.ClientID == "" || !guidRE.MatchString(cr.ClientID):
		return pluginapi.NewInvalidConfig("credentials.clientID", "%q is not a client (application) ID (a GUID)", cr.ClientID)
	case (cr.ClientSecretFile == "") == (cr.ClientCertificateFile == ""):
		return pluginapi.NewInvalidConfig("credentials", "set one of clientSecretFile and clientCertificateFile")
	case cr.ClientSecretFile != "":
		if _, err := os.Stat(cr.ClientSecretFile); err != nil {
			return pluginapi.NewInvalidConfig("credentials.clientSecretFile", "%v", err)
		}
	default:
		if _, err := os.Stat(cr.ClientCertificateFile); err != nil {
			return pluginapi.NewInvalidConfig("credentials.clientCertificateFile", "%v", err)
		}
	}
	if cr != nil {
		s.creds = *cr
	}
	s.noAuth = c.WithoutAuthentication
	return nil
}

// boot checks the custom data and the administrator.
func (s *settings) boot(c *Config) error {
	if c.CustomData != "" {
		data, err := os.ReadFile(c.CustomData)
		if err != nil {
			return pluginapi.NewInvalidConfig("customData", "%v", err)
		}
		if len(data) == 0 {
			return pluginapi.NewInvalidConfig("customData", "%s is empty", c.CustomData)
		}
		if n := base64Len(len(data)); n > maxCustomData {
			return pluginapi.NewInvalidConfig("customData", "%s is %d bytes in base64; Azure takes at most %d", c.CustomData, n, maxCustomData)
		}
		s.customData = data
	}
	s.adminUsername = defaults.AdminUsername
	if c.AdminUsername != "" {
		if !adminRE.MatchString(c.AdminUsername) || slices.Contains(reservedAdmins, c.AdminUsername) {
			return pluginapi.NewInvalidConfig("adminUsername", "%q is not a Linux user name Azure takes (lowercase letters, digits, _, . and -, at most 64, not a reserved name such as admin or root)", c.AdminUsername)
		}
		s.adminUsername = c.AdminUsername
	}
	if c.SSHPublicKey != "" {
		key := strings.TrimSpace(c.SSHPublicKey)
		if !sshKeyRE.MatchString(key) || strings.Contains(key, "\n") {
			return pluginapi.NewInvalidConfig("sshPublicKey", "is not one SSH public key line (ssh-rsa AAAA… or ssh-ed25519 AAAA…)")
		}
		s.sshPublicKey = key
	}
	return nil
}

// base64Len is the length of n bytes in padded base64.
func base64Len(n int) int { return (n + 2) / 3 * 4 }

// checkTags checks the configured tags against Azure's rules
// (https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources):
// names of at most 512 characters without < > % & \ ? /, values of at
// most 256, at most 50 tags a resource. The plugin's own names are
// reserved, and four of the 50 are theirs.
func checkTags(tags map[string]string) (map[string]string, error) {
	if len(tags) > maxTags-len(tagOfStandard) {
		return nil, pluginapi.NewInvalidConfig("tags", "has %d tags; at most %d leave room for the plugin's own (Azure allows %d)", len(tags), maxTags-len(tagOfStandard), maxTags)
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		key := "tags." + k
		switch {
		case k == "" || len(azureTagName(k)) > maxTagName || strings.ContainsAny(k, forbiddenTagChars):
			return nil, pluginapi.NewInvalidConfig(key, "an Azure tag name has 1 to %d characters, none of %s", maxTagName, forbiddenTagChars)
		case isReservedTag(k):
			return nil, pluginapi.NewInvalidConfig(key, "is a tag the plugin sets itself")
		case len(tags[k]) > maxTagValue:
			return nil, pluginapi.NewInvalidConfig(key, "an Azure tag value has at most %d characters", maxTagValue)
		}
	}
	return tags, nil
}
