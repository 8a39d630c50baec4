package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/cells"
	"github.com/kipcell/kip/host/choices"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/pluginapi"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kip.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// settingsOf is c's keys and values, for comparing what Load read.
func settingsOf(c *Config) map[string]any {
	out := map[string]any{}
	for _, s := range c.Settings() {
		out[s.Key] = s.Value
	}
	return out
}

// Every key of kip.yaml, in field order: a component's new setting shows
// up here, and a key that moves must be added to Moved.
func TestSettingsKeys(t *testing.T) {
	want := []string{
		"clusterID", "nodeName", "kubeconfig",
		"bootstrap.kubeconfig", "bootstrap.certDir", "bootstrap.certificateLifetime",
		"node.taint", "node.setRoleLabel", "node.capacity.cpu", "node.capacity.memory", "node.capacity.pods", "node.capacity.gpus", "node.capacity.ephemeralStorage", "node.arch", "node.zone",
		"node.internalIP", "node.listenAddress", "node.tlsCertFile", "node.tlsKeyFile", "node.clientCAFile",
		"node.leaseDurationSeconds", "node.statusUpdateInterval", "node.workers", "node.clusterDNS", "node.clusterDomain",
		"cells.unavailableTTL", "cells.catalogTTL", "cells.detachTimeout", "cells.rematchInterval", "cells.volumeRefreshInterval",
		"cells.warmPool.maxPremium", "cells.warmPool.pools", "cells.image", "cells.insecureRegistries", "cells.podLogsDir", "cells.podLogsMaxBytes", "cells.podLogsMaxTotalBytes", "cells.containerLogMaxBytes", "cells.containerLogMaxFiles", "cells.allowPrivileged", "cells.allowedUnsafeSysctls",
		"cells.allowHostNetwork", "cells.allowedHostPaths", "cells.allowedCapabilities", "cells.allowProbeHosts", "cells.seccompDefault",
		"cells.choices.rules",
		"cells.agentTimeout", "cells.bootRetry", "cells.agentKeepalive", "cells.agentKeepaliveTimeout",
		"cells.joinTokenTTL",
		"pki.namespace", "pki.secretName",
		"match.agentReserveCPU", "match.agentReserveMemory", "match.ignoreLimits", "match.burstablePolicy",
		"match.surplusCreditPricePerVCPUHour", "match.unknownPrice", "match.defaultCapacityType", "match.defaultArch",
		"match.spotFallback", "match.gpuResources", "match.ignoredResources", "match.maxCandidates",
		"plugin.name", "plugin.dir", "plugin.path", "plugin.sha256", "plugin.config",
		"admin.listenAddress", "admin.off", "admin.profiling", "admin.authorization",
		"leaderElection.enabled", "leaderElection.namespace", "leaderElection.leaseName", "leaderElection.leaseDuration",
		"leaderElection.renewDeadline", "leaderElection.retryPeriod", "leaderElection.identity", "leaderElection.kubeconfig",
		"keptLogs.mirror", "keptLogs.advertiseURL", "keptLogs.tokenFile",
		"log.level", "log.format",
	}
	var got []string
	for _, s := range Defaults().Settings() {
		got = append(got, s.Key)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	for from, to := range Moved {
		if slices.Contains(got, from) || !slices.Contains(got, to) {
			t.Errorf("Moved %s → %s: the old key must be gone and the new one a key", from, to)
		}
	}
}

// With nothing set, Load reads each component's DefaultConfig, and the
// defaults are valid but for the cluster ID, which has none.
func TestLoadDefaults(t *testing.T) {
	got, err := Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(settingsOf(Defaults()), settingsOf(got)); diff != "" {
		t.Errorf("Load with nothing set (-Defaults +got):\n%s", diff)
	}
	want := map[string]any{
		"nodeName": "kip", "node.taint": "virtual-kubelet.io/provider=kip:NoSchedule", "node.capacity.cpu": "1000",
		"node.capacity.memory": "4Ti", "node.capacity.pods": "1000", "node.arch": "amd64", "node.listenAddress": ":10250",
		"node.leaseDurationSeconds": 40, "node.statusUpdateInterval": time.Minute, "node.workers": 10,
		"cells.unavailableTTL": 3 * time.Minute, "cells.catalogTTL": 10 * time.Minute, "cells.rematchInterval": time.Minute,
		"cells.volumeRefreshInterval": time.Minute, "cells.detachTimeout": 2 * time.Minute, "cells.agentTimeout": 10 * time.Minute, "pki.namespace": "kip-system", "pki.secretName": "kip-ca",
		"match.agentReserveCPU": match.MilliCPU(100), "match.agentReserveMemory": match.Bytes(256 << 20),
		"match.burstablePolicy": match.BurstableBaseline, "match.surplusCreditPricePerVCPUHour": 0.05,
		"match.unknownPrice": match.UnknownPriceLast, "match.defaultCapacityType": pluginapi.CapacityOnDemand, "match.maxCandidates": 20,
		"plugin.name": "local", "log.level": "info", "log.format": "json", "admin.authorization": "cluster",
		"leaderElection.enabled": false, "leaderElection.namespace": "kip-system", "leaderElection.leaseDuration": 9 * time.Second,
		"leaderElection.renewDeadline": 6 * time.Second, "leaderElection.retryPeriod": time.Second,
		"keptLogs.mirror": true,
	}
	s := settingsOf(got)
	for key, v := range want {
		if !reflect.DeepEqual(s[key], v) {
			t.Errorf("default %s = %#v, want %#v", key, s[key], v)
		}
	}
	got.ClusterID = "c1"
	if err := got.Validate(); err != nil {
		t.Errorf("Validate the defaults: %v", err)
	}
}

func TestLoadLayers(t *testing.T) {
	path := writeFile(t, `
clusterID: from-file
nodeName: kip-file
cells:
  catalogTTL: 20m
plugin:
  name: local
  config:
    agentCommand: ["/bin/sleep", "300"]
    network: loopback
log:
  level: debug
`)
	env := []string{"KIP_NODE_NAME=kip-env", "KIP_CELLS_CATALOG_TTL=30m", "KIP_PLUGIN_LOG_LEVEL=trace", "HOME=/root", "KIP_UNRELATED=1"}
	flags := map[string]any{"clusterID": "from-flag"}
	got, err := Load(path, env, flags)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := settingsOf(Defaults())
	want["clusterID"] = "from-flag"
	want["nodeName"] = "kip-env"
	want["cells.catalogTTL"] = 30 * time.Minute
	want["plugin.config"] = map[string]any{"agentCommand": []any{"/bin/sleep", "300"}, "network": "loopback"}
	want["log.level"] = "debug"
	if diff := cmp.Diff(want, settingsOf(got)); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     []string
		flags   map[string]any
		wantKey string
		wantMsg string
	}{
		{name: "unknown top-level key", file: "clusterId: x\n", wantKey: "clusterId", wantMsg: "did you mean clusterID"},
		{name: "unknown nested key", file: "plugin:\n  binary: local\n", wantKey: "plugin.binary", wantMsg: "unknown key"},
		{name: "unknown node key", file: "node:\n  taints: a:NoSchedule\n", wantKey: "node.taints", wantMsg: "unknown key"},
		{name: "a key set by the daemon", file: "cells:\n  bootTimeout: 1m\n", wantKey: "cells.bootTimeout", wantMsg: "unknown key"},
		{name: "unknown flag key", flags: map[string]any{"bogus": 1}, wantKey: "bogus", wantMsg: "unknown key"},
		{name: "plugin.config a string", file: "plugin:\n  config: abc\n", wantKey: "plugin.config", wantMsg: "must be a mapping of the plugin's settings (key: value lines), not a string"},
		{name: "plugin.config a list", file: "plugin:\n  config: [a, b]\n", wantKey: "plugin.config", wantMsg: "must be a mapping of the plugin's settings (key: value lines), not a list"},
		{name: "plugin.config a list of mappings", file: "plugin:\n  config:\n    - region: x\n", wantKey: "plugin.config", wantMsg: "not a list"},
		{name: "plugin.config a number", file: "plugin:\n  config: 3\n", wantKey: "plugin.config", wantMsg: "not a single value"},
		{name: "plugin.config from a flag", flags: map[string]any{"plugin.config": "abc"}, wantKey: "plugin.config", wantMsg: "not a string"},
		{name: "plugin.config from KIP_PLUGIN_CONFIG", env: []string{"KIP_PLUGIN_CONFIG=zone: a"}, wantKey: "plugin.config", wantMsg: "set its keys one by one, with KIP_PLUGIN_CONFIG_<KEY>"},
		{name: "not a number", file: "node:\n  workers: many\n", wantKey: "node.workers", wantMsg: `config node.workers: "many": cannot parse`},
		{name: "not a number, from the environment", env: []string{"KIP_NODE_WORKERS=many"}, wantKey: "node.workers", wantMsg: "cannot parse"},
		{name: "not a duration", file: "cells:\n  catalogTTL: soon\n", wantKey: "cells.catalogTTL", wantMsg: `"soon": time: invalid duration`},
		{name: "not a quantity", file: "match:\n  agentReserveMemory: lots\n", wantKey: "match.agentReserveMemory", wantMsg: `"lots" is not a memory quantity >= 0 such as 256Mi`},
		{name: "a bad plugin.config variable", env: []string{"KIP_PLUGIN_CONFIG_ZONE=a: b"}, wantKey: "plugin.config.zone", wantMsg: "is not a YAML value"},
		{name: "a plugin.config variable without a key", env: []string{"KIP_PLUGIN_CONFIG_=x"}, wantKey: "plugin.config", wantMsg: "set its keys one by one"},
		{name: "a plugin.config variable without a key name", env: []string{"KIP_PLUGIN_CONFIG_A____B=x"}, wantKey: "plugin.config", wantMsg: "names no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			_, err := Load(path, tt.env, tt.flags)
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load error = %v, want a *config.Error", err)
			}
			if cerr.Key != tt.wantKey || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Load error = %q (key %q), want key %q and text %q", err, cerr.Key, tt.wantKey, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Load error = %q, want one line", err)
			}
		})
	}
}

