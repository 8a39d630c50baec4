package keptlogs

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/kipcell/kip/host/setting"
)

// Config is the keptLogs section of kip.yaml, each koanf tag a key. It
// matters only with leaderElection.enabled: a single kip has no standby.
type Config struct {
	// Mirror makes each standby keep a copy of the leader's kept logs
	// (cells.podLogsDir), ready only once it has one, so that a rollout
	// or a change of leader keeps them. On by default.
	Mirror bool `koanf:"mirror"`
	// AdvertiseURL is the leader's admin server as a standby reaches it
	// (http://host:port), written on the Node (Annotation). Empty: the
	// host of admin.listenAddress when it names one, else
	// node.internalIP (in the Deployment, the pod's IP), with its port.
	AdvertiseURL string `koanf:"advertiseURL"`
	// TokenFile holds the bearer token a standby presents to the leader,
	// read again for each request. Empty: the token of the election's
	// identity (leaderElection.kubeconfig; in the Deployment, the pod's
	// ServiceAccount token, which deploy/rbac/kip-kept-logs.yaml lets get
	// /keptlogs).
	TokenFile string `koanf:"tokenFile"`
}

// DefaultConfig is the section before any setting: mirroring on.
func DefaultConfig() Config { return Config{Mirror: true} }

// Validate checks the section, naming each bad key in a *setting.Error.
func (c Config) Validate() error {
	var errs []error
	if c.AdvertiseURL != "" {
		if err := checkURL(c.AdvertiseURL); err != nil {
			errs = append(errs, setting.Errorf("advertiseURL", "%q: %v", c.AdvertiseURL, err))
		}
	}
	if c.TokenFile != "" && strings.TrimSpace(c.TokenFile) != c.TokenFile {
		errs = append(errs, setting.Errorf("tokenFile", "%q has leading or trailing spaces", c.TokenFile))
	}
	return errors.Join(errs...)
}

// checkURL accepts http or https with a host and no path, query or user.
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("want http://host:port or https://host:port (%w)", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want http://host:port or https://host:port")
	case u.Host == "":
		return errors.New("no host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.User != nil, u.Fragment != "":
		return errors.New("want the admin server's base URL alone, without a path, query or user")
	}
	return nil
}

// FileToken is a Token that reads path each time (a projected
// ServiceAccount token, which the kubelet rotates).
func FileToken(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("reading the bearer token: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("reading the bearer token: %s is empty", path)
		}
		return t, nil
	}
}
