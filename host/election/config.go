package election

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kipcell/kip/host/setting"
)

// Defaults of Config. A standby takes over at most DefaultLeaseDuration +
// 2×2.2×DefaultRetryPeriod after the leader died (13.4 s); a leader whose
// renewals fail gives up at most DefaultRetryPeriod + DefaultRenewDeadline
// after its last renewal (7 s), 2 s before any standby may take the Lease.
const (
	DefaultNamespace     = "kip-system"
	DefaultLeaseDuration = 9 * time.Second
	DefaultRenewDeadline = 6 * time.Second
	DefaultRetryPeriod   = time.Second
	// LeasePrefix names the default Lease: kip-<nodeName>.
	LeasePrefix = "kip-"
)

// jitterFactor is client-go's leaderelection.JitterFactor: a renewDeadline
// must exceed retryPeriod times it.
const jitterFactor = 1.2

// Config is the leaderElection section of kip.yaml. Build it with
// DefaultConfig; ForNode fills in what depends on the node.
type Config struct {
	// Enabled runs kip as a candidate for the Lease: off, kip leads at
	// once, alone, as a single replica always has.
	Enabled bool `koanf:"enabled"`
	// Namespace and LeaseName say where the Lease is; an empty LeaseName
	// is kip-<nodeName>.
	Namespace string `koanf:"namespace"`
	LeaseName string `koanf:"leaseName"`
	// LeaseDuration is how long a standby waits, after it last saw the
	// Lease renewed, before it takes it. RenewDeadline is how long the
	// leader keeps retrying a renewal before it gives up (and kip exits).
	// RetryPeriod is how often both try.
	LeaseDuration time.Duration `koanf:"leaseDuration"`
	RenewDeadline time.Duration `koanf:"renewDeadline"`
	RetryPeriod   time.Duration `koanf:"retryPeriod"`
	// Identity is this process's name in the Lease (holderIdentity);
	// empty is $POD_NAME, else the host name and a random suffix.
	Identity string `koanf:"identity"`
	// Kubeconfig is the identity that holds the Lease: a kubeconfig's
	// path, or "in-cluster" for the pod's ServiceAccount. Empty: the
	// bootstrap identity (bootstrap.kubeconfig, itself a path or
	// in-cluster) when the bootstrap is on, else the pod's ServiceAccount.
	// Never the node's: NodeRestriction forbids it.
	Kubeconfig string `koanf:"kubeconfig"`
}

// DefaultConfig returns the defaults: off, in kip-system.
func DefaultConfig() Config {
	return Config{
		Namespace: DefaultNamespace, LeaseDuration: DefaultLeaseDuration,
		RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod,
	}
}

// ForNode fills in the Lease's name for node nodeName and the identity,
// when they are empty.
func (c Config) ForNode(nodeName string) Config {
	if c.LeaseName == "" {
		c.LeaseName = LeasePrefix + nodeName
	}
	if c.Identity == "" {
		c.Identity = defaultIdentity()
	}
	return c
}

// defaultIdentity is $POD_NAME (unique among a Deployment's pods), else
// the host name and a random suffix, so that two processes on one machine
// differ.
func defaultIdentity() string {
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "kip"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// Validate checks the section as kip.yaml gives it; a bad setting is a
// *setting.Error naming its key. The durations are checked even when the
// election is off, so that turning it on never meets a surprise.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) { errs = append(errs, setting.Errorf(key, format, args...)) }
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		bad("namespace", "%q is not a namespace name: %s", c.Namespace, strings.Join(msgs, "; "))
	}
	if c.LeaseName != "" {
		if msgs := validation.IsDNS1123Subdomain(c.LeaseName); len(msgs) > 0 {
			bad("leaseName", "%q is not a Lease name: %s", c.LeaseName, strings.Join(msgs, "; "))
		}
	}
	if c.Identity != "" && strings.TrimSpace(c.Identity) != c.Identity {
		bad("identity", "%q has leading or trailing spaces", c.Identity)
	}
	switch {
	case c.RetryPeriod <= 0:
		bad("retryPeriod", "%s is not a positive duration", c.RetryPeriod)
	case c.RenewDeadline <= time.Duration(jitterFactor*float64(c.RetryPeriod)):
		bad("renewDeadline", "%s must exceed 1.2 × retryPeriod (%s)", c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		bad("leaseDuration", "%s must exceed renewDeadline (%s): a leader must give up before a standby takes over", c.LeaseDuration, c.RenewDeadline)
	case c.LeaseDuration < time.Second:
		bad("leaseDuration", "%s is less than a second: the Lease counts whole seconds", c.LeaseDuration)
	}
	return errors.Join(errs...)
}
