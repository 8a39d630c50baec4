package framework

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestKipConfigAsTheFormatStringWas: kipConfig's kip.yaml loads as the
// format string StartKip wrote before it did (legacyKipYAML, its code
// as it was), every setting of kip's configuration compared. Kept for
// the commit that replaces the format string; removed after.
func TestKipConfigAsTheFormatStringWas(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range kipConfigCases(dir) {
		t.Run(tc.name, func(t *testing.T) {
			k := kipFor(t, dir, tc)
			kc, err := newKipConfig(k, tc.opts, tc.site)
			if err != nil {
				t.Fatal(err)
			}
			data, err := kc.marshal()
			if err != nil {
				t.Fatal(err)
			}
			legacy, err := legacyKipYAML(k, tc.opts, tc.site)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(settings(loadKipYAML(t, []byte(legacy))), settings(loadKipYAML(t, data))); diff != "" {
				t.Errorf("settings (-format string +kipConfig):\n%s\nformat string:\n%s\nkipConfig:\n%s", diff, legacy, data)
			}
			t.Logf("format string:\n%s\nkipConfig:\n%s", legacy, data)
		})
	}
}

// legacyKipYAML is StartKip's kip.yaml as its format string wrote it,
// with nodeIdentity's, bootstrapIdentity's and electionConfig's sections
// as they wrote them.
func legacyKipYAML(k *Kip, opts KipOptions, site kipSite) (string, error) {
	identity := "kubeconfig: " + site.Kubeconfig
	if b := site.Bootstrap; b != nil {
		identity = fmt.Sprintf("bootstrap:\n  kubeconfig: %s\n  certDir: %s", b.Kubeconfig, b.CertDir)
	}
	pluginJSON, err := json.Marshal(k.pluginConfig)
	if err != nil {
		return "", fmt.Errorf("encoding the plugin's configuration: %w", err)
	}
	nodeIP, adminAddress := site.NodeIP, site.AdminAddress
	config := fmt.Sprintf(`clusterID: %[9]s
nodeName: %[1]s
%[2]s
node:
  internalIP: %[12]s
  listenAddress: %[13]s
  clientCAFile: %[3]s
cells:
  insecureRegistries: [%[4]q]
  unavailableTTL: %[8]s
  agentTimeout: %[14]s
  agentKeepalive: %[16]s
  agentKeepaliveTimeout: %[17]s
  bootRetry: %[18]s
  volumeRefreshInterval: %[10]s
  podLogsDir: %[11]s
log:
  level: debug
  format: text
admin:
  listenAddress: %[15]s
plugin:
  name: %[5]s
  dir: %[6]s
  config: %[7]s
`, opts.NodeName, identity, site.ClientCAFile, site.Registry, k.Plugin, opts.PluginDir, pluginJSON, UnavailableTTL, opts.ClusterID,
		cmp.Or(opts.VolumeRefreshInterval, VolumeRefreshInterval), k.PodLogsDir, nodeIP, net.JoinHostPort(nodeIP, "0"), AgentTimeout, adminAddress,
		cmp.Or(opts.AgentKeepalive, AgentKeepalive), cmp.Or(opts.AgentKeepaliveTimeout, AgentKeepaliveTimeout), BootRetry)
	if opts.PluginSHA256 != "" {
		config += "  sha256: " + opts.PluginSHA256 + "\n"
	}
	config = withCellsSections(config, opts)
	if e := site.Election; e != nil {
		config += fmt.Sprintf("leaderElection:\n  enabled: true\n  identity: %s\n  kubeconfig: %s\n", e.Identity, e.Kubeconfig)
	}
	if opts.Profiling {
		config = strings.Replace(config, "admin:\n", "admin:\n  profiling: true\n", 1)
	}
	return config, nil
}

// withCellsSections adds opts's cells.warmPool and cells.choices sections
// and its other cells settings (KipOptions.WarmPool, Choices, Cells) to
// kip's config.
func withCellsSections(config string, opts KipOptions) string {
	if opts.Cells != "" {
		config = strings.Replace(config, "cells:\n", "cells:\n"+indent(opts.Cells, "  "), 1)
	}
	for _, s := range []struct{ key, yaml string }{{"warmPool", opts.WarmPool}, {"choices", opts.Choices}} {
		if s.yaml != "" {
			config = strings.Replace(config, "cells:\n", "cells:\n  "+s.key+":\n"+indent(s.yaml, "    "), 1)
		}
	}
	return config
}

// indent puts prefix before every line of text, which it ends with a
// newline.
func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
