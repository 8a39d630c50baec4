package azure

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
	"github.com/kipcell/kip/pluginapi/snapshot"
	"github.com/kipcell/kip/plugins/azure/catalog"
)

// Name is the plugin's name: the binary is kip-plugin-azure.
const Name = "azure"

// Version is the plugin's release version, set when building a release:
//
//	go build -ldflags "-X github.com/kipcell/kip/plugins/azure.Version=0.1.0" ./cmd/kip-plugin-azure
var Version = "0.1.0-dev"

// The azure plugin's own timings, beside kit.Base's. Each is a field of
// provider so that tests can shorten it.
const (
	// defaultSKUTTL is how long resourceSkus list's answer is kept.
	defaultSKUTTL = time.Hour
	// defaultLROFrequency is how often Launch and a failed launch's delete
	// poll their operation when Azure gives no Retry-After (the SDK's
	// minimum outside tests).
	defaultLROFrequency = time.Second
)

// The contract and the optional interfaces of its capabilities, checked
// at compile time: a signature that drifts from pluginapi's fails the
// build instead of silently dropping the feature (the host finds an
// optional call by type assertion).
var (
	_ pluginapi.Provider     = (*provider)(nil)
	_ pluginapi.EventWatcher = (*provider)(nil)
)

// provider implements pluginapi.Provider for Azure. Its configuration,
// clients and caches hang off one immutable config, swapped whole by
// Configure. kit.Base holds the log, the clock, the sleep and the timings
// of Describe, List and WatchEvents (kit.DefaultConsistencyWindow is how
// long after a launch a new VM may be missing from the VM list: Describe
// reports it as launched for that long).
type provider struct {
	*kit.Base
	cfg *kit.Configured[config] // empty until Configure succeeds

	// Seams for tests.
	httpClient   *http.Client // the transport; nil: one of its own
	retry        policy.RetryOptions
	skuTTL       time.Duration
	lroFrequency time.Duration

	// resume holds the resume tokens of creates under way, by cell: a
	// Launch retried while its VM is being created follows the same
	// operation (launch.go). It outlives a Configure.
	resume resumeTokens

	// vmLocks serialises the data disk updates of each VM (volumes.go).
	vmLocks vmLocks
}

// New returns the Azure plugin's provider; it is the plugin's Factory:
//
//	func main() { pluginapi.Serve(azure.New) }
func New(log *slog.Logger) pluginapi.Provider {
	return &provider{
		Base:         kit.NewBase(log),
		cfg:          kit.NewConfigured[config](Name),
		skuTTL:       defaultSKUTTL,
		lroFrequency: defaultLROFrequency,
		resume:       resumeTokens{tokens: map[string]string{}},
	}
}

// The plugin's capabilities. Security groups and instance profiles have
// no per-pod meaning here (the NSG and the managed identity are the
// configuration's); registry tokens, console output and instance
// identities are not implemented yet (doc.go).
var capabilities = []pluginapi.Capability{
	pluginapi.CapabilitySpot,
	pluginapi.CapabilityGPU,
	pluginapi.CapabilityVolumeSize,
	pluginapi.CapabilityWatchEvents,
	pluginapi.CapabilityInterruptionEvents,
	pluginapi.CapabilityVolumes,
}

// noPrices is what GetInfo adds to the catalog's source while the catalog
// has no price: kip plugins describe shows it.
const noPrices = "; prices: none (every offering's price is unknown, so kip picks the smallest size that fits)"

// GetInfo describes the plugin. It needs no configuration and calls no
// Azure API.
func (p *provider) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	info, err := kit.Info{Name: Name, Version: Version, Capabilities: capabilities, ConfigSchema: configSchema, Catalog: catalog.Load}.GetInfo()
	if err != nil {
		return nil, err
	}
	info.VolumeDrivers = []string{volumeDriver}
	if cat, _ := catalog.Load(); len(cat.Regions) == 0 {
		info.Catalog.Source += noPrices
	}
	return info, nil
}

// config is a validated configuration with its clients and caches.
type config struct {
	*settings
	clusterID string

	clients  *clients
	view     *snapshot.View[azVM]
	types    *kit.Offerings // ListInstanceTypes' answer
	skus     *kit.Sold[*soldSizes]
	deleting *snapshot.Deletions
}

