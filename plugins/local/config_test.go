package local

import (
	"errors"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func TestConfigureRefusesBadConfigNamingTheKey(t *testing.T) {
	dir := t.TempDir()
	agent := `"agentCommand": ["sleep", "300"], "stateDir": "` + dir + `"`
	tests := []struct {
		name   string
		config string
		key    string
	}{
		{"not an object", `[1]`, "plugin.config"},
		{"no agent", `{"stateDir": "` + dir + `"}`, "agentCommand"},
		{"empty agent", `{"agentCommand": []}`, "agentCommand"},
		{"agent not a list", `{"agentCommand": "sleep 300"}`, "agentCommand"},
		{"agent not executable", `{"agentCommand": ["/nonexistent/kip-cell"]}`, "agentCommand"},
		{"unknown key", `{` + agent + `, "networks": "loopback"}`, "networks"},
		{"state dir relative", `{"agentCommand": ["sleep"], "stateDir": "var/kip"}`, "stateDir"},
		{"state dir not a string", `{"agentCommand": ["sleep"], "stateDir": 7}`, "stateDir"},
		{"network", `{` + agent + `, "network": "host"}`, "network"},
		{"bridge too long", `{` + agent + `, "bridge": "a-very-long-bridge-name"}`, "bridge"},
		{"bridge with slash", `{` + agent + `, "bridge": "br/0"}`, "bridge"},
		{"subnet not CIDR", `{` + agent + `, "subnet": "10.213.0.0"}`, "subnet"},
		{"subnet public", `{` + agent + `, "subnet": "8.8.0.0/16"}`, "subnet"},
		{"subnet IPv6", `{` + agent + `, "subnet": "fd00::/64"}`, "subnet"},
		{"subnet too small", `{` + agent + `, "subnet": "10.213.0.0/31"}`, "subnet"},
		{"loopback subnet outside 127/8", `{` + agent + `, "loopbackSubnet": "10.0.0.0/16"}`, "loopbackSubnet"},
		{"termination grace", `{` + agent + `, "terminationGrace": "soon"}`, "terminationGrace"},
		{"termination grace negative", `{` + agent + `, "terminationGrace": "-1s"}`, "terminationGrace"},
		{"instance types empty", `{` + agent + `, "instanceTypes": []}`, "instanceTypes"},
		{"instance types not a list", `{` + agent + `, "instanceTypes": {}}`, "instanceTypes"},
		{"instance type not an object", `{` + agent + `, "instanceTypes": [7]}`, "instanceTypes[0]"},
		{"instance type unknown key", `{` + agent + `, "instanceTypes": [{"name": "a", "milliCPU": 100, "memoryMiB": 64, "gpus": 1}]}`, "instanceTypes[0].gpus"},
		{"instance type no name", `{` + agent + `, "instanceTypes": [{"milliCPU": 100, "memoryMiB": 64}]}`, "instanceTypes[0].name"},
		{"instance type duplicate", `{` + agent + `, "instanceTypes": [{"name": "a", "milliCPU": 100, "memoryMiB": 64}, {"name": "a", "milliCPU": 100, "memoryMiB": 64}]}`, "instanceTypes[1].name"},
		{"instance type CPU", `{` + agent + `, "instanceTypes": [
			{"name": "a", "milliCPU": 100, "memoryMiB": 64},
			{"name": "b", "milliCPU": 200, "memoryMiB": 64},
			{"name": "c", "milliCPU": 0, "memoryMiB": 64}]}`, "instanceTypes[2].milliCPU"},
		{"instance type CPU not integer", `{` + agent + `, "instanceTypes": [{"name": "a", "milliCPU": 0.5, "memoryMiB": 64}]}`, "instanceTypes[0].milliCPU"},
		{"instance type memory", `{` + agent + `, "instanceTypes": [{"name": "a", "milliCPU": 100, "memoryMiB": 1}]}`, "instanceTypes[0].memoryMiB"},
		{"instance type price", `{` + agent + `, "instanceTypes": [{"name": "a", "milliCPU": 100, "memoryMiB": 64, "price": -1}]}`, "instanceTypes[0].price"},
		{"attachment limit negative", `{` + agent + `, "attachmentLimit": -1}`, "attachmentLimit"},
		{"attachment limit not a number", `{` + agent + `, "attachmentLimit": "many"}`, "attachmentLimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(testLogger(t))
			_, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(tt.config)})
			var invalid *pluginapi.InvalidConfigError
			if !errors.As(err, &invalid) {
				t.Fatalf("Configure(%s) = %v, want InvalidConfig", tt.config, err)
			}
			if invalid.Key != tt.key {
				t.Errorf("Configure(%s) names key %q, want %q (error: %v)", tt.config, invalid.Key, tt.key, err)
			}
		})
	}
}

