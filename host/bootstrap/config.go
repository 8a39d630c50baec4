package bootstrap

import (
	"errors"
	"time"

	"github.com/kipcell/kip/host/setting"
)

// Defaults of Config.
const (
	DefaultCertDir             = "/var/lib/kip/pki"
	DefaultCertificateLifetime = 24 * time.Hour
	// MinCertificateLifetime is the API's minimum of a CSR's
	// spec.expirationSeconds.
	MinCertificateLifetime = 10 * time.Minute
	// DefaultApprovalTimeout bounds the wait for the first certificate.
	DefaultApprovalTimeout = 2 * time.Minute
)

// Config is the bootstrap section of kip.yaml, each koanf tag a key.
// Kubeconfig empty turns the bootstrap off: kip uses the top-level
// kubeconfig key as it is.
type Config struct {
	// Kubeconfig is the bootstrap identity: a kubeconfig's path, or
	// "in-cluster" for the pod's ServiceAccount (host/kubeconfig). With
	// the bootstrap on, it is also leaderElection.kubeconfig's default. It must be allowed to
	// create CertificateSigningRequests (ClusterRole
	// system:node-bootstrapper) and to have them approved (ClusterRole
	// system:certificates.k8s.io:certificatesigningrequests:nodeclient).
	Kubeconfig string `koanf:"kubeconfig"`
	// CertDir keeps the node's key and certificate (a Deployment mounts an
	// emptyDir there).
	CertDir string `koanf:"certDir"`
	// CertificateLifetime is the lifetime asked in the CSR
	// (spec.expirationSeconds); the signer may give less
	// (--cluster-signing-duration). At least 10m, as the API enforces.
	CertificateLifetime time.Duration `koanf:"certificateLifetime"`
	// ApprovalTimeout bounds the wait for the first certificate to be
	// approved and issued; zero or less is DefaultApprovalTimeout. Wired,
	// not configured: tests shorten it.
	ApprovalTimeout time.Duration `koanf:"-"`
}

// DefaultConfig is the bootstrap off, with the defaults of its other keys.
func DefaultConfig() Config {
	return Config{CertDir: DefaultCertDir, CertificateLifetime: DefaultCertificateLifetime, ApprovalTimeout: DefaultApprovalTimeout}
}

// Enabled says whether kip gets its node identity by TLS bootstrap.
func (c Config) Enabled() bool { return c.Kubeconfig != "" }

// Validate checks the section when the bootstrap is on; each error names
// its key within the section.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if c.CertDir == "" {
		errs = append(errs, setting.Errorf("certDir", "required with kubeconfig: the directory that keeps the node's key and certificate"))
	}
	if c.CertificateLifetime < MinCertificateLifetime {
		errs = append(errs, setting.Errorf("certificateLifetime", "%s is shorter than %s, the API's minimum of a CSR's expirationSeconds", c.CertificateLifetime, MinCertificateLifetime))
	}
	return errors.Join(errs...)
}
