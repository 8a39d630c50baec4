package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeAPIServerKubeconfig writes a kubeconfig for a plain-HTTP server that
// answers every request with an empty object: enough for `kip run` to get
// past its API server check to the plugin, which it starts next.
func fakeAPIServerKubeconfig(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return writeConfig(t, `apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "`+srv.URL+`"}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`)
}

// A plugin must report the name kip expects of it: kip-plugin-toy2 whose
// GetInfo says "local" (a copy of kip-plugin-local) is refused by every
// command that starts it, naming the file and both names, and shown as an
// error in its row by list; given by plugin.path, it must report
// plugin.name.
func TestPluginNameMismatch(t *testing.T) {
	local, err := os.ReadFile(filepath.Join(pluginDirWithLocal, "kip-plugin-local"))
	if err != nil {
		t.Fatal(err)
	}
	dir := copyDir(t, map[string]string{"kip-plugin-toy2": string(local)})
	toy2 := filepath.Join(dir, "kip-plugin-toy2")
	other := filepath.Join(t.TempDir(), "cloud-plugin")
	if err := os.WriteFile(other, local, 0o755); err != nil {
		t.Fatal(err)
	}
	inDir := `plugin toy2 (` + toy2 + `): name mismatch: kip-plugin-toy2 reports the name "local", not "toy2" (a plugin's file is named kip-plugin-<its name>)`
	byPath := `plugin aws (` + other + `): name mismatch: cloud-plugin reports the name "local", not the configured name "aws"`
	kubeconfig := fakeAPIServerKubeconfig(t)
	runConfig := func(extra string) string {
		return writeConfig(t, localConfig(t, "")+extra+"kubeconfig: "+kubeconfig+"\nnode: {internalIP: 127.0.0.1, listenAddress: \"127.0.0.1:0\"}\n")
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "run, found in the plugin directory", args: []string{"run", "--plugin-dir", dir, "--config", runConfig("  name: toy2\n")}, want: inDir},
		{name: "run, by plugin.path", args: []string{"run", "--config", runConfig("  name: aws\n  path: " + other + "\n")}, want: byPath},
		{name: "describe", args: []string{"plugins", "describe", "toy2", "--plugin-dir", dir}, want: inDir},
		{name: "verify, found in the plugin directory", args: []string{"plugins", "verify", "toy2", "--plugin-dir", dir, "--config", writeConfig(t, localConfig(t, ""))}, want: inDir},
		{name: "verify, by plugin.path", args: []string{"plugins", "verify", "aws", "--config", writeConfig(t, localConfig(t, "  path: "+other+"\n"))}, want: byPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runKip(t, tt.args...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if last := lines[len(lines)-1]; code != 1 || last != "kip: "+tt.want {
				t.Errorf("kip %s: exit %d, last line of stderr\n %q\nwant exit 1 and\n %q\nstdout:\n%s", strings.Join(tt.args, " "), code, last, "kip: "+tt.want, out)
			}
		})
	}

	t.Run("list", func(t *testing.T) {
		out, errOut, code := runKip(t, "plugins", "list", "--plugin-dir", dir)
		if code != 1 {
			t.Errorf("exit %d, want 1 because one plugin is broken; stderr %s", code, errOut)
		}
		rows := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			name, _, _ := strings.Cut(line, " ")
			rows[name] = line
		}
		if row := rows["toy2"]; !strings.Contains(row, "error: "+inDir) {
			t.Errorf("toy2 row = %q, want the mismatch %q", row, inDir)
		}
		if row := rows["local"]; row == "" || strings.Contains(row, "error") {
			t.Errorf("local row = %q, want the plugin without an error", row)
		}
	})
}
