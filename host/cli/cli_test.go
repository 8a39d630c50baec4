package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/pluginapi"
)

// pluginDirWithLocal is a plugin directory holding a freshly built
// kip-plugin-local, shared by the tests.
var pluginDirWithLocal string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kip-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kip-plugin-local"),
		"github.com/kipcell/kip/plugins/local/cmd/kip-plugin-local")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building kip-plugin-local:", err)
		os.Exit(1)
	}
	pluginDirWithLocal = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func runKip(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(t.Context(), args, Env{Stdout: &out, Stderr: &errOut, Environ: []string{}})
	return out.String(), errOut.String(), code
}

// copyDir makes a plugin directory with kip-plugin-local plus extra files.
func copyDir(t *testing.T, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(pluginDirWithLocal, "kip-plugin-local"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kip-plugin-local"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kip.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func localConfig(t *testing.T, extra string) string {
	return fmt.Sprintf(`clusterID: cli-test
plugin:
  config:
    agentCommand: ["/bin/sleep", "300"]
    network: loopback
    stateDir: %s
%s`, t.TempDir(), extra)
}

// kip version says which plugin API versions this kip speaks and accepts,
// as a plugin author checks before building against pluginapi.
func TestVersion(t *testing.T) {
	out, _, code := runKip(t, "version")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("kip version = %q (exit %d), want two lines: kip's version, then the plugin API versions", out, code)
	}
	if want := "kip " + Version + " ("; !strings.HasPrefix(lines[0], want) {
		t.Errorf("kip version's first line = %q, want it to start with %q", lines[0], want)
	}
	// This kip speaks API 1.0 (pluginapi.APIVersion); within major 1 a later
	// pluginapi adds minors, so 1.0 stays in the list.
	want := fmt.Sprintf("plugin API %s (protocol 1): accepts plugins listing API %s, or any other 1.x",
		pluginapi.APIVersion, strings.Join(pluginapi.SupportedAPIVersions(), ", "))
	if lines[1] != want {
		t.Errorf("kip version's second line = %q, want %q", lines[1], want)
	}
	if !strings.Contains(lines[1], "API 1.0") {
		t.Errorf("kip version's second line = %q does not list API 1.0", lines[1])
	}
}

func TestUsageErrors(t *testing.T) {
	tests := [][]string{
		{},
		{"bogus"},
		{"plugins"},
		{"plugins", "frob"},
		{"plugins", "describe"},
		{"plugins", "verify", "local"},
		{"plugins", "list", "-o", "yaml"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			_, errOut, code := runKip(t, args...)
			if code != 2 || !strings.Contains(errOut, "Usage:") {
				t.Errorf("kip %q exit %d stderr %q, want exit 2 with usage", args, code, errOut)
			}
		})
	}
}