// A key that moved is refused wherever it is set, with the new key (and,
// in the environment, the new variable).
func TestMovedKeysRefused(t *testing.T) {
	for from, to := range Moved {
		section, leaf, _ := strings.Cut(from, ".")
		file := writeFile(t, section+":\n  "+leaf+": 5m\n")
		tests := []struct {
			name    string
			path    string
			env     []string
			flags   map[string]any
			wantErr string
		}{
			{name: "file", path: file, wantErr: "config " + from + " (" + file + "): moved to " + to + ": rename it"},
			{name: "environment", env: []string{EnvName(from) + "=5m"}, wantErr: "config " + from + " (" + EnvName(from) + "): moved to " + to + ": set " + EnvName(to) + " instead"},
			{name: "flags", flags: map[string]any{from: "5m"}, wantErr: "config " + from + " (flags): moved to " + to + ": rename it"},
		}
		for _, tt := range tests {
			t.Run(from+" in "+tt.name, func(t *testing.T) {
				_, err := Load(tt.path, tt.env, tt.flags)
				var cerr *Error
				if !errors.As(err, &cerr) || cerr.Key != from || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("Load = %v\nwant an error starting %q", err, tt.wantErr)
				}
			})
		}
		// The new key works in all three.
		newFile := writeFile(t, strings.Replace(section+":\n  "+leaf+": 5m\n", section, strings.Split(to, ".")[0], 1))
		for _, c := range []struct {
			path  string
			env   []string
			flags map[string]any
		}{{path: newFile}, {env: []string{EnvName(to) + "=5m"}}, {flags: map[string]any{to: "5m"}}} {
			got, err := Load(c.path, c.env, c.flags)
			if err != nil || settingsOf(got)[to] != 5*time.Minute {
				t.Errorf("Load setting %s (%+v) = %v, %v; want 5m", to, c, settingsOf(got)[to], err)
			}
		}
	}
}

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"clusterID":                           "KIP_CLUSTER_ID",
		"nodeName":                            "KIP_NODE_NAME",
		"node.internalIP":                     "KIP_NODE_INTERNAL_IP",
		"node.tlsCertFile":                    "KIP_NODE_TLS_CERT_FILE",
		"node.leaseDurationSeconds":           "KIP_NODE_LEASE_DURATION_SECONDS",
		"node.capacity.cpu":                   "KIP_NODE_CAPACITY_CPU",
		"node.clusterDNS":                     "KIP_NODE_CLUSTER_DNS",
		"node.zone":                           "KIP_NODE_ZONE",
		"cells.catalogTTL":                    "KIP_CELLS_CATALOG_TTL",
		"match.agentReserveCPU":               "KIP_MATCH_AGENT_RESERVE_CPU",
		"match.surplusCreditPricePerVCPUHour": "KIP_MATCH_SURPLUS_CREDIT_PRICE_PER_VCPU_HOUR",
		"plugin.sha256":                       "KIP_PLUGIN_SHA256",
		"plugin.config":                       "KIP_PLUGIN_CONFIG",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", key, got, want)
		}
	}
}

