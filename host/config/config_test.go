package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kip.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadLayers(t *testing.T) {
	path := writeFile(t, `
clusterID: from-file
nodeName: kip-file
plugin:
  name: local
  config:
    agentCommand: ["/bin/sleep", "300"]
    network: loopback
log:
  level: debug
`)
	env := []string{"KIP_NODE_NAME=kip-env", "KIP_PLUGIN_LOG_LEVEL=trace", "HOME=/root", "KIP_UNRELATED=1"}
	flags := map[string]any{"clusterID": "from-flag"}
	got, err := Load(path, env, flags)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		ClusterID: "from-flag",
		NodeName:  "kip-env",
		Node:      defaultNode(),
		Cells:     Cells{InsecureRegistries: []string{}},
		PKI:       PKI{Namespace: "kip-system", SecretName: "kip-ca"},
		Match: Match{
			AgentReserveCPU: "100m", AgentReserveMemory: "256Mi", BurstablePolicy: "baseline",
			SurplusCreditPricePerVCPUHour: 0.05, UnknownPrice: "last", DefaultCapacityType: "on-demand",
			GPUResources: []string{}, IgnoredResources: []string{}, MaxCandidates: 20,
			UnavailableTTL: 3 * time.Minute, CatalogTTL: 10 * time.Minute, RematchInterval: time.Minute,
		},
		Plugin: Plugin{
			Name:   "local",
			Config: map[string]any{"agentCommand": []any{"/bin/sleep", "300"}, "network": "loopback"},
		},
		Log: Log{Level: "debug", Format: "json"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
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
		flags   map[string]any
		wantKey string
		wantMsg string
	}{
		{name: "unknown top-level key", file: "clusterId: x\n", wantKey: "clusterId", wantMsg: "did you mean clusterID"},
		{name: "unknown nested key", file: "plugin:\n  binary: local\n", wantKey: "plugin.binary", wantMsg: "unknown key"},
		{name: "unknown flag key", flags: map[string]any{"bogus": 1}, wantKey: "bogus", wantMsg: "unknown key"},
		{name: "plugin.config a string", file: "plugin:\n  config: abc\n", wantKey: "plugin.config", wantMsg: "must be a mapping of the plugin's settings (key: value lines), not a string"},
		{name: "plugin.config a list", file: "plugin:\n  config: [a, b]\n", wantKey: "plugin.config", wantMsg: "must be a mapping of the plugin's settings (key: value lines), not a list"},
		{name: "plugin.config a list of mappings", file: "plugin:\n  config:\n    - region: x\n", wantKey: "plugin.config", wantMsg: "not a list"},
		{name: "plugin.config a number", file: "plugin:\n  config: 3\n", wantKey: "plugin.config", wantMsg: "not a single value"},
		{name: "plugin.config from a flag", flags: map[string]any{"plugin.config": "abc"}, wantKey: "plugin.config", wantMsg: "not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			_, err := Load(path, nil, tt.flags)
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
		wantKey string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "missing cluster ID", mutate: func(c *Config) { c.ClusterID = "" }, wantKey: "clusterID"},
		{name: "cluster ID not a label", mutate: func(c *Config) { c.ClusterID = "Prod_1" }, wantKey: "clusterID"},
		{name: "bad node name", mutate: func(c *Config) { c.NodeName = "-kip" }, wantKey: "nodeName"},
		{name: "bad plugin name", mutate: func(c *Config) { c.Plugin.Name = "../evil" }, wantKey: "plugin.name"},
		{name: "bad pin", mutate: func(c *Config) { c.Plugin.SHA256 = "abc" }, wantKey: "plugin.sha256"},
		{name: "bad log level", mutate: func(c *Config) { c.Log.Level = "loud" }, wantKey: "log.level"},
		{name: "bad log format", mutate: func(c *Config) { c.Log.Format = "xml" }, wantKey: "log.format"},
		{name: "no taint", mutate: func(c *Config) { c.Node.Taint = "" }},
		{name: "taint none", mutate: func(c *Config) { c.Node.Taint = "none" }},
		{name: "taint without value", mutate: func(c *Config) { c.Node.Taint = "kipcell.io/cells:NoExecute" }},
		{name: "bad taint effect", mutate: func(c *Config) { c.Node.Taint = "a=b:Never" }, wantKey: "node.taint"},
		{name: "bad taint form", mutate: func(c *Config) { c.Node.Taint = "a=b" }, wantKey: "node.taint"},
		{name: "millicores", mutate: func(c *Config) { c.Node.Capacity.CPU = "64500m" }},
		{name: "bad cpu", mutate: func(c *Config) { c.Node.Capacity.CPU = "lots" }, wantKey: "node.capacity.cpu"},
		{name: "bad memory", mutate: func(c *Config) { c.Node.Capacity.Memory = "4 TB" }, wantKey: "node.capacity.memory"},
		{name: "empty pods", mutate: func(c *Config) { c.Node.Capacity.Pods = "" }, wantKey: "node.capacity.pods"},
		{name: "bad arch", mutate: func(c *Config) { c.Node.Arch = "x86-64" }, wantKey: "node.arch"},
		{name: "bad internal IP", mutate: func(c *Config) { c.Node.InternalIP = "10.0.0" }, wantKey: "node.internalIP"},
		{name: "IPv6 internal IP", mutate: func(c *Config) { c.Node.InternalIP = "fd00::1" }},
		{name: "bad listen address", mutate: func(c *Config) { c.Node.ListenAddress = "10250" }, wantKey: "node.listenAddress"},
		{name: "cert without key", mutate: func(c *Config) { c.Node.TLSCertFile = "/tls.crt" }, wantKey: "node.tlsKeyFile"},
		{name: "key without cert", mutate: func(c *Config) { c.Node.TLSKeyFile = "/tls.key" }, wantKey: "node.tlsCertFile"},
		{name: "short lease", mutate: func(c *Config) { c.Node.LeaseDurationSeconds = 2 }, wantKey: "node.leaseDurationSeconds"},
		{name: "zero status interval", mutate: func(c *Config) { c.Node.StatusUpdateInterval = 0 }, wantKey: "node.statusUpdateInterval"},
		{name: "no workers", mutate: func(c *Config) { c.Node.Workers = 0 }, wantKey: "node.workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(c)
			err := c.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.Key != tt.wantKey {
				t.Errorf("Validate = %v, want an error naming %s", err, tt.wantKey)
			}
		})
	}
}

