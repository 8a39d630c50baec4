package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
