package plugin

import (
	"strings"
	"testing"

	"github.com/kipcell/kip/host/setting"
)

func TestConfigValidate(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		cfg     Config
		wantKey []string
	}{
		{name: "defaults", cfg: DefaultConfig()},
		{name: "pinned, with a path and settings", cfg: Config{Name: "aws", Path: "/opt/kip-plugin-aws", SHA256: pin, Settings: map[string]any{"region": "x"}}},
		{name: "names with - and _", cfg: Config{Name: "my-cloud_2"}},
		{name: "no name", cfg: Config{}, wantKey: []string{"name"}},
		{name: "a path for a name", cfg: Config{Name: "../evil"}, wantKey: []string{"name"}},
		{name: "upper case", cfg: Config{Name: "Local"}, wantKey: []string{"name"}},
		{name: "short pin", cfg: Config{Name: "local", SHA256: "abc"}, wantKey: []string{"sha256"}},
		{name: "pin not hex", cfg: Config{Name: "local", SHA256: strings.Repeat("zz", 32)}, wantKey: []string{"sha256"}},
		{name: "pin with spaces", cfg: Config{Name: "local", SHA256: " " + pin}, wantKey: []string{"sha256"}},
		{name: "both", cfg: Config{Name: "-", SHA256: "x"}, wantKey: []string{"name", "sha256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if got := setting.Keys(err); strings.Join(got, ",") != strings.Join(tt.wantKey, ",") {
				t.Errorf("Validate = %v; want errors naming %v", err, tt.wantKey)
			}
		})
	}
}

func TestSettingsJSON(t *testing.T) {
	tests := []struct {
		settings map[string]any
		want     string
	}{
		{nil, "{}"},
		{map[string]any{}, "{}"},
		{map[string]any{"zone": "z1", "agentCommand": []any{"/bin/sleep", "300"}, "rateLimit": map[string]any{"burst": 5}}, `{"agentCommand":["/bin/sleep","300"],"rateLimit":{"burst":5},"zone":"z1"}`},
	}
	for _, tt := range tests {
		got, err := Config{Settings: tt.settings}.SettingsJSON()
		if err != nil || string(got) != tt.want {
			t.Errorf("SettingsJSON(%v) = %s, %v; want %s", tt.settings, got, err, tt.want)
		}
	}
	if _, err := (Config{Settings: map[string]any{"f": func() {}}}).SettingsJSON(); err == nil || !strings.Contains(err.Error(), "plugin.config") {
		t.Errorf("SettingsJSON of a function = %v, want an error naming plugin.config", err)
	}
}
