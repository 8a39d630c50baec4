package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recipeScript returns the start-cell script of the boot recipe
// (deploy/aws/cloud-init.yaml), as cloud-init writes it.
func recipeScript(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/aws/cloud-init.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "- path: /usr/local/lib/kip/start-cell" {
			continue
		}
		// permissions, "content: |", then the block indented by 6.
		var out []string
		for _, b := range lines[i+3:] {
			if b != "" && !strings.HasPrefix(b, "      ") {
				break
			}
			out = append(out, strings.TrimPrefix(b, "      "))
		}
		return strings.Join(out, "\n")
	}
	t.Fatal("the boot recipe has no /usr/local/lib/kip/start-cell")
	return ""
}

// downloadStep is the recipe's "fetch and check kip-cell" step, taken from
// the script verbatim with its paths moved under dir.
func downloadStep(t *testing.T, dir string) string {
	t.Helper()
	script := recipeScript(t)
	start := strings.Index(script, "if [ ! -x /usr/local/bin/kip-cell ]; then")
	end := strings.Index(script, "exec /usr/local/bin/kip-cell")
	if start < 0 || end < start {
		t.Fatal("the boot recipe's script has no kip-cell download step before the exec")
	}
	return strings.ReplaceAll(script[start:end], "/usr/local/bin/", dir+"/")
}

// TestBootRecipeChecksTheAgent runs the recipe's own download step with a
// stand-in curl (a copy of a local file): a kip-cell whose SHA-256 is
// missing or another is refused and not installed; the right one is.
func TestBootRecipeChecksTheAgent(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Fatalf("the boot recipe needs sha256sum (coreutils): %v", err)
	}
	agent := []byte("#!/bin/sh\necho kip-cell\n")
	sum := sha256.Sum256(agent)
	good := hex.EncodeToString(sum[:])
	other := strings.Repeat("0", 64)
	tests := []struct {
		name, sum string
		wantOK    bool
		wantMsg   string
	}{
		{name: "right sum", sum: good, wantOK: true},
		{name: "no sum", sum: "", wantMsg: "no SHA-256 for kip-cell on amd64"},
		{name: "not a sum", sum: "abc", wantMsg: "no SHA-256 for kip-cell on amd64"},
		{name: "another sum", sum: other, wantMsg: "does not have the SHA-256 " + other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "release", "kip-cell-linux-amd64")
			bin := filepath.Join(dir, "bin")
			stubs := filepath.Join(dir, "stubs")
			for _, d := range []string{filepath.Dir(src), bin, stubs} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(src, agent, 0o600); err != nil {
				t.Fatal(err)
			}
			// curl -fsSL … -o OUT URL: copy the file:// URL to OUT.
			curl := "#!/bin/sh\nout=\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\ncp \"${1#file://}\" \"$out\"\n"
			if err := os.WriteFile(filepath.Join(stubs, "curl"), []byte(curl), 0o755); err != nil { //nolint:gosec // a test's executable stub
				t.Fatal(err)
			}
			// fail as the recipe's, without its minute of waiting.
			prelude := "set -eu\nfail() { echo \"kip-cell boot: $*\" >&2; exit 1; }\narch=amd64\n" +
				"KIP_CELL_URL=file://" + filepath.Join(filepath.Dir(src), "kip-cell-linux-{arch}") + "\n" +
				"KIP_CELL_SHA256_AMD64=" + tt.sum + "\nKIP_CELL_SHA256_ARM64=\n"
			cmd := exec.Command("sh", "-c", prelude+downloadStep(t, bin))
			cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			installed, statErr := os.ReadFile(filepath.Join(bin, "kip-cell"))
			if tt.wantOK {
				if err != nil || statErr != nil || string(installed) != string(agent) {
					t.Fatalf("the right sum: err %v, output %q, installed %q (%v)", err, out, installed, statErr)
				}
				return
			}
			if err == nil {
				t.Fatalf("the step accepted kip-cell with sum %q: %s", tt.sum, out)
			}
			if !strings.Contains(string(out), tt.wantMsg) {
				t.Errorf("output %q does not say %q", out, tt.wantMsg)
			}
			if statErr == nil {
				t.Error("a refused kip-cell was installed")
			}
			if _, err := os.Stat(filepath.Join(bin, "kip-cell.download")); err == nil {
				t.Error("a refused download was left behind")
			}
		})
	}
}
