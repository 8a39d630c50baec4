package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/cells"
	"github.com/kipcell/kip/host/choices"
	"github.com/kipcell/kip/host/config"
)

// kipConfigCase is a kip as StartKip has it when it writes kip.yaml: its
// options (after StartKip's defaults) and its site.
type kipConfigCase struct {
	name string
	opts KipOptions
	site kipSite
	// plugin is the plugin's configuration; nil: the local plugin's, as
	// startPlugin makes it.
	plugin map[string]any
}

const testSHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func kipConfigCases(dir string) []kipConfigCase {
	site := kipSite{
		Kubeconfig: filepath.Join(dir, "node.kubeconfig"), NodeIP: "127.0.0.1", ClientCAFile: filepath.Join(dir, "ca.crt"),
		Registry: "10.213.40.1:5000", AdminAddress: "127.0.0.1:41234",
	}
	full := site
	full.Kubeconfig = ""
	full.Bootstrap = &bootstrapSection{Kubeconfig: filepath.Join(dir, "bootstrap.kubeconfig"), CertDir: bootstrapCertDir(dir)}
	full.Election = &electionSection{Enabled: true, Identity: "kip-e2e-node-1", Kubeconfig: filepath.Join(dir, "kubeconfig-election")}
	full.NodeIP = "10.0.0.5"
	base := KipOptions{NodeName: "kip", ClusterID: "e2e", BinDir: "/opt/kip/bin", PluginDir: "/opt/kip/bin"}
	everything := base
	everything.NodeName, everything.ClusterID, everything.PluginDir = "kip-swap", "e2e-kip-swap", "/opt/kip/plugins"
	everything.Bootstrap, everything.LeaderElection, everything.Profiling = true, true, true
	everything.PluginSHA256 = testSHA256
	everything.VolumeRefreshInterval, everything.AgentKeepalive, everything.AgentKeepaliveTimeout = time.Minute, 30*time.Second, 15*time.Second
	// As warm_test.go, match_test.go and security_test.go give them.
	everything.WarmPool = "pools:\n  - name: small\n    instanceType: local.nano\n    count: 2\n"
	everything.Choices = "rules:\n  - name: bounded\n    namespaces: [ns-1]\n    instanceTypes: [\"local.*\"]\n    maxPriceRatio: 2\n"
	everything.Cells = "allowedCapabilities: [NET_ADMIN]\nallowHostNetwork: true\n"
	return []kipConfigCase{
		{name: "default", opts: base, site: site},
		{name: "every option", opts: everything, site: full},
		{name: "a cloud plugin", opts: base, site: site, plugin: map[string]any{
			"project": "kip-e2e", "region": "us-central1", "subnetwork": "default",
			"image":    map[string]any{"project": "debian-cloud", "family": "debian-12"},
			"endpoint": "http://127.0.0.1:38001", "withoutAuthentication": true,
			"serviceAccount": GCEServiceAccount,
			"identity":       map[string]any{"certsURL": "http://127.0.0.1:38001/oauth2/v3/certs"},
		}},
	}
}

// kipFor is the Kip StartKip has made for tc when it writes kip.yaml.
func kipFor(t *testing.T, dir string, tc kipConfigCase) *Kip {
	t.Helper()
	k := &Kip{
		NodeName: tc.opts.NodeName, Dir: dir, StateDir: filepath.Join(dir, "local"), PodLogsDir: filepath.Join(dir, "pod-logs"),
		ClusterID: tc.opts.ClusterID, BinDir: tc.opts.BinDir, PluginDir: tc.opts.PluginDir, cellNetwork: "netns",
	}
	if tc.plugin != nil {
		k.Plugin, k.pluginConfig = PluginGCE, tc.plugin
		return k
	}
	agent := []string{filepath.Join(tc.opts.BinDir, "kip-cell"), "--containerd-address", "/run/kip-e2e/containerd.sock",
		"--runc-root", "/run/kip-e2e/runc", "--bootstrap", "{bootstrap}"}
	pc, err := k.startPlugin(t.Context(), PluginLocal, tc.opts.BinDir, agent, "kipe0a1b2c", "10.213.40.0/24")
	if err != nil {
		t.Fatal(err)
	}
	k.pluginConfig = pc
	return k
}

// loadKipYAML writes data as kip.yaml and loads it as kip does, valid.
func loadKipYAML(t *testing.T, data []byte) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kip.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, nil, nil)
	if err != nil {
		t.Fatalf("kip refuses the harness's kip.yaml: %v\n%s", err, data)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("kip finds the harness's kip.yaml invalid: %v\n%s", err, data)
	}
	return c
}

