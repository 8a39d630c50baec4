package bootstrap

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/kubeconfig"
	"github.com/kipcell/kip/host/setting"
)

func TestValidate(t *testing.T) {
	on := func(f func(*Config)) Config {
		c := DefaultConfig()
		c.Kubeconfig = kubeconfig.InCluster
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{name: "off", cfg: DefaultConfig()},
		{name: "off ignores the rest", cfg: Config{CertificateLifetime: time.Second}},
		{name: "defaults", cfg: on(func(*Config) {})},
		{name: "minimum lifetime", cfg: on(func(c *Config) { c.CertificateLifetime = MinCertificateLifetime })},
		{name: "short lifetime", cfg: on(func(c *Config) { c.CertificateLifetime = 9 * time.Minute }), want: []string{"certificateLifetime"}},
		{name: "no certDir", cfg: on(func(c *Config) { c.CertDir = "" }), want: []string{"certDir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, setting.Keys(tt.cfg.Validate())); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}
