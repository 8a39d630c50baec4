package toy_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/kipcell/kip/pluginapi/plugintest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name), got, *update)
}
