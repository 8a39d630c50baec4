package aws

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
	"github.com/kipcell/kip/pluginapi/snapshot"
	"github.com/kipcell/kip/plugins/aws/catalog"
)

// Name is the plugin's name: the binary is kip-plugin-aws.
const Name = "aws"

// Version is the plugin's release version, set when building a release:
//
//	go build -ldflags "-X github.com/kipcell/kip/plugins/aws.Version=0.1.0" ./cmd/kip-plugin-aws
var Version = "0.1.0-dev"

// The aws plugin's own timings, beside kit.Base's. Each is a field of
// provider so that tests can shorten it.
const (
	// defaultStatusEvery is how often WatchEvents looks for scheduled
	// maintenance (DescribeInstanceStatus).
	defaultStatusEvery = time.Minute
	// defaultOfferingsTTL is how long DescribeInstanceTypeOfferings'
	// answer is kept.
	defaultOfferingsTTL = time.Hour
	// maxRetryBackoff bounds the SDK's backoff between attempts of a call;
	// after its 3 attempts the host retries with its own backoff.
	maxRetryBackoff = 2 * time.Second
)

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
)

// provider implements pluginapi.Provider for EC2. Its configuration,
// clients and caches hang off one immutable config, swapped whole by
// Configure. kit.Base holds the log, the clock, the sleep and the
// timings of Describe, List and WatchEvents (kit.DefaultConsistencyWindow
// is how long after RunInstances EC2 may not show the new instance yet:
// Describe reports it as launched, and Terminate retries
// InvalidInstanceID.NotFound, for that long).
type provider struct {
	*kit.Base
	cfg *kit.Configured[config] // empty until Configure succeeds

	// Seams for tests.
	apiOptions  []func(*middleware.Stack) error // added to every SDK client
	maxAttempts int                             // of the SDK's retryer
	// connectionRetriesOnly makes the SDK retry only a keep-alive
	// connection the server closed under a request (aws-sdk-go-v2#2737),
	// as in production, and nothing else (tests: an injected EC2 error,
	// or a limiter's wait error, is seen once).
	connectionRetriesOnly bool
	statusEvery           time.Duration
	offeringsTTL          time.Duration
}

// New returns the AWS plugin's provider; it is the plugin's Factory:
//
//	func main() { pluginapi.Serve(aws.New) }
func New(log *slog.Logger) pluginapi.Provider {
	return &provider{
		Base:         kit.NewBase(log),
		cfg:          kit.NewConfigured[config](Name),
		maxAttempts:  retry.DefaultMaxAttempts,
		statusEvery:  defaultStatusEvery,
		offeringsTTL: defaultOfferingsTTL,
	}
}

// The plugin's capabilities: everything the contract offers.
var capabilities = []pluginapi.Capability{
	pluginapi.CapabilitySpot,
	pluginapi.CapabilityGPU,
	pluginapi.CapabilitySecurityGroups,
	pluginapi.CapabilityInstanceProfiles,
	pluginapi.CapabilityVolumeSize,
	pluginapi.CapabilityWatchEvents,
	pluginapi.CapabilityInterruptionEvents,
	pluginapi.CapabilityRegistryAuth,
	pluginapi.CapabilityConsoleOutput,
	pluginapi.CapabilityInstanceIdentity,
	pluginapi.CapabilityVolumes,
}

// GetInfo describes the plugin. It needs no configuration and calls no AWS
// API.
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
	clusterID string

	ec2     ec2API
	limiter *limiter
	// subnets maps each zone the cells may use to its subnet; zones are
	// the same zones, sorted.
	subnets map[string]string
	zones   []string
	image   resolvedImage

	view      *snapshot.View[pluginapi.Instance]
	types     *kit.Offerings // ListInstanceTypes' answer
	offerings *kit.Sold[offered]
	registry  *registry

	// The volume calls' memory (volumes.go): the attachments answered that
	// EC2 may not show yet, device names EC2 called in use, and a lock per
	// instance being attached to.
	recent      recentAttachments
	badDevices  sync.Map
	attachLocks keyedLocks
}

