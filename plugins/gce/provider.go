package gce

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	compute "cloud.google.com/go/compute/apiv1"
	"google.golang.org/api/option"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
	"github.com/kipcell/kip/pluginapi/snapshot"
	"github.com/kipcell/kip/plugins/gce/catalog"
)

// Name is the plugin's name: the binary is kip-plugin-gce.
const Name = "gce"

// Version is the plugin's release version, set when building a release:
//
//	go build -ldflags "-X github.com/kipcell/kip/plugins/gce.Version=0.1.0" ./cmd/kip-plugin-gce
var Version = "0.1.0-dev"

// defaultMachineTypesTTL is how long machineTypes.aggregatedList's answer
// is kept; a field of provider so that tests can shorten it, as are
// kit.Base's timings.
const defaultMachineTypesTTL = time.Hour

// The contract and the optional interfaces of its capabilities, checked
// at compile time: a signature that drifts from pluginapi's fails the
// build instead of silently dropping the feature (the host finds an
// optional call by type assertion).
var (
	_ pluginapi.Provider                 = (*provider)(nil)
	_ pluginapi.EventWatcher             = (*provider)(nil)
	_ pluginapi.RegistryAuthenticator    = (*provider)(nil)
	_ pluginapi.ConsoleOutputReader      = (*provider)(nil)
	_ pluginapi.InstanceIdentityVerifier = (*provider)(nil)
	_ pluginapi.VolumeAttacher           = (*provider)(nil)
)

// provider implements pluginapi.Provider for Compute Engine. Its
// configuration, clients and caches hang off one immutable config, swapped
// whole by Configure. kit.Base holds the log, the clock, the sleep and the
// timings of Describe, List and WatchEvents (kit.DefaultConsistencyWindow
// is how long after instances.insert a new instance may be missing from
// aggregatedList: Describe reports it as launched for that long).
type provider struct {
	*kit.Base
	cfg *kit.Configured[config] // empty until Configure succeeds

	// Seams for tests.
	httpClient      *http.Client // the transport under the limiter; nil: one of its own
	tokenURL        string       // OAuth token endpoint of user credentials; "": Google's
	machineTypesTTL time.Duration
	volumeOpWait    time.Duration
}

// New returns the GCE plugin's provider; it is the plugin's Factory:
//
//	func main() { pluginapi.Serve(gce.New) }
func New(log *slog.Logger) pluginapi.Provider {
	return &provider{Base: kit.NewBase(log), cfg: kit.NewConfigured[config](Name), machineTypesTTL: defaultMachineTypesTTL,
		volumeOpWait: defaultVolumeOpWait}
}

// The plugin's capabilities. Security groups and instance profiles have
// no Compute Engine meaning per pod (firewall rules follow networkTags;
// the service account is the configuration's).
var capabilities = []pluginapi.Capability{
	pluginapi.CapabilitySpot,
	pluginapi.CapabilityGPU,
	pluginapi.CapabilityVolumeSize,
	pluginapi.CapabilityWatchEvents,
	pluginapi.CapabilityInterruptionEvents,
	pluginapi.CapabilityRegistryAuth,
	pluginapi.CapabilityConsoleOutput,
	pluginapi.CapabilityInstanceIdentity,
	pluginapi.CapabilityVolumes,
}

// GetInfo describes the plugin. It needs no configuration and calls no
// Google API.
func (p *provider) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	info, err := kit.Info{Name: Name, Version: Version, Capabilities: capabilities, ConfigSchema: configSchema, Catalog: catalog.Load}.GetInfo()
	if err != nil {
		return nil, err
	}
	info.VolumeDrivers = []string{VolumeDriver}
	return info, nil
}

