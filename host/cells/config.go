package cells

import (
	"errors"
	"path"
	"regexp"
	"strings"
	"time"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/api/sysctl"
	"github.com/kipcell/kip/host/setting"
)

// DefaultConfig is the Config New completes a zero Config to: every
// interval at its default (Config's field comments), no image, no
// insecure registry.
func DefaultConfig() Config {
	var c Config
	c.defaults()
	// Here and not in defaults, which New applies to a loaded Config: a
	// false from kip.yaml must stay false.
	c.SeccompDefault = true
	return c
}

// Validate checks the settings of the cells section of kip.yaml as loaded
// (New gives a zero interval its default; kip.yaml may not), naming each
// bad key in a *setting.Error.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"unavailableTTL", c.UnavailableTTL}, {"catalogTTL", c.CatalogTTL}, {"rematchInterval", c.RematchInterval},
		{"volumeRefreshInterval", c.VolumeRefreshInterval}, {"agentTimeout", c.AgentTimeout}, {"joinTokenTTL", c.JoinTokenTTL},
		{"bootRetry", c.BootRetry}, {"agentKeepaliveTimeout", c.AgentKeepaliveTimeout}, {"detachTimeout", c.DetachTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, setting.Errorf(d.key, "%s is not a positive duration", d.v))
		}
	}
	if c.AgentKeepalive < cellapi.KeepaliveMinTime {
		errs = append(errs, setting.Errorf("agentKeepalive", "%s is below %s, the least the agents allow: they would close the connection", c.AgentKeepalive, cellapi.KeepaliveMinTime))
	}
	if c.JoinTokenTTL > cellapi.MaxJoinTokenTTL {
		errs = append(errs, setting.Errorf("joinTokenTTL", "%s is longer than %s: a join token is for one boot", c.JoinTokenTTL, cellapi.MaxJoinTokenTTL))
	}
	for _, b := range []struct {
		key string
		v   int
	}{{"podLogsMaxBytes", c.PodLogsMaxBytes}, {"podLogsMaxTotalBytes", c.PodLogsMaxTotalBytes}} {
		if b.v < 0 {
			errs = append(errs, setting.Errorf(b.key, "%d is not a positive number of bytes", b.v))
		}
	}
	if c.PodLogsMaxBytes > 0 && c.PodLogsMaxTotalBytes > 0 && c.PodLogsMaxTotalBytes < c.PodLogsMaxBytes {
		errs = append(errs, setting.Errorf("podLogsMaxTotalBytes", "%d is less than podLogsMaxBytes (%d): not even one container's log would fit", c.PodLogsMaxTotalBytes, c.PodLogsMaxBytes))
	}
	if c.ContainerLogMaxBytes != 0 && c.ContainerLogMaxBytes < logs.MaxLineSize {
		errs = append(errs, setting.Errorf("containerLogMaxBytes", "%d is less than %d bytes, one log record", c.ContainerLogMaxBytes, logs.MaxLineSize))
	}
	if c.ContainerLogMaxFiles != 0 && c.ContainerLogMaxFiles < 2 {
		errs = append(errs, setting.Errorf("containerLogMaxFiles", "%d is less than 2: a log is rotated into a file of its own", c.ContainerLogMaxFiles))
	}
	errs = append(errs, c.WarmPool.validate("warmPool")...)
	errs = append(errs, c.Choices.Validate("choices")...)
	for _, p := range c.AllowedUnsafeSysctls {
		if err := sysctl.ValidatePattern(p); err != nil {
			errs = append(errs, setting.Errorf("allowedUnsafeSysctls", "%v", err))
		}
	}
	for _, p := range c.AllowedHostPaths {
		if !path.IsAbs(p) || path.Clean(p) != p {
			errs = append(errs, setting.Errorf("allowedHostPaths", "%q is not an absolute, clean path", p))
		}
	}
	for _, name := range c.AllowedCapabilities {
		if !capabilityPattern.MatchString(name) || strings.HasPrefix(name, "CAP_") {
			errs = append(errs, setting.Errorf("allowedCapabilities", "%q is not a capability's name (upper case, without CAP_: NET_ADMIN; or ALL)", name))
		}
	}
	return errors.Join(errs...)
}

// capabilityPattern is a capability's name as cells.allowedCapabilities
// takes it.
var capabilityPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