// TestKipConfigLoads: the kip.yaml StartKip writes is one kip loads and
// finds valid, with every setting the harness gives it and kip's
// defaults for the rest, and as the tests that read the file expect it
// (bootstrap_test.go: no node kubeconfig under bootstrap;
// plugin_swap_test.go: the pin's line).
func TestKipConfigLoads(t *testing.T) {
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
			got := loadKipYAML(t, data)
			if diff := cmp.Diff(settings(wantKipConfig(k, tc)), settings(got)); diff != "" {
				t.Errorf("kip.yaml's settings as kip loads them (-want +got):\n%s\n%s", diff, data)
			}
			for _, line := range strings.Split(string(data), "\n") {
				if tc.site.Bootstrap != nil && strings.HasPrefix(line, "kubeconfig:") {
					t.Errorf("kip.yaml gives kip a node kubeconfig beside its bootstrap identity: %q", line)
				}
			}
			if pin := "  sha256: " + tc.opts.PluginSHA256 + "\n"; tc.opts.PluginSHA256 != "" && !strings.Contains(string(data), pin) {
				t.Errorf("kip.yaml has no line %q (plugin_swap_test.go's pin rewrites it):\n%s", pin, data)
			}
		})
	}
}

// wantKipConfig is the configuration kip should load from tc's kip.yaml:
// its defaults, with what the harness sets, written with the
// components' own types.
func wantKipConfig(k *Kip, tc kipConfigCase) *config.Config {
	c := config.Defaults()
	c.ClusterID, c.NodeName, c.Kubeconfig = tc.opts.ClusterID, tc.opts.NodeName, tc.site.Kubeconfig
	if b := tc.site.Bootstrap; b != nil {
		c.Bootstrap.Kubeconfig, c.Bootstrap.CertDir = b.Kubeconfig, b.CertDir
	}
	c.Node.InternalIP, c.Node.ListenAddress, c.Node.ClientCAFile = tc.site.NodeIP, tc.site.NodeIP+":0", tc.site.ClientCAFile
	c.Cells.InsecureRegistries = []string{tc.site.Registry}
	c.Cells.UnavailableTTL, c.Cells.AgentTimeout, c.Cells.BootRetry = UnavailableTTL, AgentTimeout, BootRetry
	c.Cells.AgentKeepalive, c.Cells.AgentKeepaliveTimeout = AgentKeepalive, AgentKeepaliveTimeout
	c.Cells.VolumeRefreshInterval, c.Cells.PodLogsDir = VolumeRefreshInterval, k.PodLogsDir
	c.Log = config.Log{Level: "debug", Format: "text"}
	c.Admin.ListenAddress, c.Admin.Profiling = tc.site.AdminAddress, tc.opts.Profiling
	c.Plugin.Name, c.Plugin.Dir, c.Plugin.SHA256, c.Plugin.Settings = k.Plugin, tc.opts.PluginDir, tc.opts.PluginSHA256, k.pluginConfig
	if e := tc.site.Election; e != nil {
		c.LeaderElection.Enabled, c.LeaderElection.Identity, c.LeaderElection.Kubeconfig = e.Enabled, e.Identity, e.Kubeconfig
	}
	if tc.name == "every option" {
		c.Cells.VolumeRefreshInterval, c.Cells.AgentKeepalive, c.Cells.AgentKeepaliveTimeout = time.Minute, 30*time.Second, 15*time.Second
		c.Cells.WarmPool.Pools = []cells.WarmPool{{Name: "small", InstanceType: "local.nano", Count: 2}}
		c.Cells.Choices.Rules = []choices.Rule{{Name: "bounded", Namespaces: []string{"ns-1"}, InstanceTypes: []string{"local.*"}, MaxPriceRatio: 2}}
		c.Cells.AllowedCapabilities, c.Cells.AllowHostNetwork = []string{"NET_ADMIN"}, true
	}
	return c
}

// settings are c's settings by key, each value as fmt prints it: a
// list of strings as a list of any, a map with its keys in order.
func settings(c *config.Config) map[string]string {
	out := map[string]string{}
	for _, s := range c.Settings() {
		out[s.Key] = fmt.Sprint(s.Value)
	}
	return out
}

// TestKipConfigRefusesWhatKipWould: a KipOptions section that is not
// YAML, or a cells setting the harness sets itself (a duplicate key,
// which kip's YAML parser refuses), fails before kip starts.
func TestKipConfigRefusesWhatKipWould(t *testing.T) {
	dir := t.TempDir()
	tc := kipConfigCases(dir)[0]
	k := kipFor(t, dir, tc)
	for _, bad := range []KipOptions{{WarmPool: "pools: [\n"}, {Choices: "rules: {"}, {Cells: "- a list\n"}} {
		opts := tc.opts
		opts.WarmPool, opts.Choices, opts.Cells = bad.WarmPool, bad.Choices, bad.Cells
		if _, err := newKipConfig(k, opts, tc.site); err == nil {
			t.Errorf("newKipConfig with %+v: no error", bad)
		}
	}
	for _, key := range []string{"agentTimeout", "warmPool", "podLogsDir"} {
		opts := tc.opts
		opts.Cells = key + ": 1s\n"
		if _, err := newKipConfig(k, opts, tc.site); err == nil {
			t.Errorf("cells.%s twice: no error", key)
		}
	}
}