// config is a validated, resolved configuration with its clients and
// caches.
type config struct {
	*settings
	clusterID    string
	clusterLabel string // labelValue(clusterID)

	clients *clients
	creds   *auth.Credentials // nil with withoutAuthentication
	// subnetwork and network are the resolved self links; image is the
	// resolved image's self link, imageArch its architecture ("" unknown).
	subnetworkURL string
	networkURL    string
	imageURL      string
	imageArch     pluginapi.Arch

	view         *snapshot.View[gceInstance]
	types        *kit.Offerings // ListInstanceTypes' answer
	machineTypes *kit.Sold[*soldTypes]
	deleting     *snapshot.Deletions
	ops          *opWaits
	volumes      *pendingOps // attaches and detaches under way (volumes.go)
	certs        *googleKeys // the identity tokens' keys
}

// clients are the Compute Engine REST clients the plugin calls; every one
// shares the rate-limited HTTP client.
type clients struct {
	instances    instancesAPI
	zoneOps      zoneOperationsAPI
	regions      regionsAPI
	machineTypes machineTypesAPI
	images       imagesAPI
	subnetworks  subnetworksAPI
}

func (c *clients) close() {
	for _, cl := range []interface{ Close() error }{c.instances, c.zoneOps, c.regions, c.machineTypes, c.images, c.subnetworks} {
		_ = cl.Close()
	}
}

// Configure validates the configuration, finds the credentials, builds the
// clients and resolves the zones, the subnetwork and the image with Compute
// Engine (regions.get, subnetworks.get, images.get or
// images.getFromFamily). The host calls it
// after every start of the plugin; a newer image of image.family is picked
// up then.
func (p *provider) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if req.ClusterID == "" {
		return nil, pluginapi.NewInvalidConfig("clusterID", "is required: every instance is labelled with it")
	}
	raw, err := decodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	s, err := validate(raw)
	if err != nil {
		return nil, err
	}
	cfg := &config{settings: s, clusterID: req.ClusterID, clusterLabel: labelValue(req.ClusterID)}
	if !s.noAuth {
		if cfg.creds, err = findCredentials(ctx, s, p.tokenURL); err != nil {
			return nil, err
		}
	}
	if cfg.clients, err = p.newClients(ctx, cfg); err != nil {
		return nil, err
	}
	if err := cfg.resolve(ctx); err != nil {
		cfg.clients.close()
		return nil, err
	}
	cfg.view = snapshot.New(p.fetchCluster(cfg), p.Now, p.ConsistencyWindow)
	cfg.machineTypes = kit.NewSold(p.machineTypesTTL, p.Now, p.Log, p.fetchMachineTypes(cfg))
	cfg.types = &kit.Offerings{Catalog: catalog.Load, Region: s.region, Zones: s.zones, Arch: cfg.imageArch, Image: cfg.imageURL, Log: p.Log}
	cfg.deleting = snapshot.NewDeletions(p.Now)
	cfg.ops = newOpWaits()
	cfg.volumes = newPendingOps()
	cfg.certs = newGoogleKeys(s.certsURL, &http.Client{Transport: p.baseTransport(s)})

	// Calls under way keep the configuration they started with; its
	// clients hold no more than idle connections.
	p.cfg.Store(cfg)
	var warnings []string
	if cfg.imageArch == "" {
		warnings = append(warnings, fmt.Sprintf("image %s states no architecture the plugin knows: the catalog lists types of every architecture", cfg.imageURL))
	}
	for _, w := range warnings {
		p.Log.Warn(w)
	}
	p.Log.Info("configured", "cluster", cfg.clusterID, "project", s.project, "region", s.region, "zones", s.zones,
		"endpoint", s.endpoint, "subnetwork", cfg.subnetworkURL, "image", cfg.imageURL, "arch", cfg.imageArch,
		"read_per_second", s.rate.ReadPerSecond, "mutate_per_second", s.rate.MutatePerSecond, "burst", s.rate.Burst)
	return &pluginapi.ConfigureResponse{Warnings: warnings}, nil
}

// computeScope is what the plugin's own credentials are asked for.
const computeScope = "https://www.googleapis.com/auth/compute"