// Configure validates the configuration, builds the SDK clients and
// resolves the subnets and the image with EC2 (DescribeSubnets,
// DescribeImages). The host calls it after every start of the plugin; a new
// AMI matching image.name is picked up then.
func (p *provider) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if req.ClusterID == "" {
		return nil, pluginapi.NewInvalidConfig("clusterID", "is required: every instance is tagged with it")
	}
	if len(req.ClusterID) > maxTagValue {
		return nil, pluginapi.NewInvalidConfig("clusterID", "is %d characters; a tag value holds at most %d", len(req.ClusterID), maxTagValue)
	}
	raw, err := decodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	s, err := validate(raw)
	if err != nil {
		return nil, err
	}
	cfg := &config{settings: s, clusterID: req.ClusterID}
	awsCfg, err := p.awsConfig(ctx, s)
	if err != nil {
		return nil, err
	}
	cfg.limiter = newLimiter(s.rate, p.Now, p.Sleep)
	cfg.ec2 = ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if s.endpointURL != "" {
			o.BaseEndpoint = aws.String(s.endpointURL)
		}
		o.APIOptions = append(o.APIOptions, cfg.limiter.middleware)
		o.APIOptions = append(o.APIOptions, p.apiOptions...)
	})
	cfg.registry = newRegistry(func(region string) ecrAPI {
		return ecr.NewFromConfig(awsCfg, func(o *ecr.Options) {
			o.Region = region
			if s.ecrEndpointURL != "" {
				o.BaseEndpoint = aws.String(s.ecrEndpointURL)
			}
			o.APIOptions = append(o.APIOptions, p.apiOptions...)
		})
	}, p.Now)

	var warnings []string
	if cfg.subnets, warnings, err = resolveSubnets(ctx, cfg.ec2, s); err != nil {
		return nil, err
	}
	cfg.zones = sortedKeys(cfg.subnets)
	if cfg.image, err = resolveImage(ctx, cfg.ec2, s.image); err != nil {
		return nil, err
	}
	if cfg.image.arch == "" {
		warnings = append(warnings, fmt.Sprintf("image %s has architecture %q, which the plugin does not know: the catalog lists types of every architecture", cfg.image.id, cfg.image.rawArch))
	}
	cfg.view = snapshot.New(p.fetchCluster(cfg), p.Now, p.ConsistencyWindow)
	cfg.offerings = kit.NewSold(p.offeringsTTL, p.Now, p.Log, p.fetchOfferings(cfg.ec2, cfg.zones))
	cfg.types = &kit.Offerings{Catalog: catalog.Load, Region: s.region, Zones: cfg.zones, Arch: cfg.image.arch, Image: cfg.image.id, Log: p.Log}

	p.cfg.Store(cfg)
	for _, w := range warnings {
		p.Log.Warn(w)
	}
	if len(s.identity.keys) == 0 {
		p.Log.Info("cells' instance identities are not checked: identity.certificates is not set")
	}
	p.Log.Info("configured", "cluster", cfg.clusterID, "region", s.region, "endpoint", s.endpointURL,
		"zones", cfg.zones, "image", cfg.image.id, "arch", cfg.image.arch,
		"read_per_second", s.rate.ReadPerSecond, "mutate_per_second", s.rate.MutatePerSecond, "burst", s.rate.Burst)
	return &pluginapi.ConfigureResponse{Warnings: warnings}, nil
}

// awsConfig loads the SDK configuration: the region, the credentials
// (static, or the default chain), the CA bundle and a retryer of at most
// maxAttempts attempts without the SDK's own retry quota (the plugin's
// limiter is the rate limit).
func (p *provider) awsConfig(ctx context.Context, s *settings) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(s.region),
		// The SDK's own log lines go to the plugin's structured log, not
		// raw to stderr.
		awsconfig.WithLogger(logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			level := slog.LevelDebug
			if c == logging.Warn {
				level = slog.LevelWarn
			}
			p.Log.Log(context.Background(), level, "aws sdk", "message", fmt.Sprintf(format, v...))
		})),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				// EC2 answers a capacity or quota refusal with HTTP 500,
				// which the standard retryer would retry three times:
				// the host moves to its next candidate instead.
				o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(noRetryForRefusals)}, o.Retryables...)
				if p.connectionRetriesOnly {
					o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(closedConnection)}
				}
				o.MaxAttempts = p.maxAttempts
				o.MaxBackoff = maxRetryBackoff
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if c := s.credentials; c != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}
	if s.caBundle != nil {
		opts = append(opts, awsconfig.WithCustomCABundle(bytes.NewReader(s.caBundle)))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return aws.Config{}, ctx.Err()
		}
		return aws.Config{}, pluginapi.NewInvalidConfig("credentials", "loading the AWS SDK configuration (environment, shared config files): %v", err)
	}
	// Find the credentials now, so that a missing role says so here rather
	// than as a failure of the first call.
	if cfg.Credentials == nil {
		return aws.Config{}, pluginapi.NewInvalidConfig("credentials", "the AWS SDK found no credential source")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		if ctx.Err() != nil {
			return aws.Config{}, ctx.Err()
		}
		return aws.Config{}, pluginapi.NewInvalidConfig("credentials",
			"no AWS credentials: set credentials, or give kip a role (EKS pod identity or IRSA, an instance profile) or the AWS_ environment variables: %v", err)
	}
	return cfg, nil
}

// closedConnection says retry for the errors of a connection closed under
// a request ("use of closed network connection", "connection reset", as
// the SDK's RetryableConnectionError matches them), and nothing for any
// other error.
func closedConnection(err error) aws.Ternary {
	if msg := err.Error(); strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "connection reset") {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}
