package cells

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/setting"
)

func TestDefaultConfig(t *testing.T) {
	d := DefaultConfig()
	got := []time.Duration{d.UnavailableTTL, d.CatalogTTL, d.RematchInterval, d.VolumeRefreshInterval, d.RefusedRetry, d.BootPoll, d.BootPollWatched, d.BootTimeout, d.GCInterval, d.AgentTimeout, d.BootRetry, d.AgentKeepalive, d.AgentKeepaliveTimeout}
	want := []time.Duration{3 * time.Minute, 10 * time.Minute, time.Minute, time.Minute, 30 * time.Second, 2 * time.Second, 10 * time.Second, 10 * time.Minute, 30 * time.Second, 10 * time.Minute, 30 * time.Second, 30 * time.Second, 15 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DefaultConfig intervals (-want +got):\n%s", diff)
	}
	if d.Backoff == nil || d.Now == nil || d.BootAttempts != 3 || d.Image != "" || d.InsecureRegistries != nil {
		t.Errorf("DefaultConfig = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantKey []string
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "short intervals", mutate: func(c *Config) {
			c.UnavailableTTL, c.CatalogTTL, c.RematchInterval = time.Nanosecond, time.Second, time.Millisecond
		}},
		{name: "zero unavailableTTL", mutate: func(c *Config) { c.UnavailableTTL = 0 }, wantKey: []string{"unavailableTTL"}},
		{name: "zero catalogTTL", mutate: func(c *Config) { c.CatalogTTL = 0 }, wantKey: []string{"catalogTTL"}},
		{name: "negative rematchInterval", mutate: func(c *Config) { c.RematchInterval = -time.Second }, wantKey: []string{"rematchInterval"}},
		{name: "zero volumeRefreshInterval", mutate: func(c *Config) { c.VolumeRefreshInterval = 0 }, wantKey: []string{"volumeRefreshInterval"}},
		{name: "negative agentTimeout", mutate: func(c *Config) { c.AgentTimeout = -time.Minute }, wantKey: []string{"agentTimeout"}},
		{name: "zero joinTokenTTL", mutate: func(c *Config) { c.JoinTokenTTL = 0 }, wantKey: []string{"joinTokenTTL"}},
		{name: "negative bootRetry", mutate: func(c *Config) { c.BootRetry = -time.Second }, wantKey: []string{"bootRetry"}},
		{name: "the shortest keep-alive the agents allow", mutate: func(c *Config) { c.AgentKeepalive, c.AgentKeepaliveTimeout = 10*time.Second, time.Second }},
		{name: "keep-alive more often than the agents allow", mutate: func(c *Config) { c.AgentKeepalive = 9 * time.Second }, wantKey: []string{"agentKeepalive"}},
		{name: "zero agentKeepaliveTimeout", mutate: func(c *Config) { c.AgentKeepaliveTimeout = 0 }, wantKey: []string{"agentKeepaliveTimeout"}},
		{name: "joinTokenTTL over a day", mutate: func(c *Config) { c.JoinTokenTTL = 25 * time.Hour }, wantKey: []string{"joinTokenTTL"}},
		{name: "unsafe sysctls", mutate: func(c *Config) { c.AllowedUnsafeSysctls = []string{"net.core.*", "kernel.msgmax"} }},
		{name: "sysctl not namespaced", mutate: func(c *Config) { c.AllowedUnsafeSysctls = []string{"net.core.*", "vm.swappiness"} }, wantKey: []string{"allowedUnsafeSysctls"}},
		{name: "bad sysctl pattern", mutate: func(c *Config) { c.AllowedUnsafeSysctls = []string{"Net.*"} }, wantKey: []string{"allowedUnsafeSysctls"}},
		{name: "host paths and capabilities", mutate: func(c *Config) {
			c.AllowedHostPaths, c.AllowedCapabilities = []string{"/var/log", "/"}, []string{"NET_ADMIN", "ALL"}
		}},
		{name: "relative host path", mutate: func(c *Config) { c.AllowedHostPaths = []string{"var/log"} }, wantKey: []string{"allowedHostPaths"}},
		{name: "host path not clean", mutate: func(c *Config) { c.AllowedHostPaths = []string{"/var/log/"} }, wantKey: []string{"allowedHostPaths"}},
		{name: "capability in lower case", mutate: func(c *Config) { c.AllowedCapabilities = []string{"net_admin"} }, wantKey: []string{"allowedCapabilities"}},
		{name: "capability with CAP_", mutate: func(c *Config) { c.AllowedCapabilities = []string{"CAP_NET_ADMIN"} }, wantKey: []string{"allowedCapabilities"}},
		{name: "negative podLogsMaxBytes", mutate: func(c *Config) { c.PodLogsMaxBytes = -1 }, wantKey: []string{"podLogsMaxBytes"}},
		{name: "total below one container's", mutate: func(c *Config) { c.PodLogsMaxTotalBytes = c.PodLogsMaxBytes - 1 }, wantKey: []string{"podLogsMaxTotalBytes"}},
		{name: "container log under one record", mutate: func(c *Config) { c.ContainerLogMaxBytes = 1000 }, wantKey: []string{"containerLogMaxBytes"}},
		{name: "negative container log size", mutate: func(c *Config) { c.ContainerLogMaxBytes = -1 }, wantKey: []string{"containerLogMaxBytes"}},
		{name: "one container log file", mutate: func(c *Config) { c.ContainerLogMaxFiles = 1 }, wantKey: []string{"containerLogMaxFiles"}},
		{name: "all three", mutate: func(c *Config) { c.UnavailableTTL, c.CatalogTTL, c.RematchInterval = 0, 0, 0 }, wantKey: []string{"unavailableTTL", "catalogTTL", "rematchInterval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			got := setting.Keys(c.Validate())
			if diff := cmp.Diff(tt.wantKey, got); diff != "" {
				t.Errorf("Validate keys (-want +got):\n%s", diff)
			}
		})
	}
}