// clients are the Azure Resource Manager clients the plugin calls; every
// one shares the pipeline's options (rate limit, retries, transport).
type clients struct {
	vms     virtualMachinesAPI
	disks   disksAPI
	skus    resourceSKUsAPI
	nics    networkInterfacesAPI
	subnets subnetsAPI // in the subnet's subscription
	// nsgs is in the network security group's subscription; nil without
	// networkSecurityGroupID.
	nsgs networkSecurityGroupsAPI
}

// Configure validates the configuration, finds the credentials, builds the
// clients and checks the subnet with Azure (subnets get). The host calls
// it after every start of the plugin.
func (p *provider) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if req.ClusterID == "" {
		return nil, pluginapi.NewInvalidConfig("clusterID", "is required: every VM is tagged with it")
	}
	raw, err := decodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	s, err := validate(raw)
	if err != nil {
		return nil, err
	}
	if s.sshPublicKey == "" {
		if s.sshPublicKey, err = throwawayKey(); err != nil {
			return nil, fmt.Errorf("generating the cells' throw-away SSH key: %w", err)
		}
	}
	cfg := &config{settings: s, clusterID: req.ClusterID}
	cred, err := credential(s)
	if err != nil {
		return nil, err
	}
	if cfg.clients, err = p.newClients(cfg, cred); err != nil {
		return nil, err
	}
	if err := cfg.resolve(ctx); err != nil {
		return nil, err
	}
	cfg.view = snapshot.New(p.fetchCluster(cfg), p.Now, p.ConsistencyWindow)
	cfg.skus = kit.NewSold(p.skuTTL, p.Now, p.Log, p.fetchSKUs(cfg))
	cfg.types = &kit.Offerings{Catalog: catalog.Load, Region: s.location, Zones: cfg.zoneNames(), Log: p.Log}
	cfg.deleting = snapshot.NewDeletions(p.Now)

	// Calls under way keep the configuration they started with.
	p.cfg.Store(cfg)
	p.Log.Info("configured", "cluster", cfg.clusterID, "subscription", s.subscription, "resource_group", s.resourceGroup,
		"location", s.location, "zones", s.zones, "endpoint", s.endpoint, "subnet", s.subnetID,
		"read_per_second", s.rate.ReadPerSecond, "mutate_per_second", s.rate.MutatePerSecond, "burst", s.rate.Burst)
	return &pluginapi.ConfigureResponse{}, nil
}

// armAudience is Azure Resource Manager's token audience; a private
// cloud's endpoint takes the public cloud's.
const armAudience = "https://management.core.windows.net/"

// cloudConfig is the SDK's cloud: Azure's public cloud, or the configured
// endpoint for Resource Manager.
func (s *settings) cloudConfig() cloud.Configuration {
	if s.endpoint == "" {
		return cloud.AzurePublic
	}
	return cloud.Configuration{
		ActiveDirectoryAuthorityHost: cloud.AzurePublic.ActiveDirectoryAuthorityHost,
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: s.endpoint, Audience: armAudience},
		},
	}
}

// credential returns the plugin's credential: a static token without
// authentication (a simulator), the service principal's secret or
// certificate, or azidentity's default chain (environment, workload
// identity, managed identity, Azure CLI). Tokens are fetched at the first
// call, Configure's subnet check, whose failure names credentials.
func credential(s *settings) (azcore.TokenCredential, error) {
	opts := azcore.ClientOptions{Cloud: s.cloudConfig()}
	switch c := s.creds; {
	case s.noAuth:
		return staticToken{}, nil
	case c.ClientSecretFile != "":
		secret, err := os.ReadFile(c.ClientSecretFile)
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("credentials.clientSecretFile", "%v", err)
		}
		cred, err := azidentity.NewClientSecretCredential(c.TenantID, c.ClientID, strings.TrimSpace(string(secret)), &azidentity.ClientSecretCredentialOptions{ClientOptions: opts})
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("credentials.clientSecretFile", "%v", err)
		}
		return cred, nil
	case c.ClientCertificateFile != "":
		data, err := os.ReadFile(c.ClientCertificateFile)
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("credentials.clientCertificateFile", "%v", err)
		}
		certs, key, err := azidentity.ParseCertificates(data, nil)
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("credentials.clientCertificateFile", "%s: %v", c.ClientCertificateFile, err)
		}
		cred, err := azidentity.NewClientCertificateCredential(c.TenantID, c.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{ClientOptions: opts})
		if err != nil {
			return nil, pluginapi.NewInvalidConfig("credentials.clientCertificateFile", "%v", err)
		}
		return cred, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: opts})
	if err != nil {
		return nil, pluginapi.NewInvalidConfig("credentials", "finding Azure credentials (set credentials, AZURE_CLIENT_ID and the like, or run kip with a managed identity): %v", err)
	}
	return cred, nil
}