func TestPluginsListShowsLocalAndBrokenPlugins(t *testing.T) {
	dir := copyDir(t, map[string]string{
		"kip-plugin-impostor": "#!/bin/sh\necho hello\n",
		"README":              "not a plugin",
	})
	out, _, code := runKip(t, "plugins", "list", "--plugin-dir", dir)
	if code != 1 {
		t.Errorf("exit %d, want 1 because one plugin is broken", code)
	}
	sum, err := plugin.FileSHA256(filepath.Join(dir, "kip-plugin-local"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("list printed %d lines, want header + 2 plugins:\n%s", len(lines), out)
	}
	local := strings.Fields(lines[2])
	if lines[1] == "" || !strings.HasPrefix(lines[2], "local ") {
		t.Fatalf("rows not sorted by name or local missing:\n%s", out)
	}
	if local[2] != pluginapi.APIVersion || !strings.Contains(lines[2], filepath.Join(dir, "kip-plugin-local")) || !strings.Contains(lines[2], sum) {
		t.Errorf("local row = %q, want API %s, its path and sha256 %s", lines[2], pluginapi.APIVersion, sum)
	}
	if !strings.HasPrefix(lines[1], "impostor ") || !strings.Contains(lines[1], "error:") {
		t.Errorf("impostor row = %q, want an error", lines[1])
	}
}

func TestPluginsListJSON(t *testing.T) {
	dir := copyDir(t, nil)
	out, errOut, code := runKip(t, "plugins", "list", "-o", "json", "--plugin-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var entries []listEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(entries) != 1 || entries[0].Name != "local" || entries[0].Version == "" || len(entries[0].SHA256) != 64 {
		t.Errorf("entries = %+v, want one complete local entry", entries)
	}
}

func TestPluginsDescribe(t *testing.T) {
	out, errOut, code := runKip(t, "plugins", "describe", "local", "--plugin-dir", pluginDirWithLocal)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Name        string   `json:"name"`
		APIVersions []string `json:"apiVersions"`
		Path        string   `json:"path"`
		SHA256      string   `json:"sha256"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if got.Name != "local" || len(got.APIVersions) == 0 || got.Path != filepath.Join(pluginDirWithLocal, "kip-plugin-local") || len(got.SHA256) != 64 {
		t.Errorf("describe = %+v", got)
	}
}

func TestPluginsVerify(t *testing.T) {
	dir := copyDir(t, map[string]string{"kip-plugin-impostor": "#!/bin/sh\nexit 0\n"})
	pluginPath := filepath.Join(dir, "kip-plugin-local")
	tests := []struct {
		name     string
		plugin   string
		config   string
		wantCode int
		want     []string
	}{
		{
			name:     "valid",
			plugin:   "local",
			config:   localConfig(t, ""),
			wantCode: 0,
			want:     []string{"handshake   ok (protocol 1, API " + pluginapi.APIVersion + ")", "configure   ok (cluster cli-test, node kip)", "catalog     ok"},
		},
		{
			name:     "plugin refuses a setting",
			plugin:   "local",
			config:   localConfig(t, "    network: carrier-pigeon\n"),
			wantCode: 1,
			want:     []string{"plugin local (" + pluginPath + ")", "network"},
		},
		{
			name:     "checksum mismatch",
			plugin:   "local",
			config:   localConfig(t, "") + "  sha256: " + strings.Repeat("ab", 32) + "\n",
			wantCode: 1,
			want:     []string{"plugin local (" + pluginPath + ")", "checksum"},
		},
		{
			name:     "missing plugin",
			plugin:   "nosuch",
			config:   localConfig(t, ""),
			wantCode: 1,
			want:     []string{"nosuch", dir},
		},
		{
			name:     "not a plugin",
			plugin:   "impostor",
			config:   localConfig(t, ""),
			wantCode: 1,
			want:     []string{"plugin impostor (" + filepath.Join(dir, "kip-plugin-impostor") + ")"},
		},
		{
			name:     "bad kip config",
			plugin:   "local",
			config:   "clusterID: cli-test\nplugn: {}\n",
			wantCode: 1,
			want:     []string{"plugn", "unknown key"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.config
			if strings.Contains(cfg, "network: carrier-pigeon") {
				cfg = strings.Replace(cfg, "    network: loopback\n", "", 1)
			}
			out, errOut, code := runKip(t, "plugins", "verify", tt.plugin, "--config", writeConfig(t, cfg), "--plugin-dir", dir)
			text := out + errOut
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tt.wantCode, text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
			if tt.wantCode != 0 {
				if n := strings.Count(strings.TrimSpace(errOut), "\n"); n != 0 {
					t.Errorf("failure printed %d lines, want one line:\n%s", n+1, errOut)
				}
			}
		})
	}
}

func TestPluginDirDefaults(t *testing.T) {
	dir := copyDir(t, nil)
	tests := []struct {
		name string
		env  Env
	}{
		{name: "the kip binary's directory", env: Env{Executable: filepath.Join(dir, "kip")}},
		{name: "KIP_PLUGIN_DIR wins over the binary's directory", env: Env{
			Executable: filepath.Join(t.TempDir(), "kip"),
			Environ:    []string{"KIP_PLUGIN_DIR=" + dir},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			tt.env.Stdout, tt.env.Stderr = &out, &errOut
			if code := Run(t.Context(), []string{"plugins", "list"}, tt.env); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if !strings.Contains(out.String(), filepath.Join(dir, "kip-plugin-local")) {
				t.Errorf("list without --plugin-dir = %q, want local from %s", out.String(), dir)
			}
		})
	}
}

func TestCatalogAge(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, ""},
		{time.Date(2026, 7, 6, 14, 20, 29, 0, time.UTC), "137 days (as of 2026-07-06)"},
		{now.Add(-time.Hour), "0 days (as of 2026-11-21)"},
		{now.Add(48 * time.Hour), "dated in the future (2026-11-23)"},
	}
	for _, tt := range tests {
		if got := catalogAge(tt.at, now); got != tt.want {
			t.Errorf("catalogAge(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
}