// Every key but the free-form plugin.config (TestPluginConfigEnv) is
// reached by its variable, EnvName(key), and by no other.
func TestEnvReachesEveryKey(t *testing.T) {
	defaults := settingsOf(Defaults())
	for _, s := range Defaults().Settings() {
		if s.Key == "plugin.config" || s.Key == "cells.warmPool.pools" || s.Key == "cells.choices.rules" {
			continue // TestWarmPoolSection, TestChoicesSection
		}
		value := map[reflect.Kind]string{
			reflect.String: "set-by-env", reflect.Bool: "true", reflect.Int: "7", reflect.Int64: "7s",
			reflect.Float64: "0.25", reflect.Slice: "a:5000, b:5000",
		}[reflect.TypeOf(s.Value).Kind()]
		if b, ok := s.Value.(bool); ok && b {
			value = "false" // a key that is true by default
		} else if _, ok := s.Value.(match.MilliCPU); ok {
			value = "7"
		} else if _, ok := s.Value.(match.Bytes); ok {
			value = "7Gi"
		}
		t.Run(s.Key, func(t *testing.T) {
			got, err := Load("", []string{EnvName(s.Key) + "=" + value}, nil)
			if err != nil {
				t.Fatalf("Load with %s=%s: %v", EnvName(s.Key), value, err)
			}
			for key, v := range settingsOf(got) {
				changed := !reflect.DeepEqual(v, defaults[key])
				if changed != (key == s.Key) {
					t.Errorf("%s=%s: %s = %#v (default %#v)", EnvName(s.Key), value, key, v, defaults[key])
				}
			}
		})
	}
}