// credentialTypes are the credential files the plugin takes: the
// operator's own file, of one of the types Google's tools write.
var credentialTypes = []credentials.CredType{
	credentials.ServiceAccount, credentials.AuthorizedUser, credentials.ExternalAccount,
	credentials.ImpersonatedServiceAccount, credentials.ExternalAccountAuthorizedUser,
}

// findCredentials finds the plugin's credentials: the credentials file (of
// a type credentialTypes lists), or Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the metadata server of a
// GCE VM or GKE workload identity). It fetches a token now, so that
// missing credentials say so here rather than as a failure of the first
// call.
func findCredentials(ctx context.Context, s *settings, tokenURL string) (*auth.Credentials, error) {
	const key = "credentialsFile"
	opts := &credentials.DetectOptions{Scopes: []string{computeScope, defaultScope}, TokenURL: tokenURL}
	var creds *auth.Credentials
	var err error
	if s.credentialsFile != "" {
		creds, err = credentialsFromFile(s.credentialsFile, opts)
	} else {
		creds, err = credentials.DetectDefault(opts)
	}
	if err != nil {
		return nil, pluginapi.NewInvalidConfig(key, "finding Google credentials (set credentialsFile, GOOGLE_APPLICATION_CREDENTIALS, or run kip with a service account): %v", err)
	}
	if _, err := creds.Token(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, pluginapi.NewInvalidConfig(key, "getting a token with the Google credentials: %v", err)
	}
	return creds, nil
}

// credentialsFromFile reads a credentials file whose type the plugin
// takes.
func credentialsFromFile(path string, opts *credentials.DetectOptions) (*auth.Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%s is not a JSON credentials file: %w", path, err)
	}
	if !slices.Contains(credentialTypes, credentials.CredType(head.Type)) {
		return nil, fmt.Errorf("%s has credentials of type %q; the plugin takes %v", path, head.Type, credentialTypes)
	}
	return credentials.NewCredentialsFromJSON(credentials.CredType(head.Type), data, opts)
}

// newClients builds the REST clients on one HTTP client: the base
// transport (with the CA bundle), the rate limit, then the credentials'
// bearer token.
func (p *provider) newClients(ctx context.Context, cfg *config) (*clients, error) {
	var rt http.RoundTripper = &transport{limiter: newLimiter(cfg.rate, p.Now, p.Sleep), next: p.baseTransport(cfg.settings)}
	if cfg.creds != nil {
		rt = &bearer{creds: cfg.creds, next: rt}
	}
	opts := []option.ClientOption{option.WithHTTPClient(&http.Client{Transport: rt})}
	if cfg.endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.endpoint))
	}
	c := &clients{}
	var err error
	if c.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating the instances client: %w", err)
	}
	if c.zoneOps, err = compute.NewZoneOperationsRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating the zone operations client: %w", err)
	}
	if c.regions, err = compute.NewRegionsRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating the regions client: %w", err)
	}
	if c.machineTypes, err = compute.NewMachineTypesRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating the machine types client: %w", err)
	}
	if c.images, err = compute.NewImagesRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating the images client: %w", err)
	}
	if c.subnetworks, err = compute.NewSubnetworksRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating the subnetworks client: %w", err)
	}
	return c, nil
}

// baseTransport is the transport of the plugin's requests, with the CA
// bundle: Compute Engine's under the rate limit, and the identity keys'.
func (p *provider) baseTransport(s *settings) http.RoundTripper {
	if s.caBundle != nil {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(s.caBundle)
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		return t
	}
	if p.httpClient != nil && p.httpClient.Transport != nil {
		return p.httpClient.Transport
	}
	return http.DefaultTransport
}

// bearer adds the credentials' OAuth token to every request.
type bearer struct {
	creds *auth.Credentials
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.creds.Token(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, fmt.Errorf("getting a Google token: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok.Value)
	return b.next.RoundTrip(r)
}
