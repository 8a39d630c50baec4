package localcells

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildPlugin builds kip-plugin-local from the workspace into the test's
// temporary directory and returns its path, as
// test/e2e/framework.BuildBinaries does, for simulator tests that start
// real cells.
func BuildPlugin(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kip-plugin-local")
	cmd := exec.Command("go", "build", "-o", out, "github.com/kipcell/kip/plugins/local/cmd/kip-plugin-local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kip-plugin-local: %v\n%s", err, b)
	}
	return out
}
