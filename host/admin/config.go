package admin

import (
	"errors"
	"net"
	"strconv"

	"github.com/kipcell/kip/host/setting"
)

// DefaultListenAddress is where the admin server listens unless kip.yaml
// says otherwise: loopback only (a Deployment sets 0.0.0.0:10262 for its
// probes and its Service).
const DefaultListenAddress = "127.0.0.1:10262"

// Config is the admin section of kip.yaml, each koanf tag a key.
type Config struct {
	// ListenAddress is host:port the server listens on (port 0: any free
	// port).
	ListenAddress string `koanf:"listenAddress"`
	// Off disables the server: no metrics, no probes, no `kip cells`.
	Off bool `koanf:"off"`
	// Profiling serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/: heap, goroutines, CPU. Off by default: a profile
	// shows the process's memory and stacks to whoever reaches the
	// listen address, and a CPU profile costs while it runs.
	Profiling bool `koanf:"profiling"`
	// Authorization is who may read /metrics, /cells and /debug/pprof/:
	// AuthorizationCluster (the default) or AuthorizationNone. /healthz
	// and /readyz are open either way.
	Authorization string `koanf:"authorization"`
}

// The values of admin.authorization.
const (
	// AuthorizationCluster serves the protected paths to a bearer token
	// the cluster authenticates (TokenReview) whose user it authorizes
	// for the path (SubjectAccessReview on the non-resource URL, verb
	// get): 401 without a valid token, 403 without the right.
	AuthorizationCluster = "cluster"
	// AuthorizationNone serves them to anyone who reaches the listen
	// address: safe only on loopback (the default 127.0.0.1), where
	// whoever can connect already runs on the machine.
	AuthorizationNone = "none"
)

// DefaultConfig is the admin section before any setting.
func DefaultConfig() Config {
	return Config{ListenAddress: DefaultListenAddress, Authorization: AuthorizationCluster}
}

// Validate checks the admin section, naming each bad key in a
// *setting.Error.
func (c Config) Validate() error {
	if c.Off {
		return nil
	}
	var errs []error
	_, port, err := net.SplitHostPort(c.ListenAddress)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = errors.New("the port is no number from 0 to 65535")
		}
	}
	if err != nil {
		errs = append(errs, setting.Errorf("listenAddress", "%q is not host:port (%v)", c.ListenAddress, err))
	}
	if c.Authorization != AuthorizationCluster && c.Authorization != AuthorizationNone {
		errs = append(errs, setting.Errorf("authorization", "%q: want %s or %s", c.Authorization, AuthorizationCluster, AuthorizationNone))
	}
	return errors.Join(errs...)
}