func TestEnvValues(t *testing.T) {
	tests := []struct {
		env   string
		check func(c *Config) bool
	}{
		{"KIP_NODE_INTERNALIP=10.0.0.1", func(c *Config) bool { return c.Node.InternalIP == "10.0.0.1" }},
		{"KIP_node_internal_ip=10.0.0.2", func(c *Config) bool { return c.Node.InternalIP == "10.0.0.2" }},
		{"KIP_NODE_TAINT=", func(c *Config) bool { return c.Node.Taint == "" }},
		{"KIP_CELLS_INSECURE_REGISTRIES=reg:5000", func(c *Config) bool { return cmp.Equal(c.Cells.InsecureRegistries, []string{"reg:5000"}) }},
		{"KIP_CELLS_INSECURE_REGISTRIES=a:1,b:2", func(c *Config) bool { return cmp.Equal(c.Cells.InsecureRegistries, []string{"a:1", "b:2"}) }},
		{"KIP_CELLS_INSECURE_REGISTRIES=", func(c *Config) bool { return len(c.Cells.InsecureRegistries) == 0 }},
		{"KIP_MATCH_AGENT_RESERVE_CPU=250m", func(c *Config) bool { return c.Match.AgentReserveMilliCPU == 250 }},
		{"KIP_MATCH_AGENT_RESERVE_MEMORY=1Gi", func(c *Config) bool { return c.Match.AgentReserveMemoryBytes == 1<<30 }},
		{"KIP_MATCH_SPOT_FALLBACK=true", func(c *Config) bool { return c.Match.SpotFallback }},
	}
	for _, tt := range tests {
		got, err := Load("", []string{tt.env}, nil)
		if err != nil || !tt.check(got) {
			t.Errorf("Load with %s: %v; config %+v", tt.env, err, got)
		}
	}
}