// staticToken is the credential of withoutAuthentication: a fixed bearer
// token that a simulator accepts.
type staticToken struct{}

// staticTokenValue is staticToken's bearer token: no secret, a marker.
const staticTokenValue = "kip-without-authentication" //nolint:gosec // a marker a simulator accepts, not a credential

func (staticToken) GetToken(ctx context.Context, _ policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: staticTokenValue, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// newClients builds the clients on one set of options: the transport
// (with the CA bundle), the rate limit as a per-retry policy, the retry
// options, and no automatic resource provider registration (the
// subscription must have Microsoft.Compute and Microsoft.Network
// registered; registering needs a permission the role does not grant).
func (p *provider) newClients(cfg *config, cred azcore.TokenCredential) (*clients, error) {
	var transport policy.Transporter
	switch {
	case cfg.caBundle != nil:
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(cfg.caBundle)
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		transport = &http.Client{Transport: t}
	case p.httpClient != nil:
		transport = p.httpClient
	}
	opts := &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud:            cfg.cloudConfig(),
			Transport:        transport,
			Retry:            p.retry,
			PerRetryPolicies: []policy.Policy{newLimiter(cfg.rate, p.Now, p.Sleep)},
			Telemetry:        policy.TelemetryOptions{ApplicationID: "kip-plugin-azure/" + Version},
		},
		DisableRPRegistration: true,
	}
	c := &clients{}
	var err error
	if c.vms, err = armcompute.NewVirtualMachinesClient(cfg.subscription, cred, opts); err != nil {
		return nil, fmt.Errorf("creating the virtual machines client: %w", err)
	}
	if c.disks, err = armcompute.NewDisksClient(cfg.subscription, cred, opts); err != nil {
		return nil, fmt.Errorf("creating the disks client: %w", err)
	}
	if c.skus, err = armcompute.NewResourceSKUsClient(cfg.subscription, cred, opts); err != nil {
		return nil, fmt.Errorf("creating the resource SKUs client: %w", err)
	}
	if c.nics, err = armnetwork.NewInterfacesClient(cfg.subscription, cred, opts); err != nil {
		return nil, fmt.Errorf("creating the network interfaces client: %w", err)
	}
	ref, _ := parseSubnetID(cfg.subnetID)
	if c.subnets, err = armnetwork.NewSubnetsClient(ref.subscription, cred, opts); err != nil {
		return nil, fmt.Errorf("creating the subnets client: %w", err)
	}
	if cfg.nsgID != "" {
		nsg := strings.Split(strings.TrimPrefix(cfg.nsgID, "/"), "/") // validate checked it
		if c.nsgs, err = armnetwork.NewSecurityGroupsClient(nsg[1], cred, opts); err != nil {
			return nil, fmt.Errorf("creating the network security groups client: %w", err)
		}
	}
	return c, nil
}

// throwawayKey is the cells' SSH key when the configuration names none:
// Azure's Linux VMs need a key or a password, and the plugin gives them
// the public half of an RSA key it generates once per process and never
// writes anywhere, so nobody can log in with SSH.
var throwawayKey = sync.OnceValues(func() (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 3072)
	if err != nil {
		return "", err
	}
	return "ssh-rsa " + base64.StdEncoding.EncodeToString(sshRSAPublicKey(&key.PublicKey)) + " kip-throwaway", nil
})

// sshRSAPublicKey is an RSA public key in SSH's wire format (RFC 4253
// §6.6): the string "ssh-rsa", then e and n as mpints.
func sshRSAPublicKey(k *rsa.PublicKey) []byte {
	var out []byte
	str := func(b []byte) {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	mpint := func(n *big.Int) {
		b := n.Bytes()
		if len(b) > 0 && b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		str(b)
	}
	str([]byte("ssh-rsa"))
	mpint(big.NewInt(int64(k.E)))
	mpint(k.N)
	return out
}