func defaultNode() Node {
	return Node{
		Taint:                "virtual-kubelet.io/provider=kip:NoSchedule",
		Capacity:             Capacity{CPU: "1000", Memory: "4Ti", Pods: "1000"},
		Arch:                 "amd64",
		ListenAddress:        ":10250",
		LeaseDurationSeconds: 40,
		StatusUpdateInterval: time.Minute,
		Workers:              10,
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
  statusUpdateInterval: 30s
  clientCAFile: /etc/kip/ca.crt
`)
	env := []string{"KIP_NODE_WORKERS=4", "KIP_NODE_LEASE_DURATION_SECONDS=120", "KIP_NODE_LISTEN_ADDRESS=0.0.0.0:10260"}
	got, err := Load(path, env, map[string]any{"node.capacity.pods": "300"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Node{
		SetRoleLabel:         true,
		Capacity:             Capacity{CPU: "256", Memory: "1Ti", Pods: "300"},
		Arch:                 "amd64",
		InternalIP:           "10.1.2.3",
		ListenAddress:        "0.0.0.0:10260",
		ClientCAFile:         "/etc/kip/ca.crt",
		LeaseDurationSeconds: 120,
		StatusUpdateInterval: 30 * time.Second,
		Workers:              4,
	}
	if diff := cmp.Diff(want, got.Node); diff != "" {
		t.Errorf("Load node mismatch (-want +got):\n%s", diff)
	}
	got.ClusterID = "c1"
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestLoadNodeRefusesUnknownKey(t *testing.T) {
	_, err := Load(writeFile(t, "node:\n  taints: a:NoSchedule\n"), nil, nil)
	var cerr *Error
	if !errors.As(err, &cerr) || cerr.Key != "node.taints" {
		t.Errorf("Load = %v, want an error naming node.taints", err)
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
		check   func(t *testing.T, c *Config)
	}{
		{name: "defaults", check: func(t *testing.T, c *Config) {
			m, err := c.MatchConfig()
			if err != nil {
				t.Fatal(err)
			}
			if m.AgentReserveMilliCPU != 100 || m.AgentReserveMemoryBytes != 256<<20 || m.SpotFallback || m.DefaultArch != "amd64" {
				t.Errorf("default match config = %+v", m)
			}
		}},
		{name: "quantities", yaml: "match:\n  agentReserveCPU: 250m\n  agentReserveMemory: 1Gi\n  spotFallback: true\n", check: func(t *testing.T, c *Config) {
			m, err := c.MatchConfig()
			if err != nil {
				t.Fatal(err)
			}
			if m.AgentReserveMilliCPU != 250 || m.AgentReserveMemoryBytes != 1<<30 || !m.SpotFallback {
				t.Errorf("match config = %+v", m)
			}
		}},
		{name: "any arch", yaml: "match:\n  defaultArch: any\n", check: func(t *testing.T, c *Config) {
			if m, err := c.MatchConfig(); err != nil || m.DefaultArch != "" {
				t.Errorf("defaultArch any = %q, %v; want no default", m.DefaultArch, err)
			}
		}},
		{name: "arch follows the node", yaml: "node:\n  arch: arm64\n", check: func(t *testing.T, c *Config) {
			if m, err := c.MatchConfig(); err != nil || m.DefaultArch != "arm64" {
				t.Errorf("defaultArch = %q, %v; want node.arch arm64", m.DefaultArch, err)
			}
		}},
		{name: "bad reserve", yaml: "match:\n  agentReserveMemory: lots\n", wantErr: `config match.agentReserveMemory: "lots" is not a memory quantity`},
		{name: "negative reserve", yaml: "match:\n  agentReserveCPU: -1\n", wantErr: "config match.agentReserveCPU"},
		{name: "absurd reserve", yaml: "match:\n  agentReserveMemory: 1e44444422\n", wantErr: "config match.agentReserveMemory"},
		{name: "bad policy", yaml: "match:\n  burstablePolicy: sometimes\n", wantErr: `burstablePolicy "sometimes"`},
		{name: "bad capacity type", yaml: "match:\n  defaultCapacityType: reserved\n", wantErr: `defaultCapacityType "reserved"`},
		{name: "zero ttl", yaml: "match:\n  unavailableTTL: 0s\n", wantErr: "config match.unavailableTTL: 0s is not a positive duration"},
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
			tt.check(t, c)
		})
	}
}