func TestPluginConfigEnv(t *testing.T) {
	file := writeFile(t, `
plugin:
  config:
    network: loopback
    vpcID: vpc-file
    agentCommand: [a, b]
    rateLimit:
      burst: 5
`)
	tests := []struct {
		name  string
		env   []string
		flags map[string]any
		want  map[string]any
	}{
		{
			name: "the file alone",
			want: map[string]any{"network": "loopback", "vpcID": "vpc-file", "agentCommand": []any{"a", "b"}, "rateLimit": map[string]any{"burst": 5}},
		},
		{
			name: "a key the file lacks",
			env:  []string{"KIP_PLUGIN_CONFIG_ZONE=us-east-1a"},
			want: map[string]any{"network": "loopback", "vpcID": "vpc-file", "agentCommand": []any{"a", "b"}, "rateLimit": map[string]any{"burst": 5}, "zone": "us-east-1a"},
		},
		{
			name: "keys the file sets, found without case and underscores",
			env:  []string{"KIP_PLUGIN_CONFIG_VPC_ID=vpc-env", "KIP_PLUGIN_CONFIG_RATE_LIMIT_BURST=9", "KIP_PLUGIN_CONFIG_AGENT_COMMAND=[x, y, z]", "KIP_PLUGIN_CONFIG_NETWORK=netns"},
			want: map[string]any{"network": "netns", "vpcID": "vpc-env", "agentCommand": []any{"x", "y", "z"}, "rateLimit": map[string]any{"burst": 9}},
		},
		{
			name: "new keys: camelCase words, __ between levels, lower case as written",
			env: []string{
				"KIP_PLUGIN_CONFIG_STATE_DIR=/var/lib/kip", "KIP_PLUGIN_CONFIG_RATE_LIMIT__DESCRIBE_PER_SECOND=2.5",
				"KIP_PLUGIN_CONFIG_endpointURL=http://127.0.0.1:4566", "KIP_PLUGIN_CONFIG_CREDENTIALS__accessKeyID=AKIA",
			},
			want: map[string]any{
				"network": "loopback", "vpcID": "vpc-file", "agentCommand": []any{"a", "b"}, "stateDir": "/var/lib/kip",
				"rateLimit": map[string]any{"burst": 5, "describePerSecond": 2.5}, "endpointURL": "http://127.0.0.1:4566",
				"credentials": map[string]any{"accessKeyID": "AKIA"},
			},
		},
		{
			name: "values read as YAML",
			env:  []string{"KIP_PLUGIN_CONFIG_OWNER=\"0123\"", "KIP_PLUGIN_CONFIG_ENABLED=true", "KIP_PLUGIN_CONFIG_TAGS={team: cells}", "KIP_PLUGIN_CONFIG_NETWORK="},
			want: map[string]any{
				"network": "", "vpcID": "vpc-file", "agentCommand": []any{"a", "b"}, "rateLimit": map[string]any{"burst": 5},
				"owner": "0123", "enabled": true, "tags": map[string]any{"team": "cells"},
			},
		},
		{
			name:  "flags override the environment",
			env:   []string{"KIP_PLUGIN_CONFIG_NETWORK=netns"},
			flags: map[string]any{"plugin.config": map[string]any{"network": "flag"}},
			want:  map[string]any{"network": "flag", "vpcID": "vpc-file", "agentCommand": []any{"a", "b"}, "rateLimit": map[string]any{"burst": 5}},
		},
		{
			name: "other KIP_PLUGIN_ variables are the plugin's",
			env:  []string{"KIP_PLUGIN_LOG_LEVEL=debug", "KIP_PLUGIN_MAGIC_COOKIE=x", "KIP_PLUGIN_CONFIGURED=1"},
			want: map[string]any{"network": "loopback", "vpcID": "vpc-file", "agentCommand": []any{"a", "b"}, "rateLimit": map[string]any{"burst": 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(file, tt.env, tt.flags)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Plugin.Settings); diff != "" {
				t.Errorf("plugin.config (-want +got):\n%s", diff)
			}
		})
	}
	// Without a file, KIP_PLUGIN_CONFIG_ZONE reaches the plugin.
	got, err := Load("", []string{"KIP_PLUGIN_CONFIG_ZONE=z1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if js, err := got.Plugin.SettingsJSON(); err != nil || string(js) != `{"zone":"z1"}` {
		t.Errorf("the plugin gets %s, %v; want {\"zone\":\"z1\"}", js, err)
	}
	// Two keys of the file spelt alike: the variable is refused.
	ambiguous := writeFile(t, "plugin:\n  config:\n    rateLimit:\n      burst: 1\n    rateLimitBurst: 2\n")
	if _, err := Load(ambiguous, []string{"KIP_PLUGIN_CONFIG_RATE_LIMIT_BURST=3"}, nil); err == nil ||
		!strings.Contains(err.Error(), "names plugin.config.rateLimit.burst and plugin.config.rateLimitBurst") {
		t.Errorf("an ambiguous variable: %v", err)
	}
}

func TestValidate(t *testing.T) {
	valid := func() *Config {
		c, err := Load("", []string{"KIP_CLUSTER_ID=prod-1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "missing cluster ID", mutate: func(c *Config) { c.ClusterID = "" }, wantErr: "config clusterID: required"},
		{name: "cluster ID not a label", mutate: func(c *Config) { c.ClusterID = "Prod_1" }, wantErr: `config clusterID: "Prod_1" is not a DNS label`},
		{name: "bad node name", mutate: func(c *Config) { c.NodeName = "-kip" }, wantErr: `config nodeName: "-kip" is not a DNS label`},
		{name: "bad log level", mutate: func(c *Config) { c.Log.Level = "loud" }, wantErr: `config log.level: "loud" is not one of debug`},
		{name: "bad log format", mutate: func(c *Config) { c.Log.Format = "xml" }, wantErr: `config log.format: "xml" is not one of json, text`},
		// Each section's rules are its component's (their own table
		// tests); the key is named as kip.yaml spells it.
		{name: "node", mutate: func(c *Config) { c.Node.Taint = "a=b:Never" }, wantErr: `config node.taint: taint effect "Never" is not NoSchedule, PreferNoSchedule or NoExecute`},
		{name: "node capacity", mutate: func(c *Config) { c.Node.Capacity.Pods = "" }, wantErr: `config node.capacity.pods: "" is not a quantity such as 64, 500m or 256Gi`},
		{name: "node zone", mutate: func(c *Config) { c.Node.Zone = "us east" }, wantErr: `config node.zone: "us east" is not a zone such as us-east-1a`},
		{name: "cells", mutate: func(c *Config) { c.Cells.CatalogTTL = 0 }, wantErr: "config cells.catalogTTL: 0s is not a positive duration"},
		{name: "match", mutate: func(c *Config) { c.Match.BurstablePolicy = "sometimes" }, wantErr: `config match.burstablePolicy: "sometimes": want "baseline" or "unlimited"`},
		{name: "plugin", mutate: func(c *Config) { c.Plugin.SHA256 = "abc" }, wantErr: "config plugin.sha256: want 64 hexadecimal digits"},
		{name: "kubeconfig and bootstrap", mutate: func(c *Config) { c.Kubeconfig, c.Bootstrap.Kubeconfig = "/etc/kip/node", "in-cluster" },
			wantErr: "config bootstrap.kubeconfig: set together with kubeconfig"},
		{name: "bootstrap", mutate: func(c *Config) { c.Bootstrap.Kubeconfig, c.Bootstrap.CertificateLifetime = "in-cluster", time.Minute },
			wantErr: "config bootstrap.certificateLifetime: 1m0s is shorter than 10m0s"},
		{name: "plugin name", mutate: func(c *Config) { c.Plugin.Name = "../evil" }, wantErr: `config plugin.name: "../evil" is not a plugin name`},
		{name: "admin", mutate: func(c *Config) { c.Admin.ListenAddress = "10262" }, wantErr: `config admin.listenAddress: "10262" is not host:port`},
		{name: "admin authorization", mutate: func(c *Config) { c.Admin.Authorization = "open" }, wantErr: `config admin.authorization: "open": want cluster or none`},
		{name: "kept logs' advertised URL", mutate: func(c *Config) { c.KeptLogs.AdvertiseURL = "10.0.0.1:10262" }, wantErr: `config keptLogs.advertiseURL: "10.0.0.1:10262": want http://host:port`},
		{name: "leader election", mutate: func(c *Config) { c.LeaderElection.LeaseDuration = c.LeaderElection.RenewDeadline },
			wantErr: "config leaderElection.leaseDuration: 6s must exceed renewDeadline (6s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var cerr *Error
			if !errors.As(err, &cerr) || !strings.HasPrefix(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Validate = %q\nwant one line starting %q", err, tt.wantErr)
			}
		})
	}
	// Several bad keys: one line each.
	c := valid()
	c.Log.Level, c.Cells.RematchInterval, c.Node.Workers = "loud", 0, 0
	if lines := strings.Split(c.Validate().Error(), "\n"); len(lines) != 3 {
		t.Errorf("Validate with three bad keys = %q, want three lines", lines)
	}
}

func TestLoadNode(t *testing.T) {
	path := writeFile(t, `
nodeName: cells
node:
  taint: ""
  setRoleLabel: true
  capacity:
    cpu: "256"
    memory: 1Ti
  internalIP: 10.1.2.3
  zone: us-east-1a
  statusUpdateInterval: 30s
  clientCAFile: /etc/kip/ca.crt
  clusterDomain: kip.example
`)
	env := []string{"KIP_NODE_WORKERS=4", "KIP_NODE_LEASE_DURATION_SECONDS=120", "KIP_NODE_LISTEN_ADDRESS=0.0.0.0:10260",
		"KIP_NODE_CLUSTER_DNS=10.96.0.10,fd00::a"}
	got, err := Load(path, env, map[string]any{"node.capacity.pods": "300"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := node.Config{
		SetRoleLabel:         true,
		Capacity:             node.Capacity{CPU: "256", Memory: "1Ti", Pods: "300", GPUs: node.DefaultGPUs, EphemeralStorage: node.DefaultEphemeralStorage},
		Arch:                 "amd64",
		Zone:                 "us-east-1a",
		InternalIP:           "10.1.2.3",
		ListenAddress:        "0.0.0.0:10260",
		ClientCAFile:         "/etc/kip/ca.crt",
		LeaseDurationSeconds: 120,
		StatusUpdateInterval: 30 * time.Second,
		Workers:              4,
		ClusterDNS:           []string{"10.96.0.10", "fd00::a"},
		ClusterDomain:        "kip.example",
	}
	if diff := cmp.Diff(want, got.Node); diff != "" {
		t.Errorf("Load node mismatch (-want +got):\n%s", diff)
	}
	got.ClusterID = "c1"
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestLoadExpandsHomeInPaths(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	path := writeFile(t, "clusterID: x\nkubeconfig: ~/kube/node\nnode:\n  clientCAFile: ~/ca.crt\nplugin:\n  dir: /opt/kip\n")
	c, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig != "/home/op/kube/node" || c.Node.ClientCAFile != "/home/op/ca.crt" || c.Plugin.Dir != "/opt/kip" {
		t.Errorf("paths = %q %q %q", c.Kubeconfig, c.Node.ClientCAFile, c.Plugin.Dir)
	}
}

func TestMatchSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		want    func(c match.Config) bool
	}{
		{name: "defaults", want: func(m match.Config) bool {
			return m.AgentReserveMilliCPU == 100 && m.AgentReserveMemoryBytes == 256<<20 && !m.SpotFallback && m.DefaultArch == ""
		}},
		{name: "quantities", yaml: "match:\n  agentReserveCPU: 250m\n  agentReserveMemory: 1Gi\n  spotFallback: true\n", want: func(m match.Config) bool {
			return m.AgentReserveMilliCPU == 250 && m.AgentReserveMemoryBytes == 1<<30 && m.SpotFallback
		}},
		{name: "a number is a quantity", yaml: "match:\n  agentReserveCPU: 1\n  agentReserveMemory: 1000\n", want: func(m match.Config) bool {
			return m.AgentReserveMilliCPU == 1000 && m.AgentReserveMemoryBytes == 1000
		}},
		{name: "a fraction is a quantity", yaml: "match:\n  agentReserveCPU: 0.5\n", want: func(m match.Config) bool { return m.AgentReserveMilliCPU == 500 }},
		{name: "any arch", yaml: "match:\n  defaultArch: any\n", want: func(m match.Config) bool { return m.DefaultArch == match.ArchAny }},
		{name: "bad reserve", yaml: "match:\n  agentReserveMemory: lots\n", wantErr: `config match.agentReserveMemory: "lots" is not a memory quantity`},
		{name: "negative reserve", yaml: "match:\n  agentReserveCPU: -1\n", wantErr: `config match.agentReserveCPU: "-1" is not a CPU quantity >= 0`},
		{name: "absurd reserve", yaml: "match:\n  agentReserveMemory: 1e44444422\n", wantErr: "config match.agentReserveMemory"},
		{name: "bad policy", yaml: "match:\n  burstablePolicy: sometimes\n", wantErr: `config match.burstablePolicy: "sometimes"`},
		{name: "bad capacity type", yaml: "match:\n  defaultCapacityType: reserved\n", wantErr: `config match.defaultCapacityType: "reserved"`},
		{name: "typo", yaml: "match:\n  spotFalback: true\n", wantErr: "match.spotFalback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeFile(t, "clusterID: c\n"+tt.yaml), nil, nil)
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(c.Match) {
				t.Errorf("match section = %+v", c.Match)
			}
		})
	}
}

// The example in deploy/examples loads and is valid as it stands.
func TestExampleConfig(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	c, err := Load(filepath.Join("..", "..", "deploy", "examples", "kip-local.yaml"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	if c.ClusterID != "demo" || c.Cells.CatalogTTL != 10*time.Minute || c.Plugin.Settings["network"] != "auto" {
		t.Errorf("example = %+v", c)
	}
}

// loadSection loads and validates a kip.yaml of clusterID and yaml, with
// env. With wantErr it checks the error holds it ("…" stands for the
// source, the file's path) and returns nil; else it returns the config.
func loadSection(t *testing.T, yaml string, env []string, wantErr string) *Config {
	t.Helper()
	c, err := Load(writeFile(t, "clusterID: c\n"+yaml), env, nil)
	if err == nil {
		err = c.Validate()
	}
	if wantErr != "" {
		for _, want := range strings.Split(wantErr, "…") {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want an error containing %q", err, wantErr)
			}
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChoicesSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		want    []choices.Rule
	}{
		{name: "none"},
		{name: "rules", yaml: "cells:\n  choices:\n    rules:\n" +
			"      - {name: ml, namespaces: [ml], serviceAccounts: [trainer], instanceTypes: [\"g5.*\"], capacityTypes: [spot], gpuKinds: [a10g], instanceProfiles: [ml], securityGroups: [sg-1], maxVolumeSize: 500Gi, maxPriceRatio: 4}\n" +
			"      - {name: everyone, instanceTypes: [\"*\"], maxPriceRatio: 1.5}\n",
			want: []choices.Rule{
				{Name: "ml", Namespaces: []string{"ml"}, ServiceAccounts: []string{"trainer"}, InstanceTypes: []string{"g5.*"}, CapacityTypes: []string{"spot"},
					GPUKinds: []string{"a10g"}, InstanceProfiles: []string{"ml"}, SecurityGroups: []string{"sg-1"}, MaxVolumeSize: "500Gi", MaxPriceRatio: 4},
				{Name: "everyone", InstanceTypes: []string{"*"}, MaxPriceRatio: 1.5},
			}},
		{name: "a bad rule", yaml: "cells:\n  choices:\n    rules:\n      - {name: a, maxPriceRatio: 0.5}\n",
			wantErr: "config cells.choices.rules[0].maxPriceRatio: 0.5 is neither 0 (no ceiling) nor a ratio of at least 1"},
		{name: "a misspelt field", yaml: "cells:\n  choices:\n    rules:\n      - {name: a, instanceType: [x]}\n",
			wantErr: "config cells.choices.rules[0].instanceType (…): unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadSection(t, tt.yaml, nil, tt.wantErr)
			if c == nil {
				return
			}
			if diff := cmp.Diff(tt.want, c.Cells.Choices.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarmPoolSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		env     []string
		wantErr string
		want    []cells.WarmPool
	}{
		{name: "none"},
		{name: "pools", yaml: "cells:\n  warmPool:\n    maxPremium: 0.2\n    pools:\n" +
			"      - {name: small, size: {cpu: 500m, memory: 1Gi}, count: 2, maxAge: 30m}\n" +
			"      - {name: spot, instanceType: t3.micro, zone: z1, capacityType: spot, count: 1, maxPricePerHour: 0.01}\n",
			want: []cells.WarmPool{
				{Name: "small", Size: cells.WarmPoolSize{CPU: "500m", Memory: "1Gi"}, Count: 2, MaxAge: 30 * time.Minute},
				{Name: "spot", InstanceType: "t3.micro", Zone: "z1", CapacityType: pluginapi.CapacitySpot, Count: 1, MaxPricePerHour: 0.01},
			}},
		{name: "from the environment", env: []string{"KIP_CELLS_WARM_POOL_POOLS=[{name: small, instanceType: t3.micro, count: 1}]"},
			want: []cells.WarmPool{{Name: "small", InstanceType: "t3.micro", Count: 1}}},
		{name: "not a list in the environment", env: []string{"KIP_CELLS_WARM_POOL_POOLS=small"}, wantErr: "config cells.warmPool.pools (KIP_CELLS_WARM_POOL_POOLS)"},
		{name: "a bad pool", yaml: "cells:\n  warmPool:\n    pools:\n      - {name: a, count: -1}\n",
			wantErr: "config cells.warmPool.pools[0].instanceType: is empty and so is size"},
		{name: "a bad premium", yaml: "cells:\n  warmPool:\n    maxPremium: -1\n", wantErr: "config cells.warmPool.maxPremium"},
		{name: "a misspelt field", yaml: "cells:\n  warmPool:\n    pools:\n      - {name: a, instanceType: t3.micro, count: 1}\n      - {name: b, instanceType: t3.micro, cuont: 2}\n",
			wantErr: "config cells.warmPool.pools[1].cuont (…): unknown key"},
		{name: "a field in the wrong case", yaml: "cells:\n  warmPool:\n    pools:\n      - {name: a, instancetype: t3.micro, count: 1}\n",
			wantErr: "config cells.warmPool.pools[0].instancetype (…): unknown key (did you mean instanceType?)"},
		{name: "a misspelt nested field", yaml: "cells:\n  warmPool:\n    pools:\n      - {name: a, size: {cpus: 1}, count: 1}\n",
			wantErr: "config cells.warmPool.pools[0].size.cpus (…): unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadSection(t, tt.yaml, tt.env, tt.wantErr)
			if c == nil {
				return
			}
			if diff := cmp.Diff(tt.want, c.Cells.WarmPool.Pools); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
		})
	}
}