func TestConfigureRequiresClusterID(t *testing.T) {
	p := New(testLogger(t))
	_, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{Config: []byte(`{"agentCommand": ["sleep"]}`)})
	var invalid *pluginapi.InvalidConfigError
	if !errors.As(err, &invalid) || invalid.Key != "clusterID" {
		t.Fatalf("Configure without cluster ID = %v, want InvalidConfig for clusterID", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	raw, err := decodeConfig([]byte(`{"agentCommand": ["sleep", "{bootstrap}"], "network": "loopback"}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := validate(raw, machine{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	wantStateDir, _ := defaultStateDir()
	if os.Geteuid() == 0 && wantStateDir != "/var/lib/kip/local" {
		t.Errorf("root's default state dir = %q", wantStateDir)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"stateDir", cfg.stateDir, wantStateDir},
		{"network", cfg.network, NetworkLoopback},
		{"bridge", cfg.bridge, "kip0"},
		{"subnet", cfg.subnet, netip.MustParsePrefix("10.213.0.0/16")},
		{"loopbackSubnet", cfg.loopbackSubnet, netip.MustParsePrefix("127.77.0.0/16")},
		{"zone", cfg.zone, "local"},
		{"terminationGrace", cfg.terminationGrace, 5 * time.Second},
		{"attachmentLimit", cfg.attachmentLimit, 16},
		{"instance types", len(cfg.catalog), len(defaultTypes)},
		{"agent args", cfg.agentArgs, []string{"{bootstrap}"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !strings.HasSuffix(cfg.agentPath, "/sleep") {
		t.Errorf("agent path = %q, want sleep resolved to an absolute path", cfg.agentPath)
	}
}

func TestDefaultStateDirForUsers(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root's default is fixed; the XDG default applies to other users")
	}
	t.Setenv("XDG_STATE_HOME", "/home/u/.state")
	if got, _ := defaultStateDir(); got != "/home/u/.state/kip/local" {
		t.Errorf("defaultStateDir() = %q", got)
	}
}

func TestNetworkAuto(t *testing.T) {
	raw, err := decodeConfig([]byte(`{"agentCommand": ["sleep"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := validate(raw, machine{}, func() error { return errors.New("no netns here") })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.network != NetworkLoopback {
		t.Errorf("auto with failing netns = %s, want loopback", cfg.network)
	}
	if os.Geteuid() == 0 && len(warnings) != 1 {
		t.Errorf("warnings = %q, want one saying why not netns", warnings)
	}
	cfg, _, err = validate(raw, machine{}, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := NetworkLoopback
	if os.Geteuid() == 0 {
		want = NetworkNetns
	}
	if cfg.network != want {
		t.Errorf("auto with working netns = %s, want %s", cfg.network, want)
	}
}

// The JSON Schema GetInfo reports, rendered from Config, is the golden
// file: go test -update rewrites it, and its diff shows what a change of
// Config's keys or tags does to the schema.
func TestConfigSchema(t *testing.T) {
	info, err := New(testLogger(t)).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-schema.json", []byte(info.ConfigSchema))
}
